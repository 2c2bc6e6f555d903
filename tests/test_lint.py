"""ruff (pinned in requirements.txt, configured in pyproject.toml) finds nothing in src, tests and scripts."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_finds_nothing():
    command = [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "src", "tests", "scripts"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert "No module named ruff" not in out.stderr, "ruff is missing: pip install -r requirements.txt"
    assert out.returncode == 0, out.stdout + out.stderr
