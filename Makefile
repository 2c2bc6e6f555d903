# gemm-course: `make book` builds the book (executing every notebook), `make test` runs the tests.
# Both create the environment first (.venv, pinned requirements, this package in editable mode).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CPU_TORCH := torch==2.13.0

.PHONY: setup test test-gpu book vendor browser clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(CPU_TORCH)
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

setup: $(STAMP)

# Unit, compile (both architectures, on the CPU), notebook (nbval) and, where a GPU is present, GPU
# tests; tests/test_book.py checks the book that `book` just built (warning-clean, every page in
# headless Chromium, nothing loaded from the network).
test: $(STAMP) book browser
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu tests

# The book: vendored web assets (npm registry, pinned), then every page built from scratch with
# its notebooks executed (--all: a fresh Sphinx environment, so no page is reused from an earlier
# run); -W turns every Sphinx warning into a failure. _build/html/.book-built marks success.
book: $(STAMP) vendor
	rm -rf _build/html
	$(BIN)/jupyter-book build . --all -W --keep-going
	touch _build/html/.book-built

# RequireJS and @jupyter-widgets/html-manager into book/_vendor/ (git-ignored); needs npm.
vendor:
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -q && apt-get install -y -q npm; } \
		|| { echo "make vendor: npm is missing (Debian: apt-get install -y npm)"; exit 1; }
	$(PYTHON) scripts/vendor_web_assets.py

# Debian's Chromium for the browser test (installed when missing and we are root, as on CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -q && apt-get install -y -q chromium; } \
		|| echo "make browser: chromium is missing and we are not root; the browser test will be skipped"

clean:
	rm -rf _build
