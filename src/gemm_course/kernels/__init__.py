"""Kernels of the ladder: ``naive`` (step 1, any GPU), ``sm90/`` (Hopper), ``sm100/`` (Blackwell)."""
