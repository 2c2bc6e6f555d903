"""Run a script of CuTeDSL host code (``@cute.jit`` functions compiled and executed on the CPU,
printing with ``cute.printf``) in a fresh interpreter, for tests that compare the kernels'
integer arithmetic on traced values with its Python twin."""

import os
import subprocess
import sys


def printed_words(script: str, args, tmp_path) -> list:
    """The words the script printed when run with ``args``; fails the test if it did not exit 0."""
    path = tmp_path / "host_jit_script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, str(path), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()
