# gemm-course: `make book` builds the book (executing every notebook), `make test` runs the tests.
# Both create the environment first (.venv, pinned requirements, this package in editable mode).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CPU_TORCH := torch==2.13.0

.PHONY: setup test test-gpu book clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(CPU_TORCH)
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

setup: $(STAMP)

# Unit, compile (both architectures, on the CPU), notebook (nbval) and, where a GPU is present, GPU tests.
test: $(STAMP)
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu tests

book: $(STAMP)
	$(BIN)/jupyter-book build . -W --keep-going

clean:
	rm -rf _build
