"""The pages' ``gemm-course inspect`` commands, run with their arguments on the CPU (they compile;
the other commands the pages suggest are checked in test_pages.py)."""

import pytest
from test_pages import _all_suggested, _cli_argv

pytestmark = pytest.mark.compile


def test_the_inspect_commands_run(capsys):
    from gemm_course import cli

    ran = 0
    for page, command, _ in _all_suggested():
        argv = _cli_argv(command)
        if argv is not None and argv[0] == "inspect":
            assert cli.main(argv) in (0, None), f"{page}: {command}"
            ran += 1
    assert ran
    capsys.readouterr()
