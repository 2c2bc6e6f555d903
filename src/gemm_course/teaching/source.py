"""A step as one complete listing, and as its change against its parent.

Each step's kernel file holds only what its chapter adds: the class ``Gemm`` subclasses the
previous step's and overrides a few methods. :func:`flatten` resolves the inheritance: the step's
``Config`` with every field (and the step that introduced it), the step's own choice of config per
shape if it has one (:data:`HOST_FUNCTIONS`), then every method its ``Gemm`` uses, each from the
step that defines it last, and only the methods the step's launch reaches (:func:`reachable`:
steps 5 on inherit step 2's single-CTA ``mainloop`` and ``epilogue``, which their kernels never
call). (``check_config`` and ``can_implement`` are left out: each step's delegates to its
parent's, so their listings would not be the whole check.) :func:`diff` compares the flattened parent with
the flattened step, so the diff is the chapter's idea and nothing else; :func:`changed_lines`
counts it. ``gemm-course source STEP`` and ``gemm-course diff STEP`` print them.
:func:`phase_source` cuts one numbered phase (``# 3. main loop``) out of a step's kernel.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import re
import textwrap
from typing import Optional

from ..runtime import ladder

_SKIP = {"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__", "__annotations__"}


def parent(step) -> Optional[ladder.Step]:
    """The step this one is written against: the previous step of the same architecture."""
    step = ladder.get(step)
    if step.number <= 2:
        return None  # step 2 starts from scratch (step 1 is a different kind of kernel)
    return ladder.ladder[step.arch].get(step.number - 1)


def _defining_step(obj) -> str:
    module = getattr(obj, "__module__", "") or ""
    for s in ladder.steps():
        if s.module_name == module:
            return s.key
    return module.rpartition(".")[2]


def _config_lines(step) -> list:
    config_cls = step.load().Config
    lines = [f"class Config:  # {step.key}, every field resolved"]
    defaults = step.default
    introduced = {}
    for cls in reversed(config_cls.__mro__):
        for name in getattr(cls, "__annotations__", {}):
            introduced.setdefault(name, _defining_step(cls))
    for f in dataclasses.fields(defaults):
        lines.append(f"    {f.name} = {getattr(defaults, f.name)!r}  # from {introduced.get(f.name, '?')}")
    return lines


HOST_FUNCTIONS = ("config_for",)  # module-level functions that decide what a launch runs


def _host_function_lines(step) -> list:
    """Each of :data:`HOST_FUNCTIONS` the step's module has, tagged with the step that defines it."""
    mod = step.load()
    lines = []
    for name in HOST_FUNCTIONS:
        func = getattr(mod, name, None)
        if not callable(func):
            continue
        lines += ["", f"# ---- {name}, from {_defining_step(func)}"]
        lines += textwrap.dedent(inspect.getsource(func)).rstrip().splitlines()
    return lines


def _all_methods(step) -> dict:
    """``{name: (defining step, source)}`` of every member ``Gemm`` has, most-derived definition."""
    gemm = step.load().Gemm
    out = {}
    for cls in gemm.__mro__:
        if cls is object:
            continue
        for name, value in cls.__dict__.items():
            if name in _SKIP or name in out:
                continue
            func = getattr(value, "__func__", value)  # staticmethod / classmethod
            func = getattr(func, "__wrapped__", func)  # cute.jit / cute.kernel keep the original here
            if not callable(func):
                out[name] = (_defining_step(cls), f"{name} = {value!r}")
                continue
            try:
                src = textwrap.dedent(inspect.getsource(func))
            except (OSError, TypeError):
                continue
            out[name] = (_defining_step(cls), src.rstrip())
    return out


ROOTS = ("__init__", "__call__")  # where a launch enters ``Gemm``; static and class methods are entry points too


def _self_references(src: str) -> set:
    """The names ``src`` reads off ``self`` (``self.mainloop(...)``, ``self.tile_mnk``)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"}


def reachable(step) -> set:
    """The ``Gemm`` methods a launch of ``step`` can reach: from :data:`ROOTS` and the static and
    class methods (the host calls those on the class, e.g. ``workspace_shapes``), every method named
    as ``self.NAME`` in a reached method's source, most-derived definitions only (a static call
    graph: it follows the source, not the values)."""
    step = ladder.get(step)
    members = _all_methods(step)
    gemm = step.load().Gemm
    roots = {name for name in members if name in ROOTS}
    for cls in gemm.__mro__:
        roots |= {name for name, value in vars(cls).items()
                  if name in members and isinstance(value, (staticmethod, classmethod))}
    seen, todo = set(roots), list(roots)
    while todo:
        for name in _self_references(members[todo.pop()][1]):
            if name in members and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def _methods(step) -> dict:
    """``{name: (defining step, source)}`` of every attribute of ``Gemm`` and every method
    :func:`reachable` from its launch, most-derived definition."""
    keep = reachable(step)
    return {name: value for name, value in _all_methods(step).items() if name in keep or not _is_method(value[1])}


def _is_method(src: str) -> bool:
    return "\n" in src or src.lstrip().startswith(("def ", "@"))


def flatten(step) -> str:
    """The step as one listing: docstring, resolved Config, its host functions, and each ``Gemm``
    member tagged with its step."""
    step = ladder.get(step)
    mod = step.load()
    head = [f"# {step.key}: {step.title}", f'"""{(mod.__doc__ or "").strip()}"""', ""]
    body = _config_lines(step) + _host_function_lines(step) + ["", "", f"class Gemm:  # {step.key}, inheritance resolved"]
    members = _methods(step)
    attributes = sorted((n, v) for n, v in members.items() if not _is_method(v[1]))
    methods = [(n, v) for n, v in members.items() if (n, v) not in attributes]
    for name, (where, src) in attributes:
        body.append(f"    {src}  # from {where}")
    for name, (where, src) in sorted(methods, key=lambda item: _order(item[0])):
        body.append("")
        body.append(f"    # ---- {name}, from {where}")
        body += ["    " + line if line else "" for line in src.splitlines()]
    return "\n".join(head + body) + "\n"


def _order(name: str) -> tuple:
    # host side first, then the kernel, then the device helpers alphabetically
    rank = {"__init__": 0, "__call__": 1, "launch_kernel": 2, "kernel": 3}
    return (rank.get(name, 4), name)


def _code_only(listing: str) -> list:
    """The flattened listing without its docstring and provenance tags: what a diff should compare."""
    _, _, rest = listing.partition('"""')
    _, _, rest = rest.partition('"""')
    out = []
    for line in rest.splitlines():
        line = line.split("  # from ")[0].split(", from ")[0]
        out.append((line.split("  #")[0] if line.startswith("class ") else line).rstrip())
    return out


def diff(step, context: int = 3) -> str:
    """Unified diff of the flattened parent against the flattened step (code only)."""
    step = ladder.get(step)
    base = parent(step)
    if base is None:
        return f"# {step.key} has no parent in the ladder: gemm-course source {step.key} shows it whole\n"
    lines = difflib.unified_diff(
        _code_only(flatten(base)), _code_only(flatten(step)), fromfile=base.key, tofile=step.key, lineterm="", n=context
    )
    return "\n".join(lines) + "\n"


def changed_lines(step) -> tuple:
    """(lines added, lines removed) of :func:`diff`."""
    text = diff(step, context=0).splitlines()
    added = sum(1 for line in text if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in text if line.startswith("-") and not line.startswith("---"))
    return added, removed


def phase_source(step, number: int) -> str:
    """The source of phase ``number`` of a step's kernel, cut at its numbered banners
    (``# 3. main loop ...`` up to ``# 4. ...``), searched in ``Gemm.kernel`` and then in the
    class's other methods (a kernel may delegate its main loop to ``Gemm.mainloop``)."""
    gemm = ladder.get(step).load().Gemm
    names = ["kernel"] + sorted(n for n, v in vars(gemm).items() if callable(v) and n != "kernel")
    for base in gemm.__mro__[1:]:
        names += sorted(n for n, v in vars(base).items() if callable(v) and n not in names)
    for name in names:
        try:
            lines = inspect.getsource(getattr(gemm, name)).splitlines()
        except (TypeError, OSError):
            continue
        start = next((i for i, line in enumerate(lines) if re.match(rf"\s*# {number}\. ", line)), None)
        if start is not None:
            break
    else:
        raise ValueError(f"{ladder.get(step).key}'s kernel has no phase banner '# {number}. '")
    end = next((i for i, line in enumerate(lines[start + 1:], start + 1) if re.match(r"\s*# \d+\. ", line)), len(lines))
    body = lines[start:end]
    indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
    return "\n".join(line[indent:] for line in body).rstrip() + "\n"


_BANNER = re.compile(r"\s*# (\d+[a-z]?)\. ")


def method_source(step, name: str) -> tuple:
    """``(defining step, source)`` of ``Gemm.name`` as ``step`` resolves it (the most-derived
    definition, e.g. ``load_k_tile`` of ``sm100/6`` comes from ``sm100/5``)."""
    members = _all_methods(ladder.get(step))
    if name not in members:
        raise ValueError(f"{ladder.get(step).key}'s Gemm has no member {name!r}")
    return members[name]


def _block(lines: list, start: int, stop: Optional[str] = None) -> str:
    """``lines[start]`` and what follows it: a compound statement (a line ending in ``:``, such as
    ``if last:``) with its body only; any other line with the lines after it up to the end of the
    block it sits in (the first line indented less than it); either way up to the first later
    line matching ``stop`` or a numbered banner (``# 2b. ...``). Dedented, trailing blank lines
    dropped."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    compound = lines[start].split("#")[0].rstrip().endswith(":")
    end = start + 1
    while end < len(lines):
        line = lines[end]
        depth = len(line) - len(line.lstrip())
        if line.strip() and (depth < indent or (compound and depth == indent) or _BANNER.match(line)
                             or (stop is not None and re.search(stop, line))):
            break
        end += 1
    body = lines[start:end]
    while body and not body[-1].strip():
        body.pop()
    return textwrap.dedent("\n".join(body)) + "\n"


def region(step, label: str, method: str = "kernel") -> str:
    """The lines of ``Gemm.method`` (as ``step`` resolves it) under the banner ``# {label}. ...``
    (``"2b"`` finds ``# 2b. MMAs ...``): from the banner to the next banner or to the end of the
    block the banner opens (the first line indented less than the banner), dedented."""
    where, src = method_source(step, method)
    lines = src.splitlines()
    start = next((i for i, line in enumerate(lines) if (m := _BANNER.match(line)) and m.group(1) == label), None)
    if start is None:
        raise ValueError(f"{where}'s {method} has no banner '# {label}. '")
    return _block(lines, start)


def excerpt(step, method: str, start: str, occurrence: int = 1, stop: Optional[str] = None) -> str:
    """Lines of ``Gemm.method`` (as ``step`` resolves it) for a method without banners: from the
    ``occurrence``-th line matching the regular expression ``start`` to the end of the block that
    line sits in, or to the first later line matching ``stop`` (excluded), dedented (:func:`_block`:
    ``start`` = ``r"if last:"`` cuts the ``if`` with its body; a plain statement runs on through
    its siblings to the end of their block)."""
    where, src = method_source(step, method)
    lines = src.splitlines()
    hits = [i for i, line in enumerate(lines) if re.search(start, line)]
    if len(hits) < occurrence:
        raise ValueError(f"{where}'s {method} has {len(hits)} line(s) matching {start!r}, not {occurrence}")
    return _block(lines, hits[occurrence - 1], stop)


_REGISTER_LIST = re.compile(r"\{(%\w+)(?:, %\w+){3,}, (%\w+)\}")


def ptx_lines(ptx: str, patterns, per_pattern: int = 1, after=None, before=None) -> list:
    """PTX instructions found by pattern, for an excerpt's "compiles to" block.

    For each regular expression of ``patterns`` (or ``(expression, count)``), the first
    ``per_pattern`` (or ``count``; a negative count takes the last ones) instructions that match it,
    searched in each stripped line (comments, labels and directives are skipped), returned in the
    compiled program's order with long register lists shortened (``{%r1, ..., %r32}``). ``after``
    and ``before`` narrow the search to the instructions from the first match of ``after`` on
    and before the first later match of ``before`` (either may be ``(expression, n)``: its n-th
    match; the MMA warp's wait is the last
    ``mbarrier.try_wait`` before the first ``tcgen05.mma``). A pattern that matches nothing raises:
    an excerpt must show what its code compiles to."""
    patterns = [patterns] if isinstance(patterns, (str, tuple)) else list(patterns)
    lines = [line.strip() for line in ptx.splitlines()]
    code = [i for i, line in enumerate(lines) if line and not line.startswith(("//", ".", "$", "{", "}"))]
    for bound, keep in ((after, lambda i, a: i >= a), (before, lambda i, a: i < a)):
        if bound is None:
            continue
        bound, nth = bound if isinstance(bound, tuple) else (bound, 1)
        anchors = [i for i in code if re.search(bound, lines[i])]
        if len(anchors) < nth:
            raise ValueError(f"no PTX instruction matches {bound!r}" + (f" {nth} times" if nth > 1 else ""))
        code = [i for i in code if keep(i, anchors[nth - 1])]
    picked = set()
    for item in patterns:
        pattern, count = item if isinstance(item, tuple) else (item, per_pattern)
        hits = [i for i in code if re.search(pattern, lines[i])]
        if not hits:
            raise ValueError(f"no PTX instruction matches {pattern!r}")
        picked.update(hits[:count] if count > 0 else hits[count:])
    return [_REGISTER_LIST.sub(r"{\1, ..., \2}", lines[i]) for i in sorted(picked)]


# ---- what tcgen05.mma's descriptors say, read from the PTX's constants ---------------------------

SMEM_SWIZZLE_MODES = {0: "none (interleaved)", 1: "128B, 32B atom", 2: "128B", 4: "64B", 6: "32B"}


def smem_descriptor_fields(value: int) -> dict:
    """The fields of a tcgen05 shared-memory descriptor (PTX ISA, tcgen05 "Shared memory
    descriptor"), offsets in bytes: the start address (bits 0-13), the leading and stride byte
    offsets (LBO bits 16-29, SBO bits 32-45; all three in 16-byte units), the version (bits 46-48,
    1 on sm_100a) and the swizzle mode (bits 61-63, :data:`SMEM_SWIZZLE_MODES`)."""
    return {"start": (value & 0x3FFF) << 4, "LBO": ((value >> 16) & 0x3FFF) << 4,
            "SBO": ((value >> 32) & 0x3FFF) << 4, "version": (value >> 46) & 0b111,
            "swizzle": SMEM_SWIZZLE_MODES.get((value >> 61) & 0b111, "?")}


def smem_descriptor_constants(ptx: str) -> list:
    """``(line, value)`` of each PTX instruction that ORs or adds a descriptor's constant bits
    (a 64-bit immediate above bit 40: version, offsets, swizzle) onto a shared-memory address
    (the start field, computed at run time)."""
    found = []
    for line in ptx.splitlines():
        m = re.match(r"\s*(?:or\.b64|add\.s64)\s+%rd\d+, %rd\d+, (\d+);", line)
        if m and int(m.group(1)) >= 1 << 40:
            found.append((line.strip(), int(m.group(1))))
    return found


_FORMATS = {0: "F16", 1: "BF16"}


def instruction_descriptor_fields(value: int) -> dict:
    """The fields of a ``tcgen05.mma.kind::f16`` instruction descriptor (PTX ISA, tcgen05
    "Instruction descriptor"): the accumulator's format (bits 4-5: 0 F16, 1 F32), A's and B's
    (bits 7-9, 10-12: 0 F16, 1 BF16), negate A and B (bits 13, 14), transpose A and B (bits 15,
    16: 0 = K-major), N >> 3 (bits 17-22) and M >> 4 (bits 24-28)."""
    return {"D": {0: "F16", 1: "F32"}.get((value >> 4) & 0b11, "?"),
            "A": _FORMATS.get((value >> 7) & 0b111, "?"), "B": _FORMATS.get((value >> 10) & 0b111, "?"),
            "negate A": (value >> 13) & 1, "negate B": (value >> 14) & 1,
            "A major": "MN" if (value >> 15) & 1 else "K", "B major": "MN" if (value >> 16) & 1 else "K",
            "N": ((value >> 17) & 0x3F) << 3, "M": ((value >> 24) & 0x1F) << 4}


def instruction_descriptor_constants(ptx: str) -> list:
    """``(line, value)`` for the instruction descriptors a kernel selects between: each
    ``selp.b32`` of two immediates that differ only in the negate-A bit (the tiled MMA's run-time
    ``NEGATE_A`` field picks one; the other fields are fixed when the kernel is compiled). The
    value is the one without negation."""
    found = []
    for line in ptx.splitlines():
        m = re.match(r"\s*selp\.b32\s+%r\d+, (\d+), (\d+), %p\d+;", line)
        if m:
            on, off = int(m.group(1)), int(m.group(2))
            if on ^ off == 1 << 13 and off >= 1 << 17:
                found.append((line.strip(), off))
    return found
