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
    ("integer/address math", ("IMAD", "IADD3", "LEA", "SHF", "LOP3", "IABS", "UIADD3", "UIMAD", "ULEA", "USHF", "ULOP3", "VIADD", "IMNMX", "SEL", "ISETP", "USEL", "UISETP", "PRMT", "USETMAXREG")),
    ("moves/control", ("MOV", "UMOV", "S2R", "S2UR", "R2UR", "LDC", "LDCU", "ULDC", "BRA", "EXIT", "NOP", "CS2R", "SHFL", "VOTE", "ELECT", "PLOP3", "R2P", "P2R", "BMOV", "CALL", "RET", "YIELD", "ENDCOLLECTIVE", "ACQBULK", "UPRMT", "UBMSK", "UFLO", "POPC", "FLO", "MUFU", "FSETP", "FSEL", "FMNMX")),
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


def ptx_count(ptx: str, pattern: str) -> int:
    """How many PTX instructions start with ``pattern`` (e.g. ``'tcgen05.mma'``, ``'wgmma.mma_async'``)."""
    return len(re.findall(r"^\s*(?:@%?!?\w+\s+)?" + re.escape(pattern), ptx, flags=re.M))


def dynamic_smem_bytes(ptx: str) -> Optional[int]:
    """Shared memory the kernel declares in PTX (static arrays plus the dynamic extern size hint)."""
    sizes = [int(x) for x in re.findall(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx)]
    return sum(sizes) if sizes else None


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


def report(artifacts) -> Report:
    """Resources and instruction mix of a compiled step (:class:`gemm_course.arch.Artifacts`)."""
    res = resources(artifacts.cubin)
    kernel = max(res, key=lambda r: r.registers) if res else Resources("?", 0, 0, None, 0, 0)
    listing = sass(artifacts.cubin)
    ops = opcodes(listing)
    smem = smem_request(artifacts) or kernel.static_smem
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


def smem_request(artifacts) -> Optional[int]:
    """Static + dynamic shared memory per CTA, as the host code asks for it at launch."""
    static = sum(r.static_smem for r in resources(artifacts.cubin)[:1])
    dyn = getattr(artifacts, "dynamic_smem", None)
    if dyn is None:
        return static or None
    return static + dyn


def compare(parent, step, extra_markers=()) -> tuple:
    """Print the reports of a step and its parent and check the step's PTX markers (the chapters' cell).

    Returns ``({key: Report}, step_ptx)``; raises AssertionError if a marker the step claims is absent.
    """
    from . import arch

    arts = {s.key: arch.compile_step(s) for s in (parent, step)}
    reports = {key: report(art) for key, art in arts.items()}
    for r in reports.values():
        print(r, "\n")
    ptx = arts[step.key].ptx
    for marker in tuple(step.ptx_markers) + tuple(extra_markers):
        print(f"PTX {marker!r}: {ptx.count(marker)}")
        assert marker in ptx, f"{step.key}: PTX lacks {marker!r}"
    return reports, ptx
