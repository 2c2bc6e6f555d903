"""GEMM problems: shapes, inputs, the float32 reference, and validation before launch.

Every kernel in the course computes ``C = A @ B.T`` with

* ``A``: (M, K) bfloat16, K-major (row-major, each row of A is contiguous along K),
* ``B``: (N, K) bfloat16, K-major (each row of B is one column of the math-B),
* ``C``: (M, N) bfloat16, row-major, accumulated in float32.

This is the "TN" GEMM of BLAS terms and the layout ``torch.nn.functional.linear`` uses.
:func:`validate` refuses bad operands *before* any launch, with a message that says what to do.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

TMA_ALIGN_BYTES = 16  # TMA needs 16-byte aligned base addresses and leading dimensions
BF16_BYTES = 2
ELEMS_PER_16B = TMA_ALIGN_BYTES // BF16_BYTES  # 8 bf16 elements


class GemmInputError(ValueError):
    """Raised before launch when operands or shapes cannot be handled."""


@dataclasses.dataclass(frozen=True)
class GemmProblem:
    """Shape and formats of one GEMM. Only the course's format is supported (see module doc)."""

    m: int
    n: int
    k: int
    in_dtype: str = "bfloat16"
    out_dtype: str = "bfloat16"
    acc_dtype: str = "float32"
    a_major: str = "k"
    b_major: str = "k"
    c_major: str = "n"

    def __post_init__(self):
        for name in ("m", "n", "k"):
            why = _dimension_rule(name, getattr(self, name))
            if why:
                raise GemmInputError(why)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def min_bytes(self) -> int:
        """Fewest DRAM bytes: read A and B once, write C once."""
        return BF16_BYTES * (self.m * self.k + self.n * self.k + self.m * self.n)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.min_bytes

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @classmethod
    def square(cls, size: int) -> "GemmProblem":
        return cls(size, size, size)

    @classmethod
    def parse(cls, text: str) -> "GemmProblem":
        """``'4096'`` -> 4096^3, ``'8192x4096x14336'`` -> M x N x K."""
        parts = text.strip().lower().replace(",", "x").split("x")
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            raise GemmInputError(f"cannot read shape {text!r}: write M or MxNxK, e.g. 4096 or 8192x4096x14336")
        if len(dims) == 1:
            return cls.square(dims[0])
        if len(dims) != 3:
            raise GemmInputError(f"cannot read shape {text!r}: write M or MxNxK")
        return cls(*dims)


# ---------------------------------------------------------------------------------------------
# shape rules: the one list validate() and Step.can_implement both apply
# ---------------------------------------------------------------------------------------------


def _dimension_rule(name: str, v) -> str:
    """Why one of M, N, K (``name`` 'm', 'n' or 'k') cannot be a GEMM dimension, or ''."""
    if not isinstance(v, int) or isinstance(v, bool):
        return f"{name.upper()} must be an int, got {v!r}"
    if v <= 0:
        return (
            f"empty matrix: {name.upper()} = {v}. Every dimension must be at least 1; "
            "a GEMM with an empty dimension has nothing to compute (or is all zeros)."
        )
    return ""


def shape_rules(m, n, k, *, need_tma: bool = True) -> list:
    """The rules an M x N x K problem breaks, as messages that say what to do ([] when none).

    Every dimension an int >= 1; small enough for 32-bit tile coordinates; and with ``need_tma``
    (steps 2+) K and N multiples of 8, since TMA needs each row of A and B (K elements) and of C
    (N elements) to start on a 16-byte boundary. :func:`validate` raises the first of these and
    ``Step.can_implement`` returns it, so a shape one accepts the other does too.
    """
    bad = [why for why in (_dimension_rule(name, v) for name, v in (("m", m), ("n", n), ("k", k))) if why]
    if bad:
        return bad  # the other rules need positive ints
    if max(m, n, k) >= 2**31 or m * k >= 2**31 * 8 or n * k >= 2**31 * 8:
        bad.append(f"problem {m}x{n}x{k} is too large for 32-bit tile coordinates; split it.")
    if need_tma:
        for ld_name, ld, rows in (("K", k, "A and B"), ("N", n, "C")):
            if ld % ELEMS_PER_16B:
                bad.append(
                    f"{ld_name} = {ld} is not a multiple of {ELEMS_PER_16B}: TMA needs every row of {rows} to start "
                    f"on a 16-byte boundary. Pad {ld_name} up to {math.ceil(ld / ELEMS_PER_16B) * ELEMS_PER_16B} "
                    "with zeros, or use step 1 (naive), which has no alignment rule."
                )
    return bad


# ---------------------------------------------------------------------------------------------
# inputs and reference (torch is imported lazily: the package imports without it)
# ---------------------------------------------------------------------------------------------


def make_inputs(problem: GemmProblem, device="cuda", seed: Optional[int] = None):
    """Fresh random-normal A (M,K) and B (N,K) in bf16, and a poisoned C (all NaN).

    Never zeros: zeros hide unwritten outputs and run faster than real data.
    """
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed if seed is not None else torch.seed() % (2**31))
    a = torch.randn(problem.m, problem.k, generator=gen).to(torch.bfloat16).to(device)
    b = torch.randn(problem.n, problem.k, generator=gen).to(torch.bfloat16).to(device)
    c = poisoned_output(problem, device)
    return a, b, c


def poisoned_output(problem: GemmProblem, device="cuda"):
    import torch

    return torch.full((problem.m, problem.n), float("nan"), dtype=torch.bfloat16, device=device)


def reference(a, b):
    """float32 reference ``A @ B.T`` computed from the (bf16) inputs."""
    return a.float() @ b.float().t()


def relative_error(c, ref) -> float:
    """``||C - ref|| / ||ref||`` in float64; NaN or Inf anywhere (an unwritten element) gives inf."""
    import torch

    c64 = c.double()
    if not torch.isfinite(c64).all():
        return math.inf
    ref64 = ref.double()
    return float(torch.linalg.norm(c64 - ref64) / torch.linalg.norm(ref64))


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _check_operand(name: str, t, device_type: str, rows_name: str, cols_name: str):
    import torch

    if not isinstance(t, torch.Tensor):
        raise GemmInputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise GemmInputError(
            f"{name} must be 2-D ({rows_name}, {cols_name}), got shape {tuple(t.shape)}; "
            "batched GEMMs are not part of the course: loop over the batch or reshape."
        )
    if t.dtype != torch.bfloat16:
        raise GemmInputError(
            f"{name} has dtype {t.dtype}; the course's kernels take bfloat16. "
            f"Convert with {name.lower()}.to(torch.bfloat16)."
        )
    if t.device.type != device_type:
        hint = f"{name.lower()}.cuda()" if device_type == "cuda" else f"{name.lower()}.to('{device_type}')"
        raise GemmInputError(f"{name} is on {t.device}, the kernel runs on {device_type}: move it with {hint}.")


def _major_rule(name: str, t, major_word: str) -> str:
    """Why the 2-D ``t`` is not row-major with rows that do not overlap (stride 1 along
    ``major_word``, K for A and B, N for C), or ''."""
    rows, cols = t.shape
    if t.stride(1) != 1:
        if t.stride(0) == 1 and rows > 1:
            return (
                f"{name} is {'column' if major_word == 'K' else 'the wrong'}-major (strides {tuple(t.stride())}), "
                f"the kernels need {name} {major_word}-major (row-major, stride 1 along {major_word}). "
                f"Pass {name.lower()}.contiguous(); if you have the transpose, pass {name.lower()}.t().contiguous()."
            )
        return f"{name} is not contiguous (strides {tuple(t.stride())}); pass {name.lower()}.contiguous()."
    if rows > 1 and t.stride(0) < cols:
        return f"{name} rows overlap (strides {tuple(t.stride())}); pass {name.lower()}.contiguous()."
    return ""


def _tma_rule(name: str, t) -> str:
    """Why TMA cannot address the row-major 2-D ``t`` (a tensor map's base address and its row
    stride, the one global stride, must be multiples of 16 bytes), or ''."""
    return _row_stride_rule(name, t) or _base_rule(name, t)


def _row_stride_rule(name: str, t) -> str:
    row = t.stride(0)
    if row % ELEMS_PER_16B:
        padded = math.ceil(max(row, t.shape[1]) / ELEMS_PER_16B) * ELEMS_PER_16B
        # torch calls a one-row view contiguous whatever its row stride, and .contiguous() keeps it
        copy = "contiguous()" if t.shape[0] > 1 else "clone(memory_format=torch.contiguous_format)"
        return (
            f"{name}'s rows are {row} elements ({row * BF16_BYTES} bytes) apart (strides {tuple(t.stride())}, e.g. a "
            f"view into a wider tensor): TMA needs a row stride that is a multiple of {TMA_ALIGN_BYTES} bytes "
            f"({ELEMS_PER_16B} bf16 elements). Pass {name.lower()}.{copy}, or allocate the rows padded to a "
            f"multiple of {ELEMS_PER_16B} elements (here {padded}) and take the view from that."
        )
    return ""


def _base_rule(name: str, t) -> str:
    if t.data_ptr() % TMA_ALIGN_BYTES:
        # an input's copy reads the same values; an output's copy would keep the result from the caller's tensor
        fix = ("write into a fresh output, torch.empty(M, N, dtype=torch.bfloat16, device=...), and copy it where "
               "you need it" if name == "C" else f"pass {name.lower()}.clone() to get a fresh, aligned allocation")
        return f"{name}'s data pointer is not 16-byte aligned (it is a view at an odd offset); {fix}."
    return ""


def operand_rule(name: str, t, *, major_word: str = "K", need_tma: bool = True) -> str:
    """Why the kernels cannot read (or write) the 2-D bfloat16 tensor ``t`` as it lies in memory,
    or '': row-major along ``major_word`` (K for A and B, N for C) with rows that do not overlap,
    and with ``need_tma`` a 16-byte aligned base and a row stride that is a multiple of 8 elements.
    :func:`validate` raises the same messages; a caller that would rather copy than refuse (e.g.
    ``linear`` with its input) asks this and copies when it says why."""
    return _major_rule(name, t, major_word) or (_tma_rule(name, t) if need_tma else "")


def layout_rule(name: str, t, *, major_word: str = "K", need_tma: bool = True) -> str:
    """:func:`operand_rule` without the data pointer's alignment: what depends only on the shape and
    strides (a caller that keeps it per signature still checks the pointer on every call)."""
    return _major_rule(name, t, major_word) or (_row_stride_rule(name, t) if need_tma else "")


def _byte_span(t) -> tuple:
    """[first, last) bytes a row-major 2-D tensor can touch (rows with a stride, the last one whole)."""
    rows, cols = t.shape
    start = t.data_ptr()
    return start, start + ((rows - 1) * t.stride(0) + cols) * t.element_size()


def _aliasing_rule(a, b, c) -> str:
    """Why the output ``c`` cannot be written while ``a`` and ``b`` are read (its bytes overlap an
    input's), or ''. A and B may share memory: both are only read."""
    c_first, c_last = _byte_span(c)
    for name, t in (("A", a), ("B", b)):
        first, last = _byte_span(t)
        if first < c_last and c_first < last:
            return (
                f"C shares memory with an input ({name}): the kernel would overwrite what it still reads. "
                "Allocate a separate output tensor (torch.empty(M, N, dtype=torch.bfloat16, device=...))."
            )
    return ""


def validate(a, b, c=None, *, need_tma: bool = True, device_type: str = "cuda") -> GemmProblem:
    """Check operands for ``C = A @ B.T`` and return the problem; raise :class:`GemmInputError`.

    The one check of the tensors every path applies (``run.prepare``, ``run.validate_operands``,
    ``linear``, the benches). In order: each tensor's type, rank, dtype and device, and agreeing
    shapes; the problem's :func:`shape_rules` (with ``need_tma``: K and N multiples of 8, with or
    without a C); each tensor's layout (:func:`operand_rule`: row-major, rows that do not overlap,
    and with ``need_tma`` row strides that are multiples of 8 elements and 16-byte aligned base
    pointers, the two things a TMA tensor map needs); C not overlapping A or B and not requiring
    grad. The naive step 1 passes ``need_tma=False``.
    ``device_type``: where the kernel runs ('cuda'); tests of the other rules may pass 'cpu'.
    """
    _check_operand("A", a, device_type, "M", "K")
    _check_operand("B", b, device_type, "N", "K")
    if a.device != b.device:
        raise GemmInputError(f"A is on {a.device} and B on {b.device}: put both on the same GPU.")
    if a.shape[1] != b.shape[1]:
        raise GemmInputError(
            f"K mismatch: A is {tuple(a.shape)} (M, K) and B is {tuple(b.shape)} (N, K). "
            "B must be given as (N, K), i.e. the transpose of the math-B; if you hold a (K, N) matrix, "
            "pass b.t().contiguous()."
        )
    m, k = a.shape
    n = b.shape[0]
    if c is not None:
        _check_operand("C", c, device_type, "M", "N")
        if c.device != a.device:
            raise GemmInputError(f"C is on {c.device} but A is on {a.device}: put all three on the same GPU.")
        if tuple(c.shape) != (m, n):
            raise GemmInputError(f"C has shape {tuple(c.shape)}, expected (M, N) = ({m}, {n}).")
    broken = shape_rules(m, n, k, need_tma=need_tma)  # before the strides: an empty matrix has odd ones
    if broken:
        raise GemmInputError(broken[0])
    for name, t, major_word in (("A", a, "K"), ("B", b, "K"), ("C", c, "N")):
        why = operand_rule(name, t, major_word=major_word, need_tma=need_tma) if t is not None else ""
        if why:
            raise GemmInputError(why)
    if c is not None:
        why = _aliasing_rule(a, b, c)
        if why:
            raise GemmInputError(why)
        if c.requires_grad:
            raise GemmInputError(
                "C requires grad, but the kernel writes it in place outside autograd: pass an output from "
                "torch.empty(...) (or c.detach()); A and B may require grad, they are read detached."
            )
    return GemmProblem(m, n, k)
