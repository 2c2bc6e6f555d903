"""Every instruction the course names, as PTX, as SASS and as the CuTeDSL call that emits it.

The book's reference page prints :data:`INSTRUCTIONS`; ``tests/test_instructions.py`` compiles the
step each row names and checks that its PTX and its SASS really contain the row's instruction,
so the table cannot drift from the kernels.
"""

from __future__ import annotations

import dataclasses
import json
import os


@dataclasses.dataclass(frozen=True)
class Instruction:
    what: str  # in words
    ptx: str  # the PTX instruction (its leading part)
    sass: str  # the SASS opcode (its leading part) it becomes
    cutedsl: str  # what the course's code calls
    chapter: str  # the Sphinx label of the chapter that teaches it
    step: str  # a step whose compiled kernel has it


def _load() -> tuple:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "instructions.json")) as f:
        return tuple(Instruction(**row) for row in json.load(f))


INSTRUCTIONS = _load()  # the table itself is data: instructions.json, one row per instruction
