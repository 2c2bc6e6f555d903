"""The persistent kernels' schedule (steps 8-10): how ``next_tile`` decodes a cluster launch control
answer, and the tile each CTA computes for a cluster-tile index."""

from __future__ import annotations

import contextlib

from ._common import _gemm, _patched, trace_static


class _Stub:
    """Stands in for the CLC pipeline, its state and the shared storage while ``next_tile`` traces."""

    index = 0

    def consumer_wait(self, state):
        pass

    def consumer_release(self, state):
        pass

    def advance(self):
        pass

    class clc_responses:  # storage.clc_responses.data_ptr() + stage
        @staticmethod
        def data_ptr():
            return 0


def clc_decode_table(step="sm100/8", config=None, first_cta_xs=range(16)) -> dict:
    """``{first_cta_x: (cluster-tile index, valid)}`` as the step's own ``Gemm.next_tile`` decodes a
    successful ``try_cancel`` answer whose first CTA has x = ``first_cta_x``.

    ``next_tile`` is traced with the answer's query (``cute.arch.clc_response``) replaced by the
    given coordinates and the pipeline by a stand-in; its arithmetic is the kernel's.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    def evaluate():
        for x in first_cta_xs:
            with _patched(cute.arch, clc_response=lambda ptr, x=x: (x, 0, 0, 1), fence_proxy=lambda *a, **k: None):
                index, valid, _ = gemm.next_tile(_Stub(), _Stub(), _Stub())
            found[x] = (int(index), bool(valid))

    @cute.jit
    def probe():
        evaluate()

    trace_static(probe)
    return found


def _plain(fn):
    """A ``cute.jit`` function as plain Python, rebuilt from its source.

    Not ``fn.__wrapped__``: once CuTeDSL has compiled a kernel that calls ``fn``, it has swapped its
    rewritten code (staged ``if``/``while``) into that function object, and the rewritten code needs
    an MLIR context to run."""
    import ast
    import inspect as pyinspect
    import sys

    inner = getattr(fn, "__wrapped__", fn)
    module = sys.modules[inner.__module__]
    tree = ast.parse(pyinspect.getsource(module))
    node = tree
    for part in inner.__qualname__.split("."):
        node = next(n for n in ast.iter_child_nodes(node)
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    node.decorator_list = []
    namespace = dict(vars(module))
    exec(compile(ast.Module(body=[node], type_ignores=[]), module.__file__, "exec"), namespace)
    return namespace[node.name]


def kernel_cta_tiles(step="sm100/8", config=None, m: int = 4096, n: int = 4096, cluster: int = 0) -> dict:
    """``{index: {(x, y): (pair tile (m, n), CTA tile (m, n))}}``: what the step's own
    ``Gemm.tile_coords`` gives each CTA (x, y) of cluster ``cluster`` for every cluster-tile index
    of an ``m x n`` C, with ``block_idx`` = (cluster * cluster_m + x, y, 0).

    Plain Python: ``block_idx`` is replaced by those numbers, C by its shape, and ``cluster_tile``
    (and the jit functions it calls, e.g. step 10's ``gilbert_tile``) by their Python bodies.
    """
    import types

    import cutlass.cute as cute

    gemm = _gemm(step, config)
    cm, cn, _ = gemm.cluster_shape_mnk
    mC = types.SimpleNamespace(shape=(m, n))
    tile_fn = _plain(type(gemm).cluster_tile)
    jitted = {name: _plain(v) for name, v in tile_fn.__globals__.items()
              if name in tile_fn.__code__.co_names and hasattr(v, "__wrapped__")}
    gemm.cluster_tile = types.MethodType(tile_fn, gemm)
    clusters_m, clusters_n = gemm.cluster_grid(mC)
    table = {}
    with contextlib.ExitStack() as stack:
        for name, fn in jitted.items():  # the module's jit functions, as Python, while this runs
            stack.callback(tile_fn.__globals__.__setitem__, name, tile_fn.__globals__[name])
            tile_fn.__globals__[name] = fn
        for index in range(clusters_m * clusters_n):
            table[index] = {}
            for x in range(cm):
                for y in range(cn):
                    with _patched(cute.arch, block_idx=lambda x=x, y=y: (cluster * cm + x, y, 0)):
                        pair_tile, cta_tile = gemm.tile_coords(index, mC)
                    table[index][(x, y)] = (tuple(int(v) for v in pair_tile[:2]), tuple(int(v) for v in cta_tile[:2]))
    return table
