# gemm-course: `make book` builds the book (executing every notebook), `make test` runs the tests.
# Both create the environment first (.venv, pinned requirements, this package in editable mode).
# A chapter's one source is its MyST Markdown notebook, notebooks/NN_*.md; `make notebooks` writes
# the .ipynb that Jupyter opens and nbval runs (git-ignored).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# installed only where no torch is importable (GPU machines bring a CUDA build)
TORCH_PIN := torch==2.13.0
# myst-nb's jupyter-cache for this book (its default place, next to _build/html)
NB_CACHE  := _build/.jupyter_cache
COMPILE_CACHE := $(CURDIR)/.cache/compile

.PHONY: setup test test-fast test-gpu book notebooks vendor browser clean b200

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_PIN)
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

setup: $(STAMP)

# The notebook tests (nbval), then the book, then the unit, compile, book/browser and, where a GPU
# is present, GPU tests. Each chapter runs once: nbval runs it and, with --nb-cache, stores the run
# in the book's jupyter-cache, where the book build finds it (scripts/chapter_notebooks.py); the
# other pages run in the build. tests/test_book.py then checks the book (warning-clean, the chapters
# from nbval's runs, every page in headless Chromium, nothing loaded from the network).
# The kernels compiled for the chapters (on fake operands) are kept in $(COMPILE_CACHE) for the
# tests that compile them again in later processes (arch.compile_step; keyed by the package's sources).
test: $(STAMP) vendor browser notebooks
	rm -rf $(NB_CACHE) $(COMPILE_CACHE)
	GEMM_COURSE_COMPILE_CACHE=$(COMPILE_CACHE) $(BIN)/python -m pytest -q notebooks --nbval-lax --nbval-cell-timeout=600 --nb-cache=$(NB_CACHE)
	$(BUILD_BOOK)
	GEMM_COURSE_COMPILE_CACHE=$(COMPILE_CACHE) GEMM_COURSE_CHAPTERS_RAN=nbval $(BIN)/python -m pytest -q tests

# The pure-Python tests only (pytest -m fast: no kernel compiled, no book needed; under a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m fast tests

# The GPU lane, as .github/workflows/ci.yml runs it on self-hosted H100/H200/B200 runners (CI's
# `make test` does not): the gpu-marked tests, then every chapter under nbval with its live cells (on
# a course GPU they launch, check and time the kernels). Both run; it fails if either failed. Without
# a course GPU it says so first: the gpu tests skip and the chapters run their CPU parts.
test-gpu: $(STAMP) notebooks
	@$(BIN)/python -c "from gemm_course.runtime.arch import machine; m = machine(); print('make test-gpu:', \
		f'{m.gpu_name} ({m.target})' if m.target else 'no GPU with a course target (sm_90a, sm_100a): the gpu tests skip, the chapters run their CPU parts')"
	status=0; \
	$(BIN)/python -m pytest -q -m gpu tests || status=1; \
	$(BIN)/python -m pytest -q notebooks --nbval-lax --nbval-cell-timeout=600 || status=1; \
	exit $$status

# The B200 kit (scripts/b200_validate.sh): check, sanitize and time the Blackwell ladder, records into
# results/<gpu>/ (nvidia-b200 on a B200). Builds .venv first if needed, then refuses any other GPU
# in its first phase (Hopper: scripts/gpu_ladder.sh).
b200: $(STAMP)
	@test -n "$(OUT)" || { echo "usage: make b200 OUT=folder-for-logs-and-records"; exit 2; }
	PY=$(BIN)/python bash scripts/b200_validate.sh "$(OUT)"

# The book: vendored web assets (npm registry, pinned), then every page built from scratch with
# its notebooks executed (--all: a fresh Sphinx environment, so no page is reused from an earlier
# run; the jupyter-cache emptied, so no notebook's outputs are either); -W turns every Sphinx
# warning into a failure. _build/html/.book-built marks success.
book: $(STAMP) vendor
	rm -rf $(NB_CACHE)
	$(BUILD_BOOK)

# Pages take their outputs from $(NB_CACHE) and run when missing from it (_config.yml: execute).
define BUILD_BOOK
rm -rf _build/html
$(BIN)/jupyter-book build . --all -W --keep-going
touch _build/html/.book-built
endef

# The chapters' .ipynb (for Jupyter, and what nbval runs), written from notebooks/NN_*.md where
# missing or older than their source, as make would. To change a chapter, edit its .md.
notebooks: $(STAMP)
	$(BIN)/python scripts/chapter_notebooks.py

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
