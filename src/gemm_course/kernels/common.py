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
