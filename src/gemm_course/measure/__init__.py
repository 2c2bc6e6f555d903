"""The measuring: timing (``bench``, ``stepwise``, ``triton_peer``), the records and their
provenance (``records``, ``notes``, ``tuning_history``) and the B200 kit (``b200``)."""
