"""The shapes the kernels are judged on: the broad sweep's classes and the decode class.

:func:`broad_sweep_shapes` (squares, LLM shapes, few-wave long-K), :func:`decode_shapes` (the
linear layers of real models at few tokens), :func:`decode12_shapes` (the memory-roofline step's
run: one to 256 tokens on five layers) and :func:`shape_class`, a shape's class. Pure
Python; re-exported by :mod:`gemm_course.measure.records` and :mod:`gemm_course.measure.bench`.
"""

from __future__ import annotations

SWEEP_SQUARES = (2048, 3072, 4096, 6144, 7168, 8192, 10240, 12288, 16384)
LLM_MS = (4096, 8192, 16384)
LLM_NKS = (1536, 2048, 3584, 4096, 5120, 7168, 11008, 14336, 28672)
FEW_WAVE_MNS = (1024, 2048, 3072)
FEW_WAVE_KS = (8192, 16384, 32768)


def broad_sweep_shapes() -> dict:
    """{class: [(m, n, k), ...]}: squares 2048-16384 (non-powers of two included); LLM shapes, for
    each M every N and every K once (a Latin square over the nine values: 27 of the 243); few-wave
    long-K shapes, every (M, N) pair with the three Ks in turn, plus 2304 x 2304 x 9216."""
    values = len(LLM_NKS)
    llm = [(m, LLM_NKS[j], LLM_NKS[(j + 3 * i + 1) % values]) for i, m in enumerate(LLM_MS) for j in range(values)]
    pairs = [(m, n) for m in FEW_WAVE_MNS for n in FEW_WAVE_MNS]
    few = [(m, n, FEW_WAVE_KS[(i + i // 3) % len(FEW_WAVE_KS)]) for i, (m, n) in enumerate(pairs)] + [(2304, 2304, 9216)]
    return {"square": [(s, s, s) for s in SWEEP_SQUARES], "llm": llm, "few-wave long-K": few}


# decode-sized GEMMs: y = x W^T with few tokens (M) and the weights (N, K) of real models' linear layers
DECODE_MS = (16, 32, 64, 128, 256, 512)
DECODE_LAYERS = {  # model: {layer: (N, K)} as nn.Linear stores W (out_features, in_features)
    "Llama-3.2-1B": {"qkv": (3072, 2048), "o": (2048, 2048), "gate_up": (16384, 2048), "down": (2048, 8192)},
    "Llama-3.1-8B": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)},
    "Qwen2.5-14B": {"qkv": (7168, 5120), "o": (5120, 5120), "gate_up": (27648, 5120), "down": (5120, 13824)},
    "Llama-3.1-70B": {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)},
}


def decode_shapes() -> list:
    """The decode class, [(m, n, k), ...]: every layer of :data:`DECODE_LAYERS` at M = 128 (where the
    memory roofline is judged), and each layer once more at one other M of :data:`DECODE_MS`, in turn."""
    layers = [nk for model in DECODE_LAYERS.values() for nk in model.values()]
    others = [m for m in DECODE_MS if m != 128]
    return [(128, n, k) for n, k in layers] + [(others[i % len(others)], n, k) for i, (n, k) in enumerate(layers)]


def shape_class(m: int, n: int, k: int) -> str:
    """The broad sweep's class of a shape (``decode`` for :func:`decode_shapes`, ``other`` outside both)."""
    if (m, n, k) in decode_shapes():
        return "decode"
    for name, shapes in broad_sweep_shapes().items():
        if (m, n, k) in shapes:
            return name
    return "other"


# the memory-roofline step's decode run (scripts/gpu_decode12.sh on Hopper, the B200 kit on Blackwell):
# batch-1 decode to 256 tokens, on Llama-3.1-8B's layers (its gate and up projections one at a time) and
# Llama-3.2-1B's down projection
DECODE12_MS = (1, 8, 16, 32, 64, 128, 256)
DECODE12_LAYERS = ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (2048, 8192))  # (N, K)


def decode12_shapes() -> list:
    """[(m, n, k), ...]: every M of :data:`DECODE12_MS` over every layer of :data:`DECODE12_LAYERS`, M outermost."""
    return [(m, n, k) for m in DECODE12_MS for n, k in DECODE12_LAYERS]
