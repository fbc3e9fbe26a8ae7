"""What the analyze report shows, computed from the measurements table.

Kept apart from the plotting and the HTML so that each number the report prints (the best point
of a config, the Pareto front, how much each knob mattered) is defined once and tested directly.
Every function takes the measurements DataFrame of `tritonctl analyze` (one row per candidate
config x concurrency) and returns plain pandas objects or small dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tritonctl.analyzer.objective import NOISE, Constraints

if TYPE_CHECKING:
    import pandas

REQUIRED_COLUMNS = ("config_id", "concurrency", "throughput", "p99_ms", "meets_constraints", "objective")
# Columns the report uses when present; a missing one reads as unknown (NaN).
OPTIONAL_COLUMNS = (
    "max_batch_size", "preferred_batch_size", "max_queue_delay_us", "instance_count", "instance_kind",
    "p50_ms", "p90_ms", "p95_ms", "avg_ms", "avg_batch_size", "queue_us", "compute_us", "is_default", "stage",
    "dynamic_batching", "error", "max_queue_size", "queue_timeout_us", "reject_rate", "load", "request_rate",
)
# The knobs of a candidate config, in the order a person thinks about them, with display names.
KNOBS = (
    ("instance_count", "Instances"),
    ("max_batch_size", "Max batch"),
    ("preferred_batch_size", "Preferred batch"),
    ("max_queue_delay_us", "Queue delay (µs)"),
    ("instance_kind", "Instance kind"),
    ("max_queue_size", "Max queue size"),
    ("queue_timeout_us", "Queue timeout (µs)"),
)


def prepare(measurements: "pandas.DataFrame") -> "pandas.DataFrame":
    """A copy with every column the report reads, in the types it expects.

    Raises ValueError naming the missing columns when the table is not a measurements table."""
    import pandas as pd

    if not isinstance(measurements, pd.DataFrame):
        raise TypeError(f"measurements must be a pandas DataFrame, not {type(measurements).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in measurements.columns]
    if missing:
        raise ValueError(
            f"measurements lack the column(s) {', '.join(missing)}; the report needs one row per measured "
            f"point with at least {', '.join(REQUIRED_COLUMNS)} (as written by tritonctl analyze)")
    frame = measurements.copy()
    for column in OPTIONAL_COLUMNS:
        if column not in frame.columns:
            frame[column] = math.nan
    frame["config_id"] = frame["config_id"].astype(str)
    for column in ("throughput", "p99_ms", "objective", "p50_ms", "p90_ms", "p95_ms", "avg_ms",
                   "avg_batch_size", "queue_us", "compute_us", "concurrency", "reject_rate", "request_rate"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    for column in ("meets_constraints", "is_default"):  # unknown reads as False
        frame[column] = [bool(value) if known(value) else False for value in frame[column]]
    # A point that could not be measured (the config failed to load, every request failed) says why.
    frame["error"] = [str(value) if known(value) else "" for value in frame["error"]]
    return frame.reset_index(drop=True)


def config_bests(frame: "pandas.DataFrame", constraints: dict | None = None) -> "pandas.DataFrame":
    """One row per config: its best measured point, with `points` (how many concurrencies were measured).

    The same rule analyze uses (objective.best_point): among the points meeting the constraints,
    those within noise of the best objective, and of these the lowest p99. A config with no such
    point shows the point closest to meeting `constraints` (names as in Constraints.as_dict), with
    meets_constraints False. Rows come best first: passing configs by objective, then the others
    by how close they came."""
    from types import SimpleNamespace

    if frame.empty:
        return frame.assign(points=[])
    limits = Constraints(**{k: v for k, v in (constraints or {}).items()
                            if k in ("max_p99_ms", "min_throughput", "max_reject_rate")})

    def violation(row) -> float:
        measured = bool(row["throughput"] > 0 and row["p99_ms"] > 0)  # NaN compares False: not measured
        rejected = _number_or(row["reject_rate"], 0.0)
        return limits.violation(SimpleNamespace(ok=measured, p99_ms=row["p99_ms"], throughput=row["throughput"],
                                                reject_rate=rejected))

    picks, ranks = [], {}
    for config_id, rows in frame.groupby("config_id", sort=False):
        passing = rows[rows["meets_constraints"] & rows["objective"].notna()]
        if len(passing):
            top = passing["objective"].max()
            near = passing[passing["objective"] >= top * (1.0 - NOISE)]
            pick = near.sort_values(["p99_ms", "concurrency"], kind="mergesort").index[0]
            ranks[pick] = (0, -rows.at[pick, "objective"], rows.at[pick, "p99_ms"])
        else:
            misses = rows.apply(violation, axis=1)
            pick = misses.sort_values(kind="mergesort").index[0]
            ranks[pick] = (1, misses[pick], -_number_or(rows.at[pick, "objective"], -math.inf))
        picks.append(pick)
    counts = frame.groupby("config_id")["concurrency"].nunique()
    bests = frame.loc[sorted(picks, key=ranks.__getitem__)]
    return bests.assign(points=bests["config_id"].map(counts).astype(int)).reset_index(drop=True)


def _number_or(value, fallback: float) -> float:
    return fallback if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def constraint_limits(constraints: dict) -> dict[str, float]:
    """Constraint names normalized (`--max-p99-ms` and `max_p99_ms` alike) with numeric values."""
    values = {}
    for name, value in constraints.items():
        if value is None:
            continue
        key = str(name).lstrip("-").replace("-", "_").lower()
        try:
            values[key] = float(value)
        except (TypeError, ValueError):
            continue
    return values


def pareto_front(frame: "pandas.DataFrame") -> "pandas.DataFrame":
    """The measured points that no other point beats on both throughput (higher) and p99 (lower),
    ordered by p99: the best throughput reachable at each latency, whatever the config."""
    points = frame.dropna(subset=["throughput", "p99_ms"]).sort_values(
        ["p99_ms", "throughput"], ascending=[True, False], kind="mergesort")
    keep, best_so_far = [], -math.inf
    for index, throughput in points["throughput"].items():
        if throughput > best_so_far:
            keep.append(index)
            best_so_far = throughput
    return points.loc[keep].reset_index(drop=True)


@dataclass
class KnobEffect:
    """How far the best objective moves across the values of one knob (the other knobs free)."""

    column: str
    label: str
    values: list            # the knob's values, in order
    best: list[float]       # best objective per value among configs meeting the constraints (NaN: none)
    spread_pct: float       # (max - min of `best`) as a percentage of the overall best's magnitude


def knob_effects(bests: "pandas.DataFrame") -> list[KnobEffect]:
    """One KnobEffect per knob that took at least two values, the knob that mattered most first.

    Only configs meeting the constraints count, unless none does (then all do), so a knob is judged
    by what it can give under the constraints."""
    pool = bests[bests["meets_constraints"]] if bests["meets_constraints"].any() else bests
    overall = pool["objective"].max()
    effects = []
    for column, label in KNOBS:
        values = sorted(bests[column].dropna().unique(), key=_sort_key)
        if len(values) < 2:
            continue
        per_value = pool.groupby(column)["objective"].max()
        best = [float(per_value.get(value, math.nan)) for value in values]
        finite = [b for b in best if not math.isnan(b)]
        spread = (max(finite) - min(finite)) if len(finite) > 1 else 0.0
        scale = abs(overall) if overall and not math.isnan(overall) else 1.0
        effects.append(KnobEffect(column, label, [_plain(v) for v in values], best, 100.0 * spread / scale))
    effects.sort(key=lambda effect: -effect.spread_pct)
    return effects


def best_throughput_grid(frame: "pandas.DataFrame", row_knob: str, column_knob: str) -> "pandas.DataFrame":
    """Best throughput among the points meeting the constraints, for each pair of two knobs' values
    (NaN where no config with that pair met them)."""
    meeting = frame[frame["meets_constraints"]]
    grid = meeting.pivot_table(index=row_knob, columns=column_knob, values="throughput", aggfunc="max")
    rows = sorted(frame[row_knob].dropna().unique(), key=_sort_key)
    columns = sorted(frame[column_knob].dropna().unique(), key=_sort_key)
    return grid.reindex(index=rows, columns=columns)


def knob_summary(row) -> str:
    """A config's knobs in words, e.g. "max batch 8, preferred 4, delay 500 µs, 2 x CPU"."""
    parts = []
    if known(row.get("max_batch_size")):
        parts.append(f"max batch {int(row['max_batch_size'])}")
    if known(row.get("preferred_batch_size")):
        preferred = int(row["preferred_batch_size"])
        parts.append(f"preferred {preferred}" if preferred else "no preferred")
    if row.get("dynamic_batching") is False or row.get("dynamic_batching") == 0:
        parts.append("no dynamic batcher")
    elif known(row.get("max_queue_delay_us")):
        parts.append(f"delay {int(row['max_queue_delay_us']):,} µs")
    if known(row.get("instance_count")):
        kind = str(row.get("instance_kind") or "").removeprefix("KIND_")
        parts.append(f"{int(row['instance_count'])} x {kind}".strip() if known(kind) else
                     f"{int(row['instance_count'])} instance(s)")
    if known(row.get("max_queue_size")) and int(row["max_queue_size"]):
        parts.append(f"queue at most {int(row['max_queue_size'])}")
    if known(row.get("queue_timeout_us")) and int(row["queue_timeout_us"]):
        parts.append(f"queue timeout {int(row['queue_timeout_us']):,} µs")
    return ", ".join(parts)


def load_words(row) -> str:
    """The load a point was measured at: ``concurrency 4``, ``50 req/s`` or ``the trace, mean 100 req/s``."""
    load = row.get("load")
    if load == "request_rate":
        return f"{row['request_rate']:g} req/s"
    if load == "request_intervals":
        return f"the trace, mean {row['request_rate']:.4g} req/s"
    return f"concurrency {int(row['concurrency'])}"


def load_level(row) -> float:
    """The point's load level: its concurrency, or its (mean) request rate."""
    return row["request_rate"] if row.get("load") in ("request_rate", "request_intervals") else row["concurrency"]


def known(value) -> bool:
    """False for None, NaN and their text forms: a value the measurements do not have."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return str(value) not in ("", "nan", "None", "<NA>")


def _plain(value):
    """numpy scalars as Python ones, so they serialize and compare plainly."""
    return value.item() if hasattr(value, "item") else value


def _sort_key(value):
    """Numbers in numeric order, then anything else (e.g. instance kinds) by name."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))
