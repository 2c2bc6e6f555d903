"""Small pieces several steps share (each says where the course introduces it)."""

from __future__ import annotations


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
