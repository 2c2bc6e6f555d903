"""The measuring: timing (``bench``, with its parts ``timing``, ``bandwidth``, ``user_loop``,
``energy`` and ``environment``; ``stepwise``, ``triton_peer``), the records and their provenance
(``records``, with its queries ``record_queries``, ``sweep_shapes``, ``sweeps``, ``ab_runs`` and
``hardware_counters``; ``notes``, ``tuning_history``; ``cublas_kernels``, what cuBLAS ran), filing a device
run's output (``device_runs``) and the B200 kit (``b200``)."""
