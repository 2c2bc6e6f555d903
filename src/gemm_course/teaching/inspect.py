"""Look inside a compiled step: resources, SASS, and an instruction mix a reader understands.

Works on a laptop: the disassembler and ``cuobjdump`` come from PyPI
(``nvidia-cuda-nvdisasm``, ``nvidia-cuda-cuobjdump``); a CUDA toolkit on ``PATH`` also works.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

# SASS opcode (first dotted part) -> class. Order matters: the first matching prefix wins.
SASS_CLASSES = [
    ("tensor-core MMA", ("HGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCMMA", "UTCOMMA", "HMMA", "IMMA", "QGMMA")),
    ("tensor memory", ("LDTM", "STTM", "UTCBAR", "UTCATOM", "UTCCP", "UTCSHIFT")),
    ("TMA copy", ("UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH", "UBLKCP", "UTMAREDG")),
    ("shared memory", ("LDSM", "STSM", "LDS", "STS", "ATOMS", "LDGSTS")),
    ("barrier/sync", ("SYNCS", "BAR", "MEMBAR", "DEPBAR", "WARPSYNC", "BSYNC", "BSSY", "ERRBAR", "FENCE", "CCTL", "WARPGROUP")),
    ("global load/store", ("LDG", "STG", "RED", "ATOMG", "LD", "ST")),
    ("SIMT FMA", ("FFMA", "FHFMA", "HFMA2", "FMUL", "FADD")),
    ("type conversion", ("F2FP", "F2F", "I2F", "F2I")),
    ("integer/address math", ("IMAD", "IADD3", "LEA", "SHF", "LOP3", "IABS", "UIADD3", "UIMAD", "ULEA", "USHF", "ULOP3", "VIADD",
                              "IMNMX", "SEL", "ISETP", "USEL", "UISETP", "PRMT", "USETMAXREG")),
    ("moves/control", ("MOV", "UMOV", "S2R", "S2UR", "R2UR", "LDC", "LDCU", "ULDC", "BRA", "EXIT", "NOP", "CS2R", "SHFL", "VOTE",
                       "ELECT", "PLOP3", "R2P", "P2R", "BMOV", "CALL", "RET", "YIELD", "ENDCOLLECTIVE", "ACQBULK", "UPRMT",
                       "UBMSK", "UFLO", "POPC", "FLO", "MUFU", "FSETP", "FSEL", "FMNMX")),
]


def classify(opcode: str) -> str:
    base = opcode.split(".")[0]
    for name, prefixes in SASS_CLASSES:
        if base in prefixes:
            return name
    for name, prefixes in SASS_CLASSES:
        if any(base.startswith(p) for p in prefixes):
            return name
    return "other"


@functools.lru_cache(maxsize=None)
def tool(name: str) -> str:
    """Path of ``nvdisasm`` / ``cuobjdump``: PyPI's wheels first, then ``PATH``, then the CUDA home."""
    candidates = []
    for base in sys.path:
        candidates += glob.glob(os.path.join(base, "nvidia", "cu*", "bin", name))
        candidates += glob.glob(os.path.join(base, "nvidia", "cuda_*", "bin", name))
    found = shutil.which(name)
    if found:
        candidates.append(found)
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", name))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError(
        f"{name} not found: pip install nvidia-cuda-{'nvdisasm' if name == 'nvdisasm' else 'cuobjdump'} "
        "(the course's requirements include it), or put a CUDA toolkit on PATH"
    )


def _run_on_cubin(args, cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        out = subprocess.run(args + [path], capture_output=True, text=True, check=True)
        return out.stdout
    finally:
        os.unlink(path)


@dataclasses.dataclass(frozen=True)
class Resources:
    kernel: str
    registers: int  # per thread
    static_smem: int  # bytes, declared in the kernel
    dynamic_smem: Optional[int]  # bytes requested at launch (from the PTX/launch), None if unknown
    stack: int  # bytes of stack frame per thread
    local: int  # bytes of local memory per thread (spills land here)

    @property
    def spills(self) -> bool:
        return self.local > 0 or self.stack > 0


def resources(cubin: bytes) -> list:
    """Registers, shared memory, stack and local memory of each kernel in ``cubin``."""
    text = _run_on_cubin([tool("cuobjdump"), "--dump-resource-usage"], cubin)
    out = []
    for name, body in re.findall(r"Function (\S+?):\s*\n\s*(REG:.*)", text):
        vals = dict(re.findall(r"(\w+):(\d+)", body))
        out.append(
            Resources(
                kernel=name,
                registers=int(vals.get("REG", 0)),
                static_smem=int(vals.get("SHARED", 0)),
                dynamic_smem=None,
                stack=int(vals.get("STACK", 0)),
                local=int(vals.get("LOCAL", 0)),
            )
        )
    return out


def sass(cubin: bytes) -> str:
    """The SASS listing of ``cubin`` (``nvdisasm -c``: code sections only)."""
    return _run_on_cubin([tool("nvdisasm"), "-c"], cubin)


# nvdisasm's names for the raw instruction streams of the course's targets
RAW_ARCH = {"sm_90a": "SM90a", "sm_100a": "SM100a"}


def code_sections(cubin: bytes) -> list:
    """``[(name, bytes)]`` of the code sections (``.text.*``) of a cubin (a 64-bit little-endian ELF)."""
    import struct

    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)

    def header(i):  # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        return struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize)

    strings = header(names)[4]
    out = []
    for i in range(count):
        name_at, _, _, _, offset, size = header(i)
        start = strings + name_at
        name = cubin[start:cubin.index(b"\0", start)].decode()
        if name.startswith(".text."):
            out.append((name, cubin[offset:offset + size]))
    return out


def sass_many(cubins, target: str) -> list:
    """The SASS of each cubin (all compiled for ``target``) from one ``nvdisasm`` run: starting the
    disassembler costs ~0.5 s of CPU whatever it reads, so one run over the code sections of all of
    them, laid end to end as a raw instruction stream (``nvdisasm -b SM90a``), split back per cubin
    by address. The instructions are those of :func:`sass`, one cubin at a time; labels and section
    headers are not (count with :func:`opcodes` and :func:`instruction_mix`, not :func:`sass_loops`)."""
    import bisect

    cubins = list(cubins)
    if not cubins:
        return []
    starts, chunks, at = [], [], 0
    for cubin in cubins:
        starts.append(at)
        for _, code in code_sections(cubin):
            chunks.append(code)
            at += len(code)
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
        f.write(b"".join(chunks))
        path = f.name
    try:
        text = subprocess.run([tool("nvdisasm"), "-b", RAW_ARCH[target], path], capture_output=True, text=True,
                              check=True).stdout
    finally:
        os.unlink(path)
    listings: list = [[] for _ in cubins]
    for line in text.splitlines():
        m = _SASS_ADDRESS.match(line)
        if m:
            listings[bisect.bisect_right(starts, int(m.group(1), 16)) - 1].append(line)
    return ["\n".join(lines) + "\n" for lines in listings]


_SASS_ADDRESS = re.compile(r"\s*/\*([0-9a-f]{4,})\*/")
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def opcodes(sass_text: str) -> collections.Counter:
    """Count SASS opcodes (with their modifiers) in a listing."""
    return collections.Counter(m.group(1) for m in _SASS_LINE.finditer(sass_text))


def instruction_mix(sass_text: str) -> collections.OrderedDict:
    """Static instruction counts per class, largest first (``{'tensor-core MMA': 8, ...}``)."""
    counts = collections.Counter()
    for op, n in opcodes(sass_text).items():
        counts[classify(op)] += n
    return collections.OrderedDict(counts.most_common())


_SASS_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_SASS_BACK_BRANCH = re.compile(r"BRA(?:\.\w+)*\s+(?:!?U?P\w+,\s*)?`?\(?(\.L_x_\d+)\)?")


def sass_loops(sass_text: str) -> list:
    """The loops of a SASS listing: every backward branch ``BRA label`` to a label above it.

    Returns ``[{'label', 'start', 'end', 'opcodes': Counter, 'lines': [SASS lines]}]``, innermost (shortest) first; the
    opcodes are those between the label and the branch, i.e. one trip around the loop.
    """
    labels, instructions, lines, loops = {}, [], [], []
    for line in sass_text.splitlines():
        label = _SASS_LABEL.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        m = _SASS_LINE.search(line)
        if not m:
            continue
        instructions.append(m.group(1))
        lines.append(line.strip())
        target = _SASS_BACK_BRANCH.search(line)
        if target and target.group(1) in labels:
            start = labels[target.group(1)]
            loops.append({"label": target.group(1), "start": start, "end": len(instructions),
                          "opcodes": collections.Counter(instructions[start:]), "lines": lines[start:]})
    loops = [lp for lp in loops if lp["end"] - lp["start"] > 1]  # drop `BRA self` traps
    return sorted(loops, key=lambda lp: lp["end"] - lp["start"])


def opcode_family_counts(report, families: dict) -> dict:
    """Static SASS counts per opcode family: ``families = {name: (base opcodes...)}``; an opcode
    belongs to a family when its first dotted part is one of the family's (``STG.E`` -> ``STG``).
    ``report``: a :class:`Report` or ``{opcode: count}``."""
    ops = dict(report.top_opcodes) if hasattr(report, "top_opcodes") else dict(report)
    return {name: sum(n for op, n in ops.items() if op.split(".")[0] in bases) for name, bases in families.items()}


def ptx_count(ptx: str, pattern: str) -> int:
    """How many PTX instructions start with ``pattern`` (e.g. ``'tcgen05.mma'``, ``'wgmma.mma_async'``)."""
    return len(re.findall(r"^\s*(?:@%?!?\w+\s+)?" + re.escape(pattern), ptx, flags=re.M))


def dynamic_smem_bytes(ptx: str) -> Optional[int]:
    """Shared memory the kernel declares in PTX (static arrays plus the dynamic extern size hint)."""
    sizes = [int(x) for x in re.findall(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx)]
    return sum(sizes) if sizes else None


# ---- constants a kernel's PTX carries: what the CPU can prove about a kernel it cannot run ------


def _register_values(ptx: str) -> dict:
    """``{register: {immediates}}`` from ``mov`` of a literal (a register may be set in several blocks)."""
    values: dict = collections.defaultdict(set)
    for reg, imm in re.findall(r"^\s*mov\.[bsu](?:16|32|64)\s+(%\w+),\s*(-?(?:0[xX][0-9a-fA-F]+|\d+));", ptx, flags=re.M):
        values[reg].add(int(imm, 0))
    return values


def _operand_values(ptx: str, pattern: str, operand: int) -> list:
    """For each instruction matching ``pattern``, the literal value(s) of its ``operand``-th operand.

    Operands are split on commas after the opcode; a register operand resolves through ``mov`` of a
    literal. Each instruction contributes one entry: an int, or a sorted tuple when several literals
    reach the register, or None when none does.
    """
    regs = _register_values(ptx)
    out = []
    for args in re.findall(r"^\s*(?:@%?!?\w+\s+)?" + pattern + r"\S*\s+([^;]*);", ptx, flags=re.M):
        parts = [a.strip() for a in re.split(r",(?![^\[{]*[\]}])", args)]
        if operand >= len(parts):
            out.append(None)
            continue
        arg = parts[operand]
        if re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|\d+)", arg):
            out.append(int(arg, 0))
            continue
        found = sorted(regs.get(arg, ()))
        out.append(found[0] if len(found) == 1 else (tuple(found) or None))
    return out


def expect_tx_bytes(ptx: str) -> list:
    """Bytes each ``mbarrier.arrive.expect_tx`` announces (what the TMA loads of one stage must deliver)."""
    return _operand_values(ptx, re.escape("mbarrier.arrive.expect_tx"), 2)


def mbarrier_init_counts(ptx: str) -> list:
    """Arrival count of every ``mbarrier.init`` in program order (one entry per barrier initialized)."""
    return _operand_values(ptx, re.escape("mbarrier.init"), 1)


def tmem_alloc_columns(ptx: str) -> list:
    """Columns requested by each ``tcgen05.alloc`` (tensor memory is allocated in powers of two >= 32)."""
    return _operand_values(ptx, re.escape("tcgen05.alloc"), 1)


def tmem_dealloc_columns(ptx: str) -> list:
    return _operand_values(ptx, re.escape("tcgen05.dealloc"), 1)


def threads_per_cta(ptx: str) -> Optional[int]:
    """Threads per CTA the kernel requires (``.reqntid x, y, z``)."""
    m = re.search(r"\.reqntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", ptx)
    if not m:
        return None
    x, y, z = (int(v) if v else 1 for v in m.groups())
    return x * y * z


def mma_accumulate_predicates(ptx: str) -> list:
    """How each ``tcgen05.mma`` (program order) sets its enable-input-D predicate: True or False when
    the predicate register is only ever a literal true/false, ``"carried"`` when it is literal false
    on entry and literal true later (a loop-carried flag: the first MMA of a loop overwrites), else
    ``"runtime"`` (computed, e.g. from the K-tile index)."""
    literal: dict = collections.defaultdict(set)
    for reg, value in re.findall(r"^\s*mov\.pred\s+(%p\d+),\s*(-?\d+);", ptx, flags=re.M):
        literal[reg].add(int(value) != 0)
    computed = set(re.findall(r"^\s*(?:@%?!?\w+\s+)?(?!mov\.pred)[a-z][\w.:]*\s+(%p\d+)[,|]", ptx, flags=re.M))
    preds = re.findall(r"^\s*(?:@%?!?\w+\s+)?tcgen05\.mma\S*\s+[^;]*,\s*(%p\d+);", ptx, flags=re.M)
    out = []
    for p in preds:
        if p in computed:
            out.append("runtime")
        elif literal[p] == {True}:
            out.append(True)
        elif literal[p] == {False}:
            out.append(False)
        else:
            out.append("carried")
    return out


def instruction_positions(ptx: str, pattern: str) -> list:
    """Line numbers of the PTX instructions starting with ``pattern``, for checks of program order."""
    rx = re.compile(r"^\s*(?:@%?!?\w+\s+)?" + re.escape(pattern))
    return [i for i, line in enumerate(ptx.splitlines()) if rx.match(line)]


@dataclasses.dataclass
class Report:
    step_key: str
    target: str
    config: object
    resources: Resources
    smem_bytes: int  # what one CTA asks for: static + dynamic
    mix: collections.OrderedDict
    top_opcodes: list
    ptx_lines: int
    sass_lines: int

    def lines(self) -> list:
        r = self.resources
        out = [
            f"{self.step_key} for {self.target}, config {self.config}",
            f"  registers/thread {r.registers}, shared memory/CTA {self.smem_bytes} B, "
            f"stack {r.stack} B, local {r.local} B -> {'SPILLS' if r.spills else 'no spills'}",
            f"  {self.ptx_lines} PTX lines, {self.sass_lines} SASS instructions",
            "  instruction mix (static counts):",
        ]
        out += [f"    {name:<22} {n:>6}" for name, n in self.mix.items()]
        out.append("  most frequent opcodes: " + ", ".join(f"{op} x{n}" for op, n in self.top_opcodes[:8]))
        return out

    def __str__(self):
        return "\n".join(self.lines())


def report(artifacts, listing: Optional[str] = None) -> Report:
    """Resources and instruction mix of a compiled step (:class:`gemm_course.runtime.arch.Artifacts`);
    ``listing``: its SASS when already disassembled (:func:`sass_many`)."""
    res = resources(artifacts.cubin)
    kernel = max(res, key=lambda r: r.registers) if res else Resources("?", 0, 0, None, 0, 0)
    listing = sass(artifacts.cubin) if listing is None else listing
    ops = opcodes(listing)
    smem = smem_request(artifacts, res) or kernel.static_smem
    return Report(
        step_key=artifacts.step_key,
        target=artifacts.target,
        config=artifacts.config,
        resources=kernel,
        smem_bytes=smem,
        mix=instruction_mix(listing),
        top_opcodes=ops.most_common(),
        ptx_lines=artifacts.ptx.count("\n"),
        sass_lines=sum(ops.values()),
    )


def smem_request(artifacts, kernels: Optional[list] = None) -> Optional[int]:
    """Static + dynamic shared memory per CTA, as the host code asks for it at launch (``kernels``:
    :func:`resources` of its cubin, when already read)."""
    static = sum(r.static_smem for r in (resources(artifacts.cubin) if kernels is None else kernels)[:1])
    dyn = getattr(artifacts, "dynamic_smem", None)
    if dyn is None:
        return static or None
    return static + dyn


def compare(parent, step, extra_markers=()) -> tuple:
    """Print the reports of a step and its parent and check the step's PTX markers (the chapters' cell).

    Returns ``({key: Report}, step_ptx)``; raises AssertionError if a marker the step claims is absent.
    """
    from ..runtime import arch

    arts = {s.key: arch.compile_step(s) for s in (parent, step)}
    reports = {key: report(art) for key, art in arts.items()}
    for r in reports.values():
        print(r, "\n")
    ptx = arts[step.key].ptx
    for marker in tuple(step.ptx_markers) + tuple(extra_markers):
        print(f"PTX {marker!r}: {ptx.count(marker)}")
        assert marker in ptx, f"{step.key}: PTX lacks {marker!r}"
    return reports, ptx
