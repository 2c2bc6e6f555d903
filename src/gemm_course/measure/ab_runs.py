"""A/B runs (``scripts/gpu_tune.py``, ``results/tuning/NAME.json.gz``): variants interleaved in one
process, compared.

A run as :func:`gemm_course.measure.records.load_tuning` reads it: :func:`ab_changes` (how much
faster one variant ran than another, per shape and repetition), :func:`variant_config` and
:func:`row_config` (the config a variant or a row timed) and :func:`rule_ab` (a per-shape rule's
choice against the default and the best variant). Nothing here reads a file: the table of named
runs, :func:`gemm_course.measure.records.ab_table`, loads them. Re-exported by
:mod:`gemm_course.measure.records`.
"""

from __future__ import annotations


def ab_changes(tune: dict, new: str, old: str) -> dict:
    """``{shape: [old median / new median - 1, ...]}``, one value per repetition of the shape in
    the run: how much faster variant ``new`` ran than ``old`` (positive: ``new`` is faster). Only
    shapes where both ran; variant names as the run wrote them."""
    out: dict = {}
    for shape in dict.fromkeys(r["shape"] for r in tune["rows"]):
        times = {v: [r["median_ms"] for r in tune["rows"] if r["shape"] == shape and r["variant"] == v] for v in (new, old)}
        pairs = list(zip(times[new], times[old]))
        if pairs:
            out[shape] = [o / n - 1.0 for n, o in pairs]
    return out


def variant_config(step, variant: str):
    """The config a tuning run's variant name (``STEP[:FIELD=VALUE,...]``, as ``scripts/gpu_tune.py``
    takes it) stands for, or None for a name of another step, a kernel copy, cuBLAS, or a field the
    step's Config lacks."""
    key, _, fields = variant.partition(":")
    if key != step.key:
        return None
    try:
        return step.parse_config([f for f in fields.split(",") if f])
    except ValueError:
        return None


def row_config(step, row: dict):
    """The config a tuning run's row timed: the one the row records (``config``; there a plain
    ``STEP`` is the step's choice for the shape), else what its variant name stands for (the
    default Config with the named fields changed); None where the step's Config lacks a field."""
    if row.get("config") and row["variant"].partition(":")[0] == step.key:
        try:
            return step.config(**{k: tuple(v) if isinstance(v, list) else v for k, v in row["config"].items()})
        except TypeError:  # a recorded field the step's Config lacks
            return None
    return variant_config(step, row["variant"])


def rule_ab(tune: dict, choose, step=None) -> list:
    """Per shape of a tuning run: ``(shape, chosen config, its ratio to cuBLAS, the default's ratio,
    best ratio of any variant)``, where ``choose(m, n, k)`` is a per-shape rule's config (e.g. step
    11's ``config_for``); shapes whose chosen config the run did not time are left out."""
    from ..runtime import ladder

    step = step or ladder.final("sm90")
    out = []
    for shape in dict.fromkeys(r["shape"] for r in tune["rows"]):
        rows = [r for r in tune["rows"] if r["shape"] == shape]
        by_config = {}
        for r in rows:
            config = row_config(step, r)
            if config is not None:
                by_config.setdefault(config, r["ratio_to_cublas"])
        chosen = choose(*map(int, shape.split("x")))
        if chosen in by_config and step.default in by_config:
            out.append((shape, chosen, by_config[chosen], by_config[step.default], max(by_config.values())))
    return out
