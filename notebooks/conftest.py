"""nbval runs the chapter notebooks (``pytest notebooks --nbval-lax``, after ``make notebooks``).
With ``--nb-cache DIR`` their executions also go to the book build's jupyter-cache
(scripts/chapter_notebooks.py says how; ``make test`` does that, so each chapter runs once)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from chapter_notebooks import pytest_addoption, pytest_configure  # noqa: E402,F401  (pytest's hooks)
