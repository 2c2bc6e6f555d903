"""The course's Triton matmul: its grouped order on the CPU (the kernel's arithmetic, as Python),
and on a GPU its result against the float32 reference."""

import pytest

from gemm_course.measure import triton_peer
from gemm_course.rules import tile_order


def program_tile(pid, tiles_m, tiles_n, group):
    """The kernel's pid -> (tile_m, tile_n), as written in triton_peer (integer arithmetic)."""
    band = group * tiles_n
    first_m = (pid // band) * group
    rows = min(tiles_m - first_m, group)
    return first_m + (pid % band) % rows, (pid % band) // rows


@pytest.mark.fast
@pytest.mark.parametrize("tiles_m,tiles_n,group", [(8, 8, 8), (13, 7, 8), (3, 20, 8), (16, 4, 4)])
def test_program_order_is_the_courses_grouped_raster(tiles_m, tiles_n, group):
    order = [program_tile(p, tiles_m, tiles_n, group) for p in range(tiles_m * tiles_n)]
    assert order == tile_order.grouped_raster(tiles_m, tiles_n, group)
    assert sorted(order) == [(m, n) for m in range(tiles_m) for n in range(tiles_n)]


@pytest.mark.fast
def test_kernel_source_uses_that_order():
    import inspect

    src = inspect.getsource(triton_peer._kernel)
    for line in ("band = GROUP_M * tiles_n", "first_m = (pid // band) * GROUP_M", "tile_m = first_m + (pid % band) % rows",
                 "tile_n = (pid % band) // rows"):
        assert line in src, line
    assert all(len(c) == 6 for c in triton_peer.CONFIGS)


@pytest.mark.gpu
def test_triton_peer_is_correct_on_ragged_shapes():
    import torch

    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    for shape in ((4096, 4096, 4096), (1000, 1000, 1000), (129, 520, 72), (8192, 2048, 200)):
        a, b, c = make_inputs(GemmProblem(*shape), "cuda", 0)
        c.fill_(float("nan"))
        triton_peer.matmul(a, b, c)
        torch.cuda.synchronize()
        assert relative_error(c, reference(a, b)) < 1e-2, shape
