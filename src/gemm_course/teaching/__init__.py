"""The teaching models and listings the chapters call: ``sim``, ``cute_basics``, ``inspect``,
``source``, ``exercises``, ``widgets`` (the tile explorer; its compiled rows in ``explorer_rows``,
its static page in ``explorer_page``), ``chapter`` and the instruction table (``instructions``)."""
