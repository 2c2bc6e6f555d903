"""The host rules: choices made on the host before a launch (``tile_rule``, ``decode_rule``,
``schedule``, ``tile_order``, ``placement``), pure Python the kernels trace too."""
