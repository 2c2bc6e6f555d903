"""Which kernels cuBLAS ran for a shape, as records: what the course's kernel is measured against.

``scripts/cublas_kernels.py --out OUT`` profiles one ``torch.mm`` per shape (y = x W^T, as
``F.linear`` calls it) and writes a record of kind ``cublas_kernels`` per shape: the CUDA kernels'
names, with the machine's provenance (:func:`gemm_course.measure.environment.environment`).

:func:`describe` reads a Hopper ``nvjet`` kernel's name. torch hands the row-major product to
cuBLAS as the column-major C^T = W x^T, so cuBLAS's M is W's rows and its N the tokens; the name
gives the tile in that order, then K per stage and the stages, then the cluster in the same order:

    nvjet_sm90_tst_112x128_64x7_2x1_v_bz_TNN   ->  112 rows of W x 128 tokens, 7 stages of 64,
                                                    clusters of 2 along W's rows, K whole

``splitK`` in the name means a separate reduction kernel adds the parts (``splitKreduce_kernel``).
The rest of the name (raster ``h``/``v``, the operand letters) is kept as written.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

KIND = "cublas_kernels"

_NVJET = re.compile(r"nvjet_sm(?P<sm>\d+)_[a-z]+_(?P<rows>\d+)x(?P<tokens>\d+)_(?P<tile_k>\d+)x(?P<stages>\d+)_"
                    r"(?P<cluster_rows>\d+)x(?P<cluster_tokens>\d+)_(?P<rest>.*)")


def describe(name: str) -> Optional[dict]:
    """The tile, stages, cluster and split of an ``nvjet`` kernel's name (module docstring); None for
    any other kernel (a reduction, a memset, a pre-Hopper library kernel)."""
    found = _NVJET.search(name)
    if not found:
        return None
    out = {key: int(value) for key, value in found.groupdict().items() if key != "rest"}
    out["split_k"] = "splitK" in found["rest"]
    out["name"] = name
    return out


def main_kernel(names: Sequence[str]) -> Optional[dict]:
    """:func:`describe` of the GEMM kernel among one call's ``names`` (None where none is an nvjet)."""
    described = [d for d in map(describe, names) if d]
    return described[0] if described else None


def summary(kernel: Optional[dict]) -> str:
    """One line for a table: ``112 x 128, 7 x 64, 2 x 1, K whole``; "-" for None."""
    if not kernel:
        return "-"
    return (f"{kernel['rows']} x {kernel['tokens']}, {kernel['stages']} x {kernel['tile_k']}, "
            f"{kernel['cluster_rows']} x {kernel['cluster_tokens']}, {'split-K' if kernel['split_k'] else 'K whole'}")


def record(m: int, n: int, k: int, names: Sequence[str], command: str) -> dict:
    """A ``cublas_kernels`` record of one shape: the kernels' names, the date and the machine."""
    import time

    from .environment import environment

    rec = {"kind": KIND, "shape": {"m": m, "n": n, "k": k}, "kernels": sorted(names),
           "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), "command": command}
    rec.update(environment())
    return rec


def newest_per_shape(records: Sequence[dict], gpu: Optional[str] = None) -> dict:
    """{(m, n, k): the newest ``cublas_kernels`` record of that shape} (on ``gpu`` where given)."""
    out = {}
    for r in sorted((r for r in records if r.get("kind") == KIND and (gpu is None or r.get("gpu") == gpu)),
                    key=lambda r: r.get("date", "")):
        s = r["shape"]
        out[s["m"], s["n"], s["k"]] = r
    return out
