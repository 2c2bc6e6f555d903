"""Small pieces several steps share (each says where the course introduces it)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute


def check_tile_divides(problem, tile_m: int, tile_n: int, step_with_any_mn: int):
    """Steps whose epilogue stores fragments straight to global memory need whole tiles (step 2)."""
    sides = (("M", problem.m, tile_m), ("N", problem.n, tile_n))
    bad = [f"{name} = {v} is not a multiple of {t}" for name, v, t in sides if v % t]
    if bad:
        return False, (
            "; ".join(bad)
            + f": this step stores whole {tile_m}x{tile_n} tiles. Pad the problem, pick a tile that divides it, "
            f"or use step {step_with_any_mn}+, whose TMA store clips partial tiles."
        )
    return True, ""


class DependentLaunch:
    """Programmatic dependent launch for a ``Gemm`` whose config has ``pdl`` (chapter 12, both
    architectures' step 12; the parent step calls ``kernel_started`` and ``before_first_load``). A
    decode GEMM lasts microseconds, so the next kernel's launch and set-up are a real share of a
    layer: with ``pdl`` the launch lets this kernel start while the one before it runs, every CTA lets
    the next kernel launch at once, and the loads of anything the kernel before may have written wait
    (``wait_for_kernel_before``)."""

    def launch_options(self) -> dict:
        """With ``pdl``, launched so that it may start while the kernel before it on the stream runs."""
        options = super().launch_options()
        return {**options, "use_pdl": True} if self.config.pdl else options

    def kernel_started(self):
        """With ``pdl``, every CTA lets the next kernel launch at once: a decode grid leaves SMs idle, where
        that kernel's launch and set-up can overlap this one's loads. With ``launch_after_loads``, not yet."""
        if cutlass.const_expr(self.config.pdl and not self.config.launch_after_loads):
            cute.arch.griddepcontrol_launch_dependents()

    def after_last_load(self):
        """With ``pdl`` and ``launch_after_loads``, the producer lets the next kernel launch once its last load
        is issued (the CTA's first such signal counts): a grid that leaves SMs idle otherwise starts the
        next kernel a whole layer early, and what that kernel puts in L2 before its wait is gone by then."""
        if cutlass.const_expr(self.config.pdl and self.config.launch_after_loads):
            cute.arch.griddepcontrol_launch_dependents()

    def wait_for_kernel_before(self):
        """With ``pdl``, wait until the kernel before has finished and its writes are visible."""
        if cutlass.const_expr(self.config.pdl):
            cute.arch.griddepcontrol_wait()

    def loads_w_before_wait(self) -> bool:
        """With ``w_before_wait`` (and the swap, which makes W operand A): W's first loads go before the wait."""
        return self.config.w_before_wait > 0 and self.config.swap_ab

    @cute.jit
    def load_w_then_x(self, mainloop_pipeline, load_state, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask,
                      k_begin, k_end, prefetch_w: cutlass.Constexpr[int] = 0):
        """The producer's loads of a unit up to the wait (``w_before_wait``): at the first unit (the producer
        state's count is 0 only there), W's first K tiles into the stages (``w_before_wait`` of them, fewer
        where the stages or the unit's K tiles are fewer; each acquire expects both boxes), the next
        ``prefetch_w`` K tiles of W into L2, the wait for the kernel before, then x (its output) into the same
        stages. Returns the producer state after W's stages and the first K tile still to load."""
        first = load_state.count == 0
        early = cutlass.select_(first, cutlass.min(k_end - k_begin, min(self.config.w_before_wait, self.stages)), 0)
        x_state = load_state.clone()
        for k_tile in cutlass.range(k_begin, k_begin + early, unroll=1):
            mainloop_pipeline.producer_acquire(load_state)  # expects the stage's bytes of W and of x
            barrier = mainloop_pipeline.producer_get_barrier(load_state)
            cute.copy(tma_atom_a, tAgA[(None, k_tile)], tAsA[(None, load_state.index)], tma_bar_ptr=barrier, mcast_mask=a_mask)
            load_state.advance()
        if first:
            for k_tile in cutlass.range(k_begin + early, cutlass.min(k_end, k_begin + early + prefetch_w), unroll=1):
                cute.prefetch(tma_atom_a, tAgA[(None, k_tile)])
            self.wait_for_kernel_before()
        for k_tile in cutlass.range(k_begin, k_begin + early, unroll=1):
            barrier = mainloop_pipeline.producer_get_barrier(x_state)
            cute.copy(tma_atom_b, tBgB[(None, k_tile)], tBsB[(None, x_state.index)], tma_bar_ptr=barrier, mcast_mask=b_mask)
            mainloop_pipeline.producer_commit(x_state)
            x_state.advance()
        return load_state, k_begin + early
