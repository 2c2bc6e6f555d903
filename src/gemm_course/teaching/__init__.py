"""The teaching models and listings the chapters call: ``sim``, ``cute_basics``, ``inspect``,
``source``, ``exercises``, ``widgets``, ``chapter`` and the instruction table (``instructions``)."""
