"""The Blackwell halves of chapters 2 and 4-8: write the function, the check compiles the kernel.

Part of ``gemm_course.teaching.exercises`` (its docstring says how the checks work)."""

from __future__ import annotations

from .common import NOT_ANSWERED, attempt, unanswered  # noqa: F401

# ---------------------------------------------------------------------------------------------
# the Blackwell halves of chapters 2 and 4-8: write the function, the check compiles the kernel
# ---------------------------------------------------------------------------------------------


def check_tmem_alloc_columns(tile_n: int, columns: int) -> str:
    """How many tensor-memory columns does ``sm100/2`` allocate with ``tile_n``? Read from its PTX."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get("sm100/2")
    (actual,) = inspect.tmem_alloc_columns(arch.compile_step(s, s.config(tile_n=tile_n), "sm_100a").ptx)
    assert columns == actual, (
        f"not {columns}. Hint: one 32-bit column per fp32 accumulator column, allocated in powers of two from 32; "
        "the rows sit in lanes, not columns."
    )
    return f"right: {actual} columns of 512; at most {512 // actual} such CTAs can hold tensor memory on one SM at once"


def check_tmem_load_op(fn) -> str:
    """Write ``fn(rows, epi_n)``: the ``tcgen05`` copy op that loads a ``rows x epi_n`` sub-tile of the
    accumulator per warp quarter (``rows`` 64 or 128). Compared with ``sm100/4``'s own choice."""
    from ...runtime import arch, ladder

    s = ladder.get("sm100/4")
    for rows in (64, 128):
        for epi_n in (16, 32, 64):
            with arch.targeting("sm_100a"):  # tcgen05 ops exist only for a Blackwell target, whatever GPU is here
                want = s.load().Gemm(s.config(tile_m=rows, epi_n=epi_n)).tmem_load_op()
                got = fn(rows, epi_n)
            assert repr(got) == repr(want), (
                f"for {rows} rows and epi_n={epi_n} your op is {got!r}, the kernel uses {want!r}. Hint: with 64 rows each "
                "warp owns 16 lanes (16x256b: 8 fp32 columns per repetition); with 128 rows, 32 lanes (32x32b: one "
                "column per repetition)."
            )
    return "right: 16x256b with epi_n / 8 repetitions for 64 rows (stmatrix fits), 32x32b with epi_n for 128 rows"


def check_pair_tx_bytes(fn) -> str:
    """Write ``fn(tile_m, tile_n, tile_k, cluster_m, cluster_n)``: the bytes the leader's full barrier of
    ``sm100/5`` expects per stage. Compared with ``expect_tx`` in the PTX for three cluster shapes."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get("sm100/5")
    for cm, cn in ((2, 1), (4, 1), (2, 2)):
        config = s.config(cluster_m=cm, cluster_n=cn)
        tx = [b for b in inspect.expect_tx_bytes(arch.compile_step(s, config, "sm_100a").ptx) if b != 16]
        got = fn(config.tile_m, config.tile_n, config.tile_k, cm, cn)
        assert [got] == tx, (
            f"cluster {cm} x {cn}: you expect {got} bytes, the PTX's expect_tx is {tx}. Hint: the loads of both CTAs of "
            "the pair (each its tile_m rows of A and half of B's tile_n rows) signal the leader's barrier; "
            "what other pairs of the cluster receive by multicast signals theirs."
        )
    return f"right: {tx[0]} bytes per stage, whatever the cluster"


def check_sm100_max_stages(fn) -> str:
    """Write ``fn(tile_n, epi_n, epi_stages)``: the most A/B stages ``sm100/6`` fits in 232448 bytes.
    Compared with the step's ``check_config``, and the answer compiled to see its shared memory."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get("sm100/6")
    for tile_n, epi_n, epi_stages in ((256, 32, 2), (128, 32, 2), (256, 64, 2)):
        valid = [n for n in range(2, 17) if s.check_config(s.config(tile_n=tile_n, epi_n=epi_n, epi_stages=epi_stages, stages=n))[0]]
        got = fn(tile_n, epi_n, epi_stages)
        assert got == max(valid), (
            f"tile_n={tile_n}, epi_n={epi_n}: you say {got}, the step accepts up to {max(valid)}. Hint: a stage holds "
            "128 rows of A and tile_n / 2 rows of B, 64 bf16 each; the staging buffers (128 x epi_n bf16 each) and "
            "4 KiB of barriers and alignment come on top."
        )
    smem = inspect.smem_request(arch.compile_step(s, s.config(stages=fn(256, 32, 2)), "sm_100a"))
    return f"right: the default compiles to {smem} bytes of shared memory, of 232448"


def check_tmem_columns(fn) -> str:
    """Write ``fn(acc_stages, tile_n)``: the columns ``sm100/7`` allocates. Compared with its PTX."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get("sm100/7")
    for acc_stages, tile_n in ((1, 256), (2, 256), (2, 128), (3, 128)):
        (actual,) = inspect.tmem_alloc_columns(arch.compile_step(s, s.config(acc_stages=acc_stages, tile_n=tile_n), "sm_100a").ptx)
        got = fn(acc_stages, tile_n)
        assert got == actual, (
            f"acc_stages={acc_stages}, tile_n={tile_n}: you say {got}, the kernel allocates {actual}. Hint: every "
            "accumulator needs tile_n columns, and an allocation is a power of two from 32 to 512."
        )
    return "right: acc_stages x tile_n, rounded up to a power of two"


def check_clc_decode(fn) -> str:
    """Write ``fn(first_cta_x, cluster_m)``: the cluster-tile index of a cancelled cluster whose first CTA
    has x = ``first_cta_x`` (``sm100/8``'s grid numbers clusters along x). Compared with the kernel's own
    ``next_tile``, traced."""
    from ...kernels.sm100 import layouts
    from ...runtime import ladder

    for cluster_m in (2, 4):
        config = ladder.get("sm100/8").config(cluster_m=cluster_m)
        table = layouts.clc_decode_table("sm100/8", config, range(0, 8 * cluster_m, cluster_m))
        for x, (index, valid) in table.items():
            got = fn(x, cluster_m)
            assert got == index, (
                f"first CTA x = {x} with cluster_m = {cluster_m}: you say {got}, the kernel decodes {index}. Hint: the grid "
                "is (clusters x cluster_m, cluster_n, 1), so cluster c's CTAs have x = c * cluster_m ... c * cluster_m + cluster_m - 1."
            )
    return "right: first_cta_x // cluster_m"
