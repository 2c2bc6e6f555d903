"""Compile NVIDIA's CuTeDSL Blackwell tutorial GEMMs beside the course's sm100 steps and compare the PTX.

    .venv/bin/python scripts/compare_cutlass_tutorial.py CUTLASS_CHECKOUT [--pairs 1:5,2:6,3:7,3_1:8]
        [--summary | --markdown] [--loops] [--ptx-dir DIR] [--max-active-clusters 74]

Not part of CI: it needs a CUTLASS clone; it compiles eight kernels on the CPU (no GPU, under a
minute). Exit status 1 if a difference has no known explanation ("UNEXPLAINED"), else 0.

CUTLASS_CHECKOUT is a clone of github.com/NVIDIA/cutlass, with a work tree or bare: the tutorials
are read from ``examples/python/CuTeDSL/cute/blackwell/tutorial/tutorial_gemm/`` (from a bare clone
through ``git archive HEAD`` into a temporary directory). Nothing of CUTLASS is copied into this
repository. The pairs, tutorial -> course step (``sm100/N``):

    fp16_gemm_1   -> 5  2-CTA MMA + TMA multicast, one warp issues loads and MMAs
    fp16_gemm_2   -> 6  warp specialization (TMA warp 5, MMA warp 4, epilogue warps 0-3) + TMA store
    fp16_gemm_3   -> 7  two accumulators in TMEM (tutorial: static persistent; course: 2 tiles per CTA)
    fp16_gemm_3_1 -> 8  CLC dynamic persistent scheduler (scheduler warp 6)

Both sides are compiled for sm_100a (``gemm_course.runtime.arch.targeting``, PTX kept) with the same fake
operands (bf16 A (M,K), B (N,K), C (M,N), K-major / row-major, M, N, K symbolic), the same tile
(256 x 256 x 64 per CTA pair, 128 rows per CTA) and cluster (2, 1). The tutorials are written for
fp16 with module-level constants: before their ``host_function`` is traced the script sets
``io_dtype = cutlass.BFloat16`` (and checks ``acc_dtype``, ``mma_tiler_mnk``,
``mma_inst_shape_mnk``, ``cluster_shape_mnk``); their stage counts stay as written
(``SharedStorage`` is built from them at import). fp16_gemm_3*'s ``max_active_clusters`` (a
``Constexpr`` that only sizes the static scheduler's grid) is ``--max-active-clusters``. No shim is
needed with CuTeDSL 4.8.1; a tutorial that fails to load or compile is reported and skipped.

What is compared (PTX, the host code's launch for the shared-memory size, cuobjdump for registers):

* counts per K tile in the steady-state main loop(s): the innermost loop with the most TMA loads
  and the one with the most ``tcgen05.mma`` (one loop in the non-specialized kernels, two in the
  warp-specialized ones). A loop the compiler unrolled holds several K tiles, so its counts are
  divided by its K tiles per iteration (``tcgen05.mma`` / (tile_k / 16) for an MMA loop,
  ``mbarrier.arrive.expect_tx`` sites for a load loop);
* per CTA tile, outside the K loops: TMEM loads, shared/global stores, TMA stores, fences, named
  barriers, CLC instructions (loop trip counts read off the latch where they are constants);
* the constants that must agree: the tcgen05 instruction descriptor (every value it can take,
  decoded, and the expression that builds it), the shared-memory matrix descriptors (template
  immediate decoded, start-address mask, advance per k16 MMA and per stage, A/B buffer offsets),
  the accumulate flags, the accumulator's TMEM stride per stage, expect_tx bytes, tcgen05.alloc
  columns, mbarrier.init arrival counts, the TMA and commit multicast masks of each CTA of the
  cluster and the leader-barrier address bits, threads per CTA (.reqntid), dynamic shared memory,
  registers, and the exact opcodes of the MMA, commit, TMA copies, TMEM loads, alloc and CLC.

Every row whose two values differ is flagged "DIFF" with the explanation the script has for it;
an explanation is checked against the values it explains, and a difference without one is
flagged "UNEXPLAINED".
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Optional

TUTORIAL_DIR = "examples/python/CuTeDSL/cute/blackwell/tutorial/tutorial_gemm"
PAIRS = {"1": 5, "2": 6, "3": 7, "3_1": 8}  # tutorial fp16_gemm_<key> -> course sm100/<value>
TILE = (256, 256, 64)  # per CTA pair
CLUSTER = (2, 1, 1)
K_BLOCKS_PER_K_TILE = TILE[2] // 16  # tcgen05 kind::f16 has K = 16


# =============================================================================================
# PTX: instructions, definitions, loops, constant evaluation
# =============================================================================================

_INS = re.compile(r"^\s*(?:@(!?%?\w+)\s+)?([a-z][\w.:]*)\s*(.*?)\s*;\s*$")
_LABEL = re.compile(r"^\s*(\$L__\w+):")
_IMM = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)$")
_REG = re.compile(r"^%\w+$")
# opcodes whose first operand is read, not written
_NO_DEF = (
    "st.", "st ", "bra", "bar.", "barrier", "cp.", "prefetch", "tcgen05.commit", "tcgen05.dealloc",
    "tcgen05.relinquish", "tcgen05.mma", "tcgen05.alloc", "tcgen05.st", "tcgen05.wait", "tcgen05.fence",
    "fence", "mbarrier.init", "mbarrier.inval", "ret", "exit", "trap", "setmaxnreg", "stmatrix",
    "clusterlaunchcontrol.try_cancel", "griddepcontrol", "red.", "membar", "nanosleep", "tcgen05.cp",
    "tcgen05.shift", "multimem.st", "multimem.red",
)


def split_operands(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


@dataclasses.dataclass(eq=False)
class Ins:
    line: int  # index into Ptx.lines
    pred: Optional[str]
    op: str
    args: list

    def __str__(self):
        p = f"@{self.pred} " if self.pred else ""
        return f"{p}{self.op} {', '.join(self.args)};"


def _bits(op: str) -> int:
    m = re.search(r"\.[bsu](8|16|32|64)$", op)
    return int(m.group(1)) if m else 64


class Ptx:
    """The one kernel (``.entry``) of a PTX module, parsed enough to count and to trace constants."""

    def __init__(self, text: str):
        self.text = text
        body = text[text.index(".entry"):] if ".entry" in text else text
        self.lines = [ln.split("//")[0].rstrip() for ln in body.splitlines()]
        self.ins: list = []
        self.labels: dict = {}
        self.defs: dict = collections.defaultdict(list)  # reg -> [(Ins, part)]
        for i, ln in enumerate(self.lines):
            m = _LABEL.match(ln)
            if m:
                self.labels[m.group(1)] = i
                continue
            m = _INS.match(ln)
            if not m or ln.lstrip().startswith("."):
                continue
            ins = Ins(i, m.group(1), m.group(2), split_operands(m.group(3)))
            self.ins.append(ins)
            if ins.args and not ins.op.startswith(_NO_DEF):
                dest = ins.args[0]
                if dest.startswith("{"):
                    for part, r in enumerate(x.strip() for x in dest[1:-1].split(",")):
                        self.defs[r].append((ins, part))
                else:
                    for r in dest.split("|"):
                        self.defs[r.strip()].append((ins, None))
        self.loops = self._loops()
        m = re.search(r"\.reqntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", text)
        self.reqntid = tuple(int(x) for x in m.groups()) if m else None

    # ---- loops -----------------------------------------------------------------------------

    def _loops(self) -> list:
        """(first line, last line, latch Ins) of every loop: a label with a backward branch to it."""
        loops = {}
        for ins in self.ins:
            if ins.op.startswith("bra") and ins.args and ins.args[0] in self.labels:
                start = self.labels[ins.args[0]]
                if start < ins.line:
                    old = loops.get(start)
                    if old is None or ins.line > old[1]:
                        loops[start] = (start, ins.line, ins)
        return sorted(loops.values())

    def innermost_loop(self, line: int):
        inside = [lp for lp in self.loops if lp[0] <= line <= lp[1]]
        return min(inside, key=lambda lp: lp[1] - lp[0]) if inside else None

    def in_span(self, span):
        return [i for i in self.ins if span[0] <= i.line <= span[1]]

    def trip_count(self, loop) -> Optional[int]:
        """A constant trip count read off the latch (``setp.ne/lt x, N``; x from 0 (or c) by +s), else None."""
        latch = loop[2]
        if not latch.pred or latch.pred.startswith("!"):
            return None
        d = self.defs.get(latch.pred)
        if not d or len(d) != 1:
            return None
        setp = d[0][0]
        if not re.match(r"setp\.(ne|lt)\.", setp.op) or len(setp.args) != 3 or not _IMM.match(setp.args[2]):
            return None
        counter, bound = setp.args[1], int(setp.args[2], 0)
        init = step = None
        for ins, _ in self.defs.get(counter, []):
            if ins.op.startswith("mov") and not (loop[0] <= ins.line <= loop[1]):
                init = self._value_before(ins.args[1], loop)
            elif ins.op.startswith("add") and ins.args[1] == counter and _IMM.match(ins.args[2]):
                step = int(ins.args[2], 0)
        if init is None or not step or (bound - init) % step:
            return None
        return (bound - init) // step

    def _value_before(self, operand: str, loop) -> Optional[int]:
        """The constant ``operand`` holds on entry to ``loop`` (its definitions outside the loop)."""
        if _IMM.match(operand):
            return int(operand, 0)
        outside = [ins for ins, _ in self.defs.get(operand, []) if not (loop[0] <= ins.line <= loop[1])]
        if len(outside) == 1 and outside[0].op.startswith("mov") and _IMM.match(outside[0].args[1]):
            return int(outside[0].args[1], 0)
        return None

    def render(self, operand: str, depth=0) -> str:
        """``operand``'s computation as an expression with register names left out (comparable between
        kernels): immediates stay, parameters read as 'param', predicates as 'p', anything else 'r'."""
        if _IMM.match(operand):
            return operand
        d = self.defs.get(operand)
        if operand.startswith("%p"):
            return "p"
        if not d or len(d) != 1 or depth > 5:
            return "r"
        ins, part = d[0]
        if ins.op.startswith("ld.param"):
            return "param"
        args = ", ".join(self.render(a, depth + 1) for a in ins.args[1:])
        return f"{ins.op.split('.')[0]}({args})"

    # ---- constant evaluation -----------------------------------------------------------------

    def values(self, operand: str, seen=()) -> Optional[frozenset]:
        """Every value ``operand`` can hold, if that is a small set of constants (``selp`` joins both
        arms); None as soon as anything depends on a parameter, a special register or a load."""
        if _IMM.match(operand):
            return frozenset([int(operand, 0)])
        if not _REG.match(operand) or operand in seen or operand not in self.defs:
            return None
        out = set()
        for ins, part in self.defs[operand]:
            v = self._eval(ins, part, seen + (operand,))
            if v is None:
                return None
            out |= v
            if len(out) > 64:
                return None
        return frozenset(out)

    def _eval(self, ins: Ins, part, seen) -> Optional[frozenset]:
        base = ins.op.split(".")[0]
        mask = (1 << _bits(ins.op)) - 1
        src = ins.args[1:]
        if base == "mov" and len(src) == 1:
            s = src[0]
            if part is not None:  # unpack: mov.b64 {lo, hi}, %rd
                v = self.values(s, seen)
                return None if v is None else frozenset((x >> (32 * part)) & 0xFFFFFFFF for x in v)
            if s.startswith("{"):  # pack: mov.b64 %rd, {lo, hi}
                lo, hi = [x.strip() for x in s[1:-1].split(",")]
                vl, vh = self.values(lo, seen), self.values(hi, seen)
                if vl is None or vh is None:
                    return None
                return frozenset((a & 0xFFFFFFFF) | (b << 32) for a, b in itertools.product(vl, vh))
            v = self.values(s, seen)
            return None if v is None else frozenset(x & mask for x in v)
        if base == "cvt" and len(src) == 1:
            v = self.values(src[0], seen)
            return None if v is None else frozenset(x & mask for x in v)
        if base == "selp" and len(src) == 3:
            a, b = self.values(src[0], seen), self.values(src[1], seen)
            return None if a is None or b is None else frozenset(x & mask for x in a | b)
        binops = {
            "or": lambda a, b: a | b, "and": lambda a, b: a & b, "xor": lambda a, b: a ^ b,
            "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "shl": lambda a, b: a << b, "shr": lambda a, b: (a & mask) >> b,
        }
        if base in binops and len(src) == 2:
            a, b = self.values(src[0], seen), self.values(src[1], seen)
            if a is None or b is None:
                return None
            return frozenset(binops[base](x, y) & mask for x, y in itertools.product(a, b))
        return None

    def at(self, operand: str, env: dict, seen=()) -> Optional[int]:
        """The value of ``operand`` in one thread, given the special registers in ``env`` (e.g.
        ``{'%cluster_ctarank': 1, '%ctaid.x': 1}``); predicates evaluate to 0/1. None if it depends
        on anything else (a parameter, a load, a loop-carried register)."""
        if _IMM.match(operand):
            return int(operand, 0)
        if operand in env:
            return env[operand]
        if operand.startswith("!"):
            v = self.at(operand[1:], env, seen)
            return None if v is None else 1 - v
        d = self.defs.get(operand)
        if not d or len(d) != 1 or operand in seen or len(seen) > 60:
            return None
        ins, part = d[0]
        seen = seen + (operand,)
        src = ins.args[1:]
        op = ins.op
        base = op.split(".")[0]
        bits = 1 if op.endswith(".pred") else _bits(op)
        signed = ".s" in op
        mask = (1 << bits) - 1

        def val(x):
            v = self.at(x, env, seen)
            if v is None:
                return None
            v &= mask
            return v - (1 << bits) if signed and bits > 1 and v >> (bits - 1) else v

        if base == "mov" and part is None and len(src) == 1 and not src[0].startswith("{"):
            v = val(src[0])
        elif base == "cvt" and len(src) == 1:
            v = self.at(src[0], env, seen)
        elif op.startswith("shfl.sync.idx") and src[1:2] == ["0"]:
            v = self.at(src[0], env, seen)
        elif base == "selp" and len(src) == 3:
            p = self.at(src[2], env, seen)
            v = None if p is None else val(src[0] if p else src[1])
        elif base == "setp" and len(src) == 2:
            a, b = val(src[0]), val(src[1])
            cmp = op.split(".")[1]
            ops = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b} if None not in (a, b) else {}
            v = int(ops[cmp]) if cmp in ops else None
        elif base == "not" and len(src) == 1:
            a = val(src[0])
            v = None if a is None else ~a
        elif base == "neg" and len(src) == 1:
            a = val(src[0])
            v = None if a is None else -a
        elif base in ("add", "sub", "mul", "and", "or", "xor", "shl", "shr", "div", "rem", "min", "max") and len(src) == 2:
            a, b = val(src[0]), val(src[1])
            if a is None or b is None or (base in ("div", "rem") and b == 0):
                return None
            v = {
                "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "and": lambda: a & b,
                "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b,
                "div": lambda: int(a / b), "rem": lambda: a - int(a / b) * b, "min": lambda: min(a, b),
                "max": lambda: max(a, b),
            }[base]()
        else:
            return None
        return None if v is None else v & mask

    def linear(self, operand: str, seen=(), depth=0) -> Optional[dict]:
        """``operand`` as a linear form {atom: coefficient, '': constant}. Atoms: 'smem' (the dynamic
        shared memory base), ('lo', %rd) (the low word of a 64-bit register), a loop-carried or opaque
        register name. Follows mov, shfl.idx (a broadcast), cvt/cvta, add, sub, shl/mul by constants."""
        if _IMM.match(operand):
            return {"": int(operand, 0)}
        if depth > 40 or operand in seen:
            return {operand: 1}
        d = self.defs.get(operand)
        if not d or len(d) != 1:
            return {operand: 1}  # loop-carried (several definitions) or a parameter
        ins, part = d[0]
        seen, depth = seen + (operand,), depth + 1
        base, src = ins.op.split(".")[0], ins.args[1:]
        if base == "mov" and src and src[0] == "__dynamic_shmem__0":
            return {"smem": 1}
        if base == "mov" and part == 0:
            return {("lo", src[0]): 1}
        if base == "mov" and part is None and len(src) == 1 and not src[0].startswith("{"):
            return self.linear(src[0], seen, depth)
        if base in ("cvt", "cvta") and len(src) == 1:
            return self.linear(src[0], seen, depth)
        if ins.op.startswith("shfl.sync.idx") and src[1:2] == ["0"]:
            return self.linear(src[0], seen, depth)
        if base in ("add", "sub") and len(src) == 2:
            a, b = self.linear(src[0], seen, depth), self.linear(src[1], seen, depth)
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + (v if base == "add" else -v)
            return {k: v for k, v in out.items() if v}
        if base == "and" and len(src) == 2 and _IMM.match(src[1]):  # a descriptor's 14-bit start address
            dd = self.defs.get(src[0])
            if dd and len(dd) == 1 and dd[0][0].op.startswith("shr") and dd[0][0].args[2] == "4":
                inner = self.linear(dd[0][0].args[1], seen, depth)
                return {("start", int(src[1], 0), tuple(sorted(inner.items(), key=str))): 1}
        if base in ("shl", "mul") and len(src) == 2 and _IMM.match(src[1]):
            f = 1 << int(src[1], 0) if base == "shl" else int(src[1], 0)
            return {k: v * f for k, v in self.linear(src[0], seen, depth).items()}
        return {operand: 1}

    def desc_parts(self, rd: str, depth=0) -> Optional[dict]:
        """A shared-memory matrix descriptor operand of tcgen05.mma, taken apart:
        template (the 64-bit immediate or-ed in), mask (on the 14-bit start address), start (linear
        form of the byte address it was built from), k_off (16-byte units added to the low word),
        terms (other atoms added to the low word, e.g. the stage index times the stage stride)."""
        d = self.defs.get(rd)
        if not d or len(d) != 1 or depth > 8:
            return None
        ins, _ = d[0]
        if ins.op == "or.b64" and len(ins.args) == 3 and _IMM.match(ins.args[2]):
            # template | cvt.u64.u32(and.b32(shr.u32(byte address, 4), mask))
            parts = {"template": int(ins.args[2], 0), "mask": None, "start": None, "k_off": 0, "terms": {}}
            lin = self.linear(ins.args[1])
            starts = [k for k in lin if isinstance(k, tuple) and k[0] == "start"]
            if len(starts) == 1 and lin[starts[0]] == 1:
                parts["mask"], parts["start"] = starts[0][1], dict(starts[0][2])
            return parts
        if ins.op == "mov.b64" and _IMM.match(ins.args[1]):  # the template alone (its start address comes later)
            return {"template": int(ins.args[1], 0), "mask": None, "start": None, "k_off": 0, "terms": {}}
        if ins.op == "mov.b64" and ins.args[1].startswith("{"):
            lo, hi = [x.strip() for x in ins.args[1][1:-1].split(",")]
            lin = self.linear(lo)
            bases = [k for k in lin if isinstance(k, tuple) and k[0] == "lo" and lin[k] == 1]
            starts = [k for k in lin if isinstance(k, tuple) and k[0] == "start" and lin[k] == 1]
            if len(bases) == 1:  # low word = a descriptor's low word + offsets
                parts = self.desc_parts(bases[0][1], depth + 1)
                skip, const0 = bases[0], 0
            elif len(starts) == 1:  # low word rebuilt: start address + the template's low word + offsets
                dh = self.defs.get(hi)
                if not dh or len(dh) != 1 or dh[0][1] != 1:
                    return None
                parts = self.desc_parts(dh[0][0].args[1], depth + 1)
                if parts is None:
                    return None
                parts = dict(parts, mask=starts[0][1], start=dict(starts[0][2]))
                skip, const0 = starts[0], parts["template"] & 0xFFFFFFFF
            else:
                return None
            if parts is None:
                return None
            parts = dict(parts, terms=dict(parts["terms"]))
            for k, v in lin.items():
                if k == "":
                    parts["k_off"] += v - const0
                elif k != skip:
                    parts["terms"][k] = parts["terms"].get(k, 0) + v
            return parts
        return None


# =============================================================================================
# decoding
# =============================================================================================

_FMT_F16 = {0: "f16", 1: "bf16"}
_FMT_D = {0: "f16", 1: "f32"}
_SWIZZLE = {0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"}


def decode_idesc(v: int) -> str:
    """tcgen05 instruction descriptor, kind::f16 (PTX ISA, 'Instruction descriptor')."""
    f = {
        "D": _FMT_D.get((v >> 4) & 3, "?"),
        "A": _FMT_F16.get((v >> 7) & 7, "?"),
        "B": _FMT_F16.get((v >> 10) & 7, "?"),
        "negA": (v >> 13) & 1,
        "negB": (v >> 14) & 1,
        "A_MN_major": (v >> 15) & 1,
        "B_MN_major": (v >> 16) & 1,
        "N": ((v >> 17) & 0x3F) * 8,
        "M": ((v >> 24) & 0x1F) * 16,
    }
    extra = v & 0b1111 or (v >> 29)
    major = f"{'MN' if f['A_MN_major'] else 'K'},{'MN' if f['B_MN_major'] else 'K'}-major"
    s = f"D={f['D']} A={f['A']} B={f['B']} M={f['M']} N={f['N']} A,B {major}"
    s += f" negA={f['negA']} negB={f['negB']}"
    return s + (f" other bits 0x{extra:x}" if extra else "")


def decode_sdesc(v: int) -> str:
    """tcgen05 shared-memory matrix descriptor (PTX ISA, 'Shared memory descriptor')."""
    lbo = ((v >> 16) & 0x3FFF) << 4
    sbo = ((v >> 32) & 0x3FFF) << 4
    version = (v >> 46) & 3
    base_off = (v >> 49) & 7
    lbo_mode = (v >> 52) & 1
    layout = (v >> 61) & 7
    return (
        f"swizzle={_SWIZZLE.get(layout, layout)} SBO={sbo} B LBO={lbo} B version={version} "
        f"base_offset={base_off} lbo_mode={lbo_mode}"
    )


# =============================================================================================
# what is measured
# =============================================================================================

def _tma(op: str) -> Optional[str]:
    """'g->s' or 's->g' for a cp.async.bulk.tensor (the destination's state space comes first)."""
    if not op.startswith("cp.async.bulk.tensor") or ".global" not in op or ".shared" not in op:
        return None
    return "g->s" if op.index(".shared") < op.index(".global") else "s->g"


CLASSES = collections.OrderedDict(
    [
        ("tcgen05.mma", lambda op: op.startswith("tcgen05.mma")),
        ("tcgen05.commit", lambda op: op.startswith("tcgen05.commit")),
        ("TMA load (cp.async.bulk.tensor g->s)", lambda op: _tma(op) == "g->s"),
        ("TMA store (cp.async.bulk.tensor s->g)", lambda op: _tma(op) == "s->g"),
        ("mbarrier.try_wait", lambda op: op.startswith("mbarrier.try_wait")),
        ("mbarrier.arrive.expect_tx", lambda op: op.startswith("mbarrier.arrive.expect_tx")),
        ("mbarrier.arrive (other)", lambda op: op.startswith("mbarrier.arrive") and "expect_tx" not in op),
        ("clusterlaunchcontrol.try_cancel", lambda op: op.startswith("clusterlaunchcontrol.try_cancel")),
        ("clusterlaunchcontrol.query_cancel", lambda op: op.startswith("clusterlaunchcontrol.query_cancel")),
        ("tcgen05.ld", lambda op: op.startswith("tcgen05.ld")),
        ("tcgen05.wait::ld", lambda op: op.startswith("tcgen05.wait::ld")),
        ("st.shared", lambda op: op.startswith("st.shared")),
        ("stmatrix", lambda op: op.startswith("stmatrix")),
        ("st.global", lambda op: op.startswith("st.global")),
        ("cp.async.bulk.commit_group", lambda op: op.startswith("cp.async.bulk.commit_group")),
        ("cp.async.bulk.wait_group", lambda op: op.startswith("cp.async.bulk.wait_group")),
        ("fence.proxy.async", lambda op: op.startswith("fence.proxy.async")),
        ("bar.sync (named barriers)", lambda op: op.startswith(("bar.sync", "barrier.sync", "bar.arrive", "barrier.arrive"))),
        ("barrier.cluster", lambda op: op.startswith("barrier.cluster")),
        ("elect.sync", lambda op: op.startswith("elect.sync")),
    ]
)
K_LOOP_CLASSES = list(CLASSES)[:13] + ["elect.sync"]
EPI_CLASSES = [
    "tcgen05.ld", "tcgen05.wait::ld", "st.shared", "stmatrix", "st.global", "TMA store (cp.async.bulk.tensor s->g)",
    "fence.proxy.async",
    "bar.sync (named barriers)", "clusterlaunchcontrol.try_cancel", "clusterlaunchcontrol.query_cancel",
]


def classify(op: str) -> Optional[str]:
    for name, test in CLASSES.items():
        if test(op):
            return name
    return None


def count(instrs) -> collections.Counter:
    c = collections.Counter()
    for i in instrs:
        k = classify(i.op)
        if k:
            c[k] += 1
    return c


def fmt_num(x) -> str:
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def fmt_set(vs, hexa=False) -> str:
    if vs is None:
        return "runtime"
    return "{" + ", ".join((hex(v) if hexa else str(v)) for v in sorted(vs)) + "}"


def run_length(seq) -> str:
    out = []
    for v, grp in itertools.groupby(seq):
        n = len(list(grp))
        out.append(f"{v} x{n}" if n > 1 else f"{v}")
    return ", ".join(out)


@dataclasses.dataclass
class Build:
    label: str
    ptx: str
    cubin: bytes
    ir: str
    note: str = ""
    stages: Optional[int] = None  # A/B stages (the course's config; the tutorial's ab_stages)


def launch_smem_bytes(ir: str) -> list:
    """Dynamic shared memory stored into the cudaLaunchConfig_t (field 2) in the host code."""
    out = []
    struct = r"!llvm\.struct<\(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32\)>"
    for fn in re.split(r"\n\s*llvm\.func ", ir):
        consts = dict(re.findall(r"(%\d+) = llvm\.mlir\.constant\((\d+) : i64\) : i64", fn))
        for gep in re.findall(r"(%\d+) = llvm\.getelementptr %\d+\[0, 2\] : \(!llvm\.ptr\) -> !llvm\.ptr, " + struct, fn):
            for val in re.findall(r"llvm\.store (%\d+), " + re.escape(gep) + r" : i64", fn):
                if val in consts:
                    out.append(int(consts[val]))
    return out


def registers(cubin: bytes) -> Optional[int]:
    try:
        from gemm_course.teaching import inspect as ins

        res = ins.resources(cubin)
        return max(r.registers for r in res) if res else None
    except Exception:  # the disassembler tools are optional here
        return None


def analyze(build: Build) -> dict:
    p = Ptx(build.ptx)
    m: dict = {"_ptx": p}

    # ---- the steady-state K loops ------------------------------------------------------------
    def role_loop(cls):
        sites = [i for i in p.ins if classify(i.op) == cls]
        loops = collections.Counter()
        for i in sites:
            lp = p.innermost_loop(i.line)
            if lp:
                loops[lp] += 1
        if not loops:
            return None
        best = max(loops.values())
        return max(lp for lp, n in loops.items() if n == best)  # ties: the later loop (a prologue comes first)

    load_loop = role_loop("TMA load (cp.async.bulk.tensor g->s)")
    mma_loop = role_loop("tcgen05.mma")
    per_k = collections.Counter()
    loops_desc = []
    for lp in dict.fromkeys(x for x in (load_loop, mma_loop) if x):
        c = count(p.in_span(lp))
        kt = None
        if lp == mma_loop and c["tcgen05.mma"]:
            kt = c["tcgen05.mma"] / K_BLOCKS_PER_K_TILE
        if lp == load_loop and c["mbarrier.arrive.expect_tx"]:
            kt_load = c["mbarrier.arrive.expect_tx"]
            if kt is not None and kt != kt_load:
                m.setdefault("_warnings", []).append(f"loop at line {lp[0]}: {kt} K tiles by MMAs, {kt_load} by expect_tx")
            kt = kt_load if kt is None else kt
        kt = kt or 1
        roles = "+".join(r for r, x in (("TMA", load_loop), ("MMA", mma_loop)) if x == lp)
        loops_desc.append(f"{roles} loop ({kt:g} K tile{'s' if kt != 1 else ''}/iteration)")
        for k in K_LOOP_CLASSES:
            per_k[k] += c[k] / kt
    m["k_loops"] = "; ".join(loops_desc) if loops_desc else "none found"
    m["per_k"] = per_k

    # ---- the epilogue per CTA tile ------------------------------------------------------------
    epi = collections.Counter()
    k_spans = [x for x in (load_loop, mma_loop) if x]
    for i in p.ins:
        k = classify(i.op)
        if k not in EPI_CLASSES or any(s[0] <= i.line <= s[1] for s in k_spans):
            continue
        mult = 1
        for lp in p.loops:  # multiply by the constant trip counts of the loops around it (not tile loops)
            if lp[0] <= i.line <= lp[1]:
                t = p.trip_count(lp)
                if t:
                    mult *= t
        epi[k] += mult
    m["epi"] = epi
    m["loops"] = [(lp[0], lp[1], p.trip_count(lp), count(p.in_span(lp))) for lp in p.loops]

    # ---- opcodes -----------------------------------------------------------------------------
    def opcodes(cls):
        return sorted({i.op for i in p.ins if classify(i.op) == cls})

    m["op_mma"] = opcodes("tcgen05.mma")
    m["op_commit"] = opcodes("tcgen05.commit")
    m["op_load"] = opcodes("TMA load (cp.async.bulk.tensor g->s)")
    m["op_store"] = opcodes("TMA store (cp.async.bulk.tensor s->g)")
    m["op_tld"] = opcodes("tcgen05.ld")
    m["op_alloc"] = sorted({i.op for i in p.ins if i.op.startswith(("tcgen05.alloc", "tcgen05.dealloc"))})
    m["op_clc"] = sorted({i.op for i in p.ins if i.op.startswith("clusterlaunchcontrol")})

    # ---- constants -----------------------------------------------------------------------------
    m["reqntid"] = p.reqntid
    smem = launch_smem_bytes(build.ir)
    m["smem"] = smem[0] if len(set(smem)) == 1 else (smem or None)
    m["regs"] = registers(build.cubin)
    allocs = [i for i in p.ins if i.op.startswith("tcgen05.alloc")]
    m["alloc_cols"] = sorted({v for i in allocs for v in (p.values(i.args[-1]) or {-1})})
    inits = [i for i in p.ins if i.op.startswith("mbarrier.init")]
    m["inits"] = [fmt_set(p.values(i.args[-1])).strip("{}") for i in inits]
    tx = collections.Counter()
    for i in p.ins:
        if i.op.startswith("mbarrier.arrive.expect_tx"):
            tx[fmt_set(p.values(i.args[-1])).strip("{}")] += 1
    m["expect_tx"] = tx
    mmas = [i for i in p.ins if i.op.startswith("tcgen05.mma")]
    idescs = set()
    for i in mmas:
        v = p.values(i.args[3])
        idescs |= set(v) if v is not None else {None}
    m["idesc"] = idescs
    # the immediates the idesc is built from (as in `selp.b32 %r, 272639120, 272630928, %p1`)
    m["idesc_src"] = sorted({p.render(i.args[3]) for i in mmas})

    # descriptors of the steady-state MMA loop: per MMA (A, B) advance, stage terms, template
    templates, masks, a_off, b_off, a_stage, b_stage, starts = set(), set(), [], [], set(), set(), set()
    loop_mmas = [i for i in mmas if mma_loop and mma_loop[0] <= i.line <= mma_loop[1]] or mmas
    for i in loop_mmas:
        da, db = p.desc_parts(i.args[1]), p.desc_parts(i.args[2])
        for d, offs, stage, which in ((da, a_off, a_stage, "A"), (db, b_off, b_stage, "B")):
            if d is None:
                offs.append("?")
                continue
            templates.add(d["template"])
            masks.add(d["mask"])
            offs.append(d["k_off"] * 16)
            for k, v in d["terms"].items():
                stage.add(v * 16)
            if d["start"] is not None:
                st = d["start"]
                starts.add((which, st.get("", 0) if set(st) <= {"", "smem"} else "runtime"))
    acc_flags = []
    for i in loop_mmas[:K_BLOCKS_PER_K_TILE]:  # enable-input-d of each k16 MMA of one K tile
        v = p.at(i.args[-1], {})
        acc_flags.append("runtime" if v is None else str(v))
    m["acc_flags"] = acc_flags
    acc_terms = set()
    for i in loop_mmas:  # the accumulator's TMEM address: base + stage index x columns per stage
        lin = p.linear(i.args[0].strip("[]"))
        acc_terms |= {v for k, v in lin.items() if k != "" and v != 1}
    m["acc_stride"] = sorted(acc_terms)
    m["sdesc_templates"] = templates
    m["sdesc_masks"] = masks

    def per_k_tile(offs):  # an unrolled loop repeats the pattern once per K tile
        chunks = {tuple(offs[i:i + K_BLOCKS_PER_K_TILE]) for i in range(0, len(offs), K_BLOCKS_PER_K_TILE)}
        return list(chunks.pop()) if len(chunks) == 1 else offs

    m["k_adv"] = (per_k_tile(a_off), per_k_tile(b_off))
    m["stage_stride"] = (sorted(a_stage), sorted(b_stage))
    m["buf_offsets"] = sorted(starts, key=str)

    # ---- multicast masks and the leader's barrier, per CTA of the cluster ----------------------
    loads = [i for i in p.ins if classify(i.op) == "TMA load (cp.async.bulk.tensor g->s)"]
    commits = [i for i in p.ins if i.op.startswith("tcgen05.commit")]
    per_rank = {"load": [], "commit": []}
    for rank in range(CLUSTER[0] * CLUSTER[1]):
        env = {"%cluster_ctarank": rank, "%ctaid.x": rank, "%ctaid.y": 0, "%ctaid.z": 0, "%tid.x": 0, "%tid.y": 0, "%tid.z": 0}
        lm = sorted({p.at(i.args[3], env) for i in loads}, key=str)
        cm = sorted({p.at(i.args[1], env) for i in commits}, key=str)
        per_rank["load"].append(f"CTA {rank}: " + ",".join("?" if v is None else hex(v) for v in lm))
        per_rank["commit"].append(f"CTA {rank}: " + ",".join("?" if v is None else hex(v) for v in cm))
    m["mcast_load"] = "; ".join(per_rank["load"])
    m["mcast_commit"] = "; ".join(per_rank["commit"])
    cleared = set()
    for i in loads:  # the full barrier a load signals: which address bits are cleared (and.b32 with a negative mask)
        reg = i.args[2].strip("[]").split("+")[0]
        for ins, _ in p.defs.get(reg, []):
            if ins.op.startswith("and") and _IMM.match(ins.args[2]) and int(ins.args[2], 0) < 0:
                cleared.add((~int(ins.args[2], 0)) & 0xFFFFFFF8)  # bits 0-2: known zero (8-byte mbarrier)
    m["mbar_cleared"] = cleared
    return m


# =============================================================================================
# building both sides
# =============================================================================================


@contextlib.contextmanager
def tutorial_dir(checkout: str):
    """The tutorial directory of a CUTLASS clone (work tree, or a bare clone read with git archive)."""
    direct = os.path.join(checkout, TUTORIAL_DIR)
    rev = None
    with contextlib.suppress(Exception):
        rev = subprocess.run(
            ["git", f"--git-dir={_git_dir(checkout)}", "log", "-1", "--format=%H %cs"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    if os.path.isdir(direct):
        yield direct, rev
        return
    tmp = tempfile.mkdtemp(prefix="cutlass-tutorial-")
    try:
        archive = subprocess.run(
            ["git", f"--git-dir={_git_dir(checkout)}", "archive", "HEAD", TUTORIAL_DIR], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield os.path.join(tmp, TUTORIAL_DIR), rev
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _git_dir(checkout: str) -> str:
    return os.path.join(checkout, ".git") if os.path.isdir(os.path.join(checkout, ".git")) else checkout


def load_tutorial(directory: str, key: str):
    """Import fp16_gemm_<key>.py as a module and set its module constants to the course's problem."""
    import cutlass

    path = os.path.join(directory, f"fp16_gemm_{key}.py")
    spec = importlib.util.spec_from_file_location(f"cutlass_tutorial_fp16_gemm_{key}", path)
    mod = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec.loader.exec_module(mod)
    want = {
        "io_dtype": cutlass.BFloat16,
        "acc_dtype": cutlass.Float32,
        "mma_tiler_mnk": TILE,
        "mma_inst_shape_mnk": TILE[:2] + (16,),
        "cluster_shape_mnk": CLUSTER,
    }
    changed = []
    for name, value in want.items():
        if getattr(mod, name) != value:
            changed.append(f"{name}: {getattr(mod, name)} -> {value}")
            setattr(mod, name, value)
    if getattr(mod, "use_2cta_instrs", True) is not True:
        raise RuntimeError("the tutorial does not use the 2-CTA MMA")
    kept = ("ab_stages", "acc_stage", "acc_stages", "epi_stages", "num_clc_stage")
    consts = {k: getattr(mod, k) for k in kept if hasattr(mod, k)}
    msgs = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    return mod, changed, consts, msgs


def compile_tutorial(mod, key: str, max_active_clusters: int) -> Build:
    import cutlass.cute as cute

    from gemm_course.runtime import arch

    a, b, c = arch.fake_operands("dynamic")
    args = (a, b, c) + ((max_active_clusters,) if key.startswith("3") else ())
    with tempfile.TemporaryDirectory(prefix="gemm-course-") as tmp, arch.targeting("sm_100a", tmp):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = cute.compile[cute.KeepPTX, cute.KeepCUBIN](mod.host_function, *args)
        ptx = arch._artifact(compiled.artifacts.PTX, binary=False)
        cubin = arch._artifact(compiled.artifacts.CUBIN, binary=True)
    return Build(f"fp16_gemm_{key}", ptx, cubin, str(compiled.ir_module))


def compile_course(number: int) -> Build:
    from gemm_course.runtime import arch
    from gemm_course.runtime.ladder import ladder

    step = ladder["sm100"][number]
    cfg = step.default
    assert (2 * cfg.tile_m, cfg.tile_n, cfg.tile_k) == TILE and (cfg.cluster_m, cfg.cluster_n, 1) == CLUSTER, cfg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = arch.compile_step(step, target="sm_100a")
    return Build(f"sm100/{number}", art.ptx, art.cubin, str(art.compiled.ir_module), note=str(cfg), stages=cfg.stages)


# =============================================================================================
# the comparison
# =============================================================================================

# Known reasons for differences, per (tutorial key or '*', row name): functions (tutorial value, course
# value, tutorial analysis, course analysis) -> text, or None when the values are not what they explain.
EXPLAIN = {}


def explain(keys, rows):
    def deco(fn):
        for k in keys:
            for r in rows:
                EXPLAIN[(k, r)] = fn
        return fn

    return deco


def build_rows(key: str, t: dict, c: dict) -> list:
    rows = []

    def row(section, name, tv, cv):
        rows.append((section, name, tv, cv))

    s = "per K tile (steady-state main loop)"
    row(s, "main loop(s)", t["k_loops"], c["k_loops"])
    always = ("tcgen05.mma", "tcgen05.commit", "TMA load (cp.async.bulk.tensor g->s)", "mbarrier.try_wait",
              "mbarrier.arrive.expect_tx", "mbarrier.arrive (other)", "clusterlaunchcontrol.try_cancel",
              "clusterlaunchcontrol.query_cancel", "tcgen05.ld", "st.shared", "stmatrix",
              "TMA store (cp.async.bulk.tensor s->g)")
    for k in K_LOOP_CLASSES:
        if t["per_k"][k] or c["per_k"][k] or k in always:
            row(s, f"{k} per K tile", fmt_num(t["per_k"][k]), fmt_num(c["per_k"][k]))
    s = "per CTA tile: epilogue and scheduler, outside the K loops (constant trip counts multiplied)"
    for k in EPI_CLASSES:
        if t["epi"][k] or c["epi"][k] or k in always:
            row(s, f"{k} per tile", str(t["epi"][k]), str(c["epi"][k]))
    s = "opcodes"
    for name, key_ in (
        ("tcgen05.mma", "op_mma"), ("tcgen05.commit", "op_commit"), ("TMA load", "op_load"),
        ("TMA store", "op_store"), ("tcgen05.ld", "op_tld"), ("tcgen05.alloc/dealloc", "op_alloc"),
        ("clusterlaunchcontrol", "op_clc"),
    ):
        if t[key_] or c[key_]:
            row(s, f"opcode: {name}", "<br>".join(t[key_]) or "-", "<br>".join(c[key_]) or "-")
    s = "constants"
    row(s, "threads per CTA (.reqntid)", str(t["reqntid"]), str(c["reqntid"]))
    row(s, "dynamic shared memory (B, launch)", str(t["smem"]), str(c["smem"]))
    row(s, "registers per thread (cuobjdump)", str(t["regs"]), str(c["regs"]))
    row(s, "tcgen05.alloc columns", fmt_set(t["alloc_cols"]), fmt_set(c["alloc_cols"]))
    row(s, "accumulator stage stride in TMEM (columns)", str(t["acc_stride"]), str(c["acc_stride"]))
    row(s, "accumulate flag of the 4 k16 MMAs of a K tile", ", ".join(t["acc_flags"]), ", ".join(c["acc_flags"]))
    row(s, "mbarrier.init arrival counts (in order)", run_length(t["inits"]), run_length(c["inits"]))
    row(s, "expect_tx bytes (value: sites)", ", ".join(f"{k}: {v}" for k, v in sorted(t["expect_tx"].items())),
        ", ".join(f"{k}: {v}" for k, v in sorted(c["expect_tx"].items())))
    row(s, "idesc values", fmt_set(t["idesc"], hexa=True), fmt_set(c["idesc"], hexa=True))
    for which in sorted({v for v in t["idesc"] | c["idesc"] if v is not None} , key=lambda v: v):
        row(s, f"idesc {hex(which)} decoded", *(decode_idesc(which) if which in m["idesc"] else "-" for m in (t, c)))
    row(s, "idesc built by", "<br>".join(t["idesc_src"]), "<br>".join(c["idesc_src"]))
    row(s, "smem descriptor template(s)", fmt_set(t["sdesc_templates"], hexa=True), fmt_set(c["sdesc_templates"], hexa=True))
    for v in sorted(t["sdesc_templates"] | c["sdesc_templates"]):
        row(s, f"template {hex(v)} decoded", *(decode_sdesc(v) if v in m["sdesc_templates"] else "-" for m in (t, c)))
    row(s, "descriptor start-address mask", *(fmt_set({x for x in m["sdesc_masks"] if x is not None}) for m in (t, c)))
    row(s, "A descriptor advance per MMA (B)", str(t["k_adv"][0]), str(c["k_adv"][0]))
    row(s, "B descriptor advance per MMA (B)", str(t["k_adv"][1]), str(c["k_adv"][1]))
    row(s, "A stage stride (B)", str(t["stage_stride"][0]), str(c["stage_stride"][0]))
    row(s, "B stage stride (B)", str(t["stage_stride"][1]), str(c["stage_stride"][1]))
    row(s, "A/B buffer offsets from the smem base (B)", str(t["buf_offsets"]), str(c["buf_offsets"]))
    row(s, "TMA load multicast masks, per CTA", t["mcast_load"], c["mcast_load"])
    row(s, "tcgen05.commit multicast masks, per CTA", t["mcast_commit"], c["mcast_commit"])
    row(s, "TMA load barrier address: bits cleared (-> leader CTA)", *(fmt_set(m["mbar_cleared"], hexa=True) for m in (t, c)))

    out = []
    for section, name, tv, cv in rows:
        same = tv == cv
        why = None
        if not same:
            fn = EXPLAIN.get((key, name)) or EXPLAIN.get(("*", name))
            why = fn(tv, cv, t, c) if fn else None
        out.append((section, name, tv, cv, "" if same else ("DIFF" if why else "UNEXPLAINED"), why or ""))
    return out


# ---- the explanations. Each checks the values it explains (from the analyses t and c) and returns
# None when they are not what it is about, so a changed kernel shows up as UNEXPLAINED.


def _buf(m, which):
    for w, off in m["buf_offsets"]:
        if w == which and isinstance(off, int):
            return off
    return None


@explain(["1"], ["main loop(s)"])
def _(tv, cv, t, c):
    if tv.startswith("TMA+MMA loop (2 K tiles") and cv.startswith("TMA+MMA loop (1 K tile/"):
        return ("loop structure only: `cutlass.range(..., prefetch_stages=ab_stages - 2)` peels a prologue "
                "of loads and the compiler unrolled the tutorial's loop twice; the rows below are per K tile")


@explain(["2", "3", "3_1"], ["main loop(s)"])
def _(tv, cv, t, c):
    if "TMA loop" in tv and "MMA loop" in tv and cv == "TMA loop (1 K tile/iteration); MMA loop (1 K tile/iteration)":
        return ("loop structure only: the tutorial's K loops are Python `range` loops, which the compiler "
                "unrolled; the course's `cutlass.range(..., unroll=1)` are not; the rows below are per K tile")


@explain(["*"], ["registers per thread (cuobjdump)"])
def _(tv, cv, t, c):
    return "register allocation of different code; informational, not a correctness constant"


@explain(["*"], ["dynamic shared memory (B, launch)"])
def _(tv, cv, t, c):
    parts = []
    for m in (t, c):
        a, st, smem = _buf(m, "A"), m.get("stages"), m.get("smem")
        if None in (a, st) or not isinstance(smem, int):
            return None
        epi = smem - a - st * 32768  # A + B per stage per CTA: (128 + 128) x 64 x 2 B
        if epi < 0 or epi % 8192:
            return None
        parts.append(f"{a} B of barriers (up to sA) + {st} x 32 KiB A/B stages + {epi // 1024} KiB epilogue staging")
    why = f"tutorial: {parts[0]}; course: {parts[1]}"
    if t["stages"] == c["stages"]:
        why += "; same stages and staging buffers, the course pads its barrier block to 1024 B (it aligns sA to 1024)"
    else:
        why += "; a different stage count (design choice of the steps: step 5 keeps one stage, step 6 adds the pipeline)"
    return why


@explain(["1", "2"], ["tcgen05.alloc columns"])
def _(tv, cv, t, c):
    if tv == "{512}" and cv == "{256}":
        return ("the tutorial allocates all 512 columns; the course allocates what its one 256-column fp32 "
                "accumulator needs (design choice; the accumulator uses 256 columns in both)")


@explain(["1"], ["mbarrier.init arrival counts (in order)"])
def _(tv, cv, t, c):
    ct, cc = collections.Counter(t["inits"]), collections.Counter(c["inits"])
    extra = 2 * (t["stages"] - c["stages"])
    if ct - cc == collections.Counter({"1": extra}) and not cc - ct:
        return (f"{t['stages']} A/B stages against {c['stages']}: {extra} more full/empty barriers (count 1 each); "
                "the rest agree: accumulator full 1, accumulator empty 256 = 2 CTAs x 128 threads, TMEM dealloc 32; "
                "only the order of initialization differs")


@explain(["2", "3", "3_1"], ["mbarrier.init arrival counts (in order)"])
def _(tv, cv, t, c):
    ct, cc = collections.Counter(t["inits"]), collections.Counter(c["inits"])
    n = ct.get("8", 0)
    if n and ct - cc == collections.Counter({"8": n}) and cc - ct == collections.Counter({"256": n}):
        return ("the accumulator-empty barrier(s) count 8 = 2 CTAs x 4 warps in the tutorial, whose epilogue "
                "releases once per warp (`with elect_one(): acc_full.release()`), and 256 = 2 CTAs x 128 threads "
                "in the course, whose epilogue threads each arrive (`consumer_release` in every thread); each "
                "matches its own arrivals. All other counts agree; the order of initialization differs")


@explain(["*"], ["expect_tx bytes (value: sites)"])
def _(tv, cv, t, c):
    if set(t["expect_tx"]) == set(c["expect_tx"]):
        return "same bytes (65536 = A + B of both CTAs of the pair per stage); more static sites only from unrolling"


@explain(["1"], ["A stage stride (B)", "B stage stride (B)"])
def _(tv, cv, t, c):
    if tv == "[16384]" and cv == "[]":
        return "course step 5 has one stage, so no stage index enters its descriptors"


@explain(["*"], ["A/B buffer offsets from the smem base (B)"])
def _(tv, cv, t, c):
    offs_t = [o for _, o in t["buf_offsets"] if isinstance(o, int)]
    offs_c = [o for _, o in c["buf_offsets"] if isinstance(o, int)]
    if offs_c and all(o % 1024 == 0 for o in offs_c) and offs_t and all(o % 128 == 0 for o in offs_t):
        bad = sorted(o for o in offs_t if o % 1024)
        why = ("different shared-memory layouts; the course aligns sA/sB to 1024 B (its SharedStorage), so the "
               "128-byte-swizzle descriptors with base_offset=0 start on a swizzle-pattern boundary")
        if bad:
            why += (f"; the tutorial's SmemAllocator (`byte_alignment=128`) puts them at {bad} B, multiples of 128 "
                    "but not of 1024 (a tutorial-side observation, not a course issue)")
        return why


@explain(["*"], ["descriptor start-address mask"])
def _(tv, cv, t, c):
    def expected(m):  # 0x3FFF less the bits of (smem + offset) >> 4 the compiler knows are 0 (smem: 1024-aligned)
        return {0x3FFF & ~(~(o >> 4) & 63) for _, o in m["buf_offsets"] if isinstance(o, int)}

    if t["sdesc_masks"] == expected(t) and c["sdesc_masks"] == expected(c):
        return ("not a different descriptor: the 14-bit start-address field is `(addr >> 4) & 0x3FFF`, and the "
                "compiler drops from 0x3FFF the bits it knows are zero, which follow from the buffer offsets below")


@explain(["1"], ["tcgen05.ld per tile", "opcode: tcgen05.ld"])
def _(tv, cv, t, c):
    cols = []
    for m in (t, c):
        if len(m["op_tld"]) != 1:
            return None
        x = int(re.search(r"\.x(\d+)\.", m["op_tld"][0]).group(1))
        cols.append(x * m["epi"]["tcgen05.ld"])
    if cols[0] == cols[1] == TILE[1]:
        return ("both read the 256 accumulator columns once per tile: the tutorial in 64-column loads "
                "(x64, 4 sub-tiles), the course in 32-column loads (x32, 8 sub-tiles of its TMA-store epilogue)")


@explain(["1"], ["st.shared per tile", "st.global per tile", "TMA store (cp.async.bulk.tensor s->g) per tile",
                "fence.proxy.async per tile", "opcode: TMA store"])
def _(tv, cv, t, c):
    if t["epi"]["st.global"] and not t["epi"]["TMA store (cp.async.bulk.tensor s->g)"]:
        return ("epilogue design: fp16_gemm_1 converts and stores registers straight to global memory "
                "(`autovec_copy`, st.global.v4); the course has stored through shared memory with TMA since step 4")


@explain(["1"], ["bar.sync (named barriers) per tile"])
def _(tv, cv, t, c):
    stores = c["epi"]["TMA store (cp.async.bulk.tensor s->g)"]
    if t["epi"]["st.global"] and c["epi"]["bar.sync (named barriers)"] == 2 * stores + 2:
        return ("the course's TMA-store epilogue waits on a named barrier twice per sub-tile (buffer free, "
                "writes visible to TMA) plus the TMEM barriers; fp16_gemm_1's direct-store epilogue needs none")


@explain(["2", "3", "3_1"], ["bar.sync (named barriers) per tile"])
def _(tv, cv, t, c):
    try:
        nt, nc = int(tv), int(cv)
    except ValueError:
        return None
    if nc == nt + 1:
        return ("the course adds one named barrier of the 4 epilogue warps before freeing TMEM "
                "(`TMEM_FREE_BARRIER_ID`); the tutorial relies on its last per-sub-tile barrier, after which "
                "every warp's TMEM loads are consumed. Redundant but harmless in the course")


@explain(["*"], ["tcgen05.wait::ld per tile"])
def _(tv, cv, t, c):
    if tv == "0" and cv == "1":
        return ("the course waits once for its TMEM loads (`fence_view_async_tmem_load`, tcgen05.wait::ld) before "
                "it releases the accumulator (steps 7, 8) or frees TMEM (steps 5, 6); the tutorial's PTX has none "
                "and releases once its loaded registers have been converted and stored. The course is the "
                "conservative one; neither kernel waits between a tcgen05.ld and the use of its registers "
                "(CuTeDSL's lowering of the TMEM copy, the same in both)")


@explain(["3_1"], ["clusterlaunchcontrol.query_cancel per tile"])
def _(tv, cv, t, c):
    if tv == "12" and cv == "6":
        return ("each of the 4 roles (scheduler, TMA, MMA, epilogue warps) decodes every answer: the tutorial "
                "with 3 queries (is_canceled, first CTA x, y), the course with is_canceled alone where the tile "
                "is not needed (scheduler, MMA warp) and is_canceled + x elsewhere: 4 x 3 against 1 + 2 + 1 + 2")


@explain(["3_1"], ["opcode: clusterlaunchcontrol"])
def _(tv, cv, t, c):
    if "get_first_ctaid::y" in tv and "get_first_ctaid::y" not in cv and "get_first_ctaid::x" in cv:
        return ("the course numbers its clusters along grid x only (grid = (clusters x cluster_m, cluster_n, 1)), "
                "so it decodes only the first CTA's x; the tutorial's scheduler decodes x and y")


def compare_pair(key: str, directory: str, args) -> dict:
    number = PAIRS[key]
    result = {"key": key, "number": number}
    try:
        mod, changed, consts, msgs = load_tutorial(directory, key)
        result.update(changed=changed, consts=consts, warnings=msgs)
        tut = compile_tutorial(mod, key, args.max_active_clusters)
    except Exception as e:  # an API this CuTeDSL lacks: report and skip the pair
        result["error"] = f"{type(e).__name__}: {e}"
        return result
    course = compile_course(number)
    if args.ptx_dir:
        os.makedirs(args.ptx_dir, exist_ok=True)
        for b in (tut, course):
            with open(os.path.join(args.ptx_dir, b.label.replace("/", "_") + ".ptx"), "w") as f:
                f.write(b.ptx)
    t, c = analyze(tut), analyze(course)
    t["stages"], c["stages"] = consts.get("ab_stages"), course.stages
    result.update(rows=build_rows(key, t, c), t=t, c=c, course_config=course.note)
    return result


def print_pair(res: dict, markdown: bool, show_loops: bool):
    key, number = res["key"], res["number"]
    title = f"fp16_gemm_{key} (tutorial) vs sm100/{number} (course)"
    print(f"\n{'### ' if markdown else '== '}{title}\n")
    if "error" in res:
        print(f"SKIPPED: the tutorial does not load or compile with this CuTeDSL: {res['error']}\n")
        return
    print(f"tutorial constants changed before tracing: {', '.join(res['changed']) or 'none'}; kept: {res['consts']}")
    if res["warnings"]:
        print(f"warnings while importing the tutorial: {'; '.join(res['warnings'])}")
    print(f"course config: {res['course_config']}\n")
    if markdown:
        print("| | quantity | tutorial | course | flag |")
        print("|---|---|---|---|---|")
        for section, name, tv, cv, flag, why in res["rows"]:
            cells = (section.split(" (")[0].split(":")[0], name, tv, cv, flag or "=")
            print("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        print()
    else:
        section_now = None
        for section, name, tv, cv, flag, why in res["rows"]:
            if section != section_now:
                print(f"  [{section}]")
                section_now = section
            tv_, cv_ = tv.replace("<br>", " | "), cv.replace("<br>", " | ")
            print(f"    {flag or '=':<11} {name}\n{'':16}tutorial: {tv_}\n{'':16}course:   {cv_}")
    diffs = [(name, flag, why) for _, name, _, _, flag, why in res["rows"] if flag]
    print(f"{len(diffs)} difference(s):" if diffs else "no differences")
    for name, flag, why in diffs:
        print(f"- {flag} {name}: {why or 'no known explanation'}")
    for w in res["t"].get("_warnings", []) + res["c"].get("_warnings", []):
        print(f"- warning: {w}")
    if show_loops:
        for side in ("t", "c"):
            print(f"\n  loops of the {'tutorial' if side == 't' else 'course'} kernel (PTX lines, constant trip count, counts):")
            for a, b, trip, cnt in res[side]["loops"]:
                print(f"    {a}-{b} trip={trip}: " + ", ".join(f"{k} {v}" for k, v in cnt.items()))


def print_summary(results: list):
    """One Markdown table over all pairs: '= value' where tutorial and course agree, 'tutorial / course'
    (DIFF or UNEXPLAINED) where they differ; then the explanations."""
    done = [r for r in results if "rows" in r]
    for r in results:
        if "error" in r:
            print(f"- fp16_gemm_{r['key']} vs sm100/{r['number']}: SKIPPED ({r['error']})")
    if not done:
        return
    names = list(dict.fromkeys(name for r in done for _, name, *_ in r["rows"]))
    print("| quantity | " + " | ".join(f"fp16_gemm_{r['key']} / sm100/{r['number']}" for r in done) + " |")
    print("|---" * (len(done) + 1) + "|")
    for name in names:
        cells = []
        for r in done:
            row = next((x for x in r["rows"] if x[1] == name), None)
            if row is None:
                cells.append("-")
                continue
            _, _, tv, cv, flag, _ = row
            tv, cv = (v if len(v) <= 70 else v[:67] + "..." for v in (tv, cv))
            cells.append(f"= {tv}" if not flag else f"{flag}: {tv} / {cv}")
        print(f"| {name} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    print()
    for r in done:
        diffs = [(name, flag, why) for _, name, _, _, flag, why in r["rows"] if flag]
        print(f"fp16_gemm_{r['key']} / sm100/{r['number']}: {len(diffs)} difference(s)")
        for name, flag, why in diffs:
            print(f"- {flag} {name}: {why or 'no known explanation'}")
        for w in r["t"].get("_warnings", []) + r["c"].get("_warnings", []):
            print(f"- warning: {w}")
        print()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", help="a CUTLASS clone (work tree or bare)")
    ap.add_argument("--pairs", default="1:5,2:6,3:7,3_1:8", help="tutorial:course pairs, comma-separated (default: all four)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--ptx-dir", help="also write both PTX files of every pair here")
    ap.add_argument(
        "--max-active-clusters", type=int, default=74,
        help="fp16_gemm_3*'s host_function argument: sizes the static grid only (74: 148 SMs in pairs)",
    )
    ap.add_argument("--loops", action="store_true", help="also list every loop of both kernels")
    ap.add_argument("--summary", action="store_true", help="one Markdown table over all pairs instead of one per pair")
    args = ap.parse_args(argv)

    keys = []
    for tok in re.split(r"[,\s]+", args.pairs.strip()):
        k, _, n = tok.partition(":")
        if k not in PAIRS or (n and int(n) != PAIRS[k]):
            ap.error(f"unknown pair {tok!r}: choose from {', '.join(f'{k}:{v}' for k, v in PAIRS.items())}")
        keys.append(k)

    import cutlass

    version = getattr(cutlass, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v

        version = _v("nvidia-cutlass-dsl")
    with tutorial_dir(args.checkout) as (directory, rev):
        print(f"# date {datetime.date.today().isoformat()}, nvidia-cutlass-dsl {version}, CUTLASS {rev or 'revision unknown'}")
        print(f"# tile {TILE[0]}x{TILE[1]}x{TILE[2]} per CTA pair, cluster {CLUSTER[:2]}, bf16 in, fp32 accumulate, "
              "sm_100a, fake operands")
        results = [compare_pair(k, directory, args) for k in keys]
    if args.summary:
        print()
        print_summary(results)
    else:
        for res in results:
            print_pair(res, args.markdown, args.loops)
    unexplained = sum(1 for r in results for row in r.get("rows", []) if row[4] == "UNEXPLAINED")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
