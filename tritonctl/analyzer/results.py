"""Measurements as a pandas DataFrame (CSV and Parquet) and the terminal summary table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective
from tritonctl.analyzer.point import Point
from tritonctl.optional import unavailable

if TYPE_CHECKING:
    import pandas

# The columns the HTML report and other readers rely on, in this order; extra columns follow.
COLUMNS = (
    "config_id", "max_batch_size", "preferred_batch_size", "max_queue_delay_us", "instance_count", "instance_kind",
    "concurrency", "throughput", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "avg_ms", "avg_batch_size", "queue_us",
    "compute_us", "meets_constraints", "objective", "is_default", "stage",
)
EXTRA_COLUMNS = ("dynamic_batching", "stable", "request_count", "error_count", "measured_s", "config_hash", "repeat",
                 "throughput_spread", "p99_spread", "max_queue_size", "queue_timeout_us", "reject_rate", "load",
                 "request_rate", "hardware")


def points_frame(points: list[Point], objective: Objective, constraints: Constraints) -> "pandas.DataFrame":
    """One row per measured point (failed measurements are left out)."""
    import pandas as pd

    rows = []
    for p in points:
        if not p.ok:
            continue
        knobs = p.knobs
        rows.append({
            "config_id": p.config_id, "max_batch_size": knobs.max_batch_size,
            "preferred_batch_size": knobs.preferred_batch_size, "max_queue_delay_us": knobs.max_queue_delay_us,
            "instance_count": knobs.instance_count, "instance_kind": knobs.instance_kind,
            "concurrency": p.concurrency, "throughput": p.throughput, "p50_ms": p.p50_ms, "p90_ms": p.p90_ms,
            "p95_ms": p.p95_ms, "p99_ms": p.p99_ms, "avg_ms": p.avg_ms, "avg_batch_size": p.avg_batch_size,
            "queue_us": p.queue_us, "compute_us": p.compute_us, "meets_constraints": constraints.meets(p),
            "objective": objective.value(p), "is_default": p.is_default, "stage": p.stage,
            "dynamic_batching": knobs.dynamic_batching, "stable": p.stable, "request_count": p.request_count,
            "error_count": p.error_count, "measured_s": p.measured_s, "config_hash": p.config_hash,
            "repeat": p.repeat, "throughput_spread": p.throughput_spread, "p99_spread": p.p99_spread,
            "max_queue_size": knobs.max_queue_size, "queue_timeout_us": knobs.queue_timeout_us,
            "reject_rate": p.reject_rate, "load": p.load, "request_rate": p.request_rate, "hardware": p.hardware,
        })
    frame = pd.DataFrame(rows, columns=[*COLUMNS, *EXTRA_COLUMNS])
    types = {"max_batch_size": "int64", "preferred_batch_size": "int64", "max_queue_delay_us": "int64",
             "instance_count": "int64", "concurrency": "int64", "meets_constraints": "bool", "is_default": "bool",
             "dynamic_batching": "bool", "stable": "bool", "request_count": "int64", "error_count": "int64",
             "repeat": "int64", "throughput_spread": "float64", "p99_spread": "float64", "max_queue_size": "int64",
             "queue_timeout_us": "int64", "reject_rate": "float64", "request_rate": "float64"}
    floats = [c for c in COLUMNS if c.endswith(("_ms", "_us", "_size")) and c not in types] + ["throughput",
                                                                                               "objective"]
    return frame.astype({**types, **{c: "float64" for c in floats}, "measured_s": "float64"})


def write_tables(frame: "pandas.DataFrame", output_dir: Path, notes: list[str]) -> list[Path]:
    """``measurements.csv``, and ``measurements.parquet`` where pyarrow imports. A pyarrow built for
    NumPy 2 does not import beside NumPy 1.x, and pip cannot tell (pyarrow does not name numpy):
    the run then keeps its CSV, and ``notes`` says why the Parquet file is missing."""
    csv_path, parquet_path = output_dir / "measurements.csv", output_dir / "measurements.parquet"
    frame.to_csv(csv_path, index=False)
    missing = unavailable("pyarrow")
    if missing:
        parquet_path.unlink(missing_ok=True)  # an earlier run's must not pass for this run's
        notes.append(f"measurements.parquet not written: {missing}; measurements.csv holds the same table")
        return [csv_path]
    frame.to_parquet(parquet_path, index=False)
    return [csv_path, parquet_path]


def summary_table(results: list[ConfigResult], objective: Objective, constraints: Constraints,
                  best_id: str | None, limit: int = 12):
    """A rich Table of the best configs (and the default), best first."""
    from rich.table import Table

    def rank(result: ConfigResult):
        return result.score(objective, constraints)

    ordered = sorted(results, key=rank, reverse=True)
    shown = ordered[:limit]
    shown += [r for r in ordered[limit:] if r.is_default]
    table = Table(title=f"Best configs ({objective.describe()}; constraints: {constraints.describe()})",
                  padding=(0, 1), collapse_padding=True)
    for title, justify in (("Config", "left"), ("Stage", "left"), ("Load", "right"), ("Infer/s", "right"),
                           ("p50 ms", "right"), ("p99 ms", "right"), ("Batch", "right"), ("Points", "right"),
                           ("Meets", "left")):
        table.add_column(title, justify=justify, no_wrap=True)
    for result in shown:
        point = result.best or _closest(result, constraints)
        name = result.config_id + (" (default)" if result.is_default and result.config_id != "default" else "")
        if result.config_id == best_id:
            name = f"[bold green]{name} *[/bold green]"
        stage = result.points[0].stage if result.points else ""
        if point is None:
            table.add_row(name, stage, "-", "-", "-", "-", "-", str(len(result.points)), f"[red]{result.failed}[/red]")
            continue
        batch = f"{point.avg_batch_size:.1f}" if point.avg_batch_size == point.avg_batch_size else "-"
        load = str(point.concurrency) if point.load == "concurrency" else f"{point.request_rate:.4g}/s"
        table.add_row(name, stage, load, f"{point.throughput:,.1f}", f"{point.p50_ms:.2f}",
                      f"{point.p99_ms:.2f}", batch, str(len(result.points)),
                      "yes" if result.best is not None else "[yellow]no[/yellow]")
    return table


def _closest(result: ConfigResult, constraints: Constraints) -> Point | None:
    ok = [p for p in result.points if p.ok]
    return min(ok, key=constraints.violation) if ok else None
