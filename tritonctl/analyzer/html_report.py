"""The self-contained HTML report of `tritonctl analyze`.

One file that opens offline: plotly.js is inlined once in the page head, each figure travels as a
JSON data island (`<script type="application/json" data-plot=...>`) that a few lines of script
hand to Plotly, and the page itself comes from a Jinja2 template with autoescaping (config ids and
the config text are user data). The numbers come from report_data, the figures from report_plots.
"""

from __future__ import annotations

import math
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from tritonctl.analyzer import report_data, report_plots
from tritonctl.analyzer import report_format as fmt
from tritonctl.analyzer.report_data import knob_summary, load_level, load_words as _load
from tritonctl.optional import require

if TYPE_CHECKING:
    import pandas

TEMPLATE = "templates/analyze/report.html.j2"
REPEAT_STAGES = ("recheck", "final")


def write_html_report(path: Path, measurements: "pandas.DataFrame", meta: dict) -> Path:
    """Write the report for one analyze run to `path` (atomically: a reader never sees half a file).

    `measurements` has one row per measured point (see report_data.REQUIRED_COLUMNS); `meta`
    describes the run (model, strategy, objective, constraints, best/default config ids, the best
    config.pbtxt, decisions, engine, times, candidate counts; "interrupted": True after Ctrl-C).
    An empty table is fine (a run stopped before its first measurement)."""
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict describing the run, not {type(meta).__name__}")
    html = render_html_report(measurements, meta)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # created with the usual permissions
    try:
        temporary.write_text(html, encoding="utf-8")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def render_html_report(measurements: "pandas.DataFrame", meta: dict) -> str:
    """The report as one HTML string."""
    jinja2 = require("jinja2", "the HTML report")
    get_plotlyjs = require("plotly.offline", "the HTML report").get_plotlyjs

    frame = report_data.prepare(measurements)
    # Re-measurements (tie-breaks, the final round) repeat sweep points; the plots and the configs
    # table show the sweeps, the final round has its own table.
    frame = frame[~frame["stage"].isin(REPEAT_STAGES)].reset_index(drop=True)
    limits = report_data.constraint_limits(meta.get("constraints") or {})
    bests = report_data.config_bests(frame, limits)
    best_id, default_id = meta.get("best_config_id"), _default_config_id(frame, meta)
    if best_id is not None and best_id not in set(bests["config_id"]):
        raise ValueError(f"meta names best_config_id {best_id!r}, but the measurements have no row for it; "
                         f"pass the measurements of the same run")
    chosen, default = _row(bests, best_id), _row(bests, default_id)
    figures = _figures(frame, bests, chosen, default, limits, meta)
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(resources.files("tritonctl").joinpath(TEMPLATE).read_text(encoding="utf-8"))
    return template.render(
        model=meta.get("model", "?"), interrupted=bool(meta.get("interrupted")),
        verdict=_verdict(frame, bests, chosen, default, meta), facts=_facts(frame, meta),
        pbtxt=meta.get("best_config_pbtxt") or "", decisions=list(meta.get("decisions") or []),
        chosen=chosen is not None,
        figures=figures, table=_table(bests, best_id, default_id),
        plotly_js=get_plotlyjs() if figures else "", version=meta.get("tritonctl_version", ""),
        measured_points=len(frame), period=fmt.period(meta), final=_final_round(meta.get("final_round")),
        unexplored=", ".join(meta.get("unexplored_knobs") or ()), why=_why(meta.get("why")),
        pipeline=_pipeline(meta.get("pipeline")),
    )


def _final_round(final: dict | None) -> dict | None:
    """The final round's table: each finalist's medians over the head-to-head rounds, and the verdict."""
    if not final or not final.get("finalists"):
        return None
    rows = []
    for entry in final["finalists"]:
        measured = entry.get("throughput") is not None
        rows.append(dict(
            config_id=entry["config_id"], chosen=entry["config_id"] == final.get("chosen"),
            concurrency=(f"{entry['request_rate']:.4g}/s" if entry.get("request_rate") else
                         entry.get("concurrency") if entry.get("concurrency") is not None else ""),
            throughput=fmt.throughput(entry["throughput"]) if measured else "-",
            p99=fmt.ms(entry["p99_ms"]) if measured else "-",
            band=f"±{100 * entry.get('spread', 0.0):.1f}%",
            rounds=", ".join(fmt.throughput(t) for t in entry.get("throughputs") or ())))
    rounds = final.get("rounds") or 0
    caption = (f"The best {len(rows)} configs measured again head to head, interleaved, {rounds} rounds on the same "
               "server; the choice is made from these numbers alone. The band is how far repeats of a "
               "config spread; a margin counts only beyond both bands." if rounds else
               "Only one measured config met the constraints, so there was nothing to measure it against.")
    return dict(rows=rows, caption=caption, verdict=f"Chosen: {final.get('chosen')}, {final.get('verdict', '')}.")


def _pipeline(pipeline: dict | None) -> dict | None:
    """A pipeline run: per step, its chosen and default config and its share of the latency at each."""
    if not pipeline:
        return None
    shares = pipeline.get("latency_share") or {}
    chosen_ids, default_ids = pipeline.get("chosen") or {}, pipeline.get("default") or {}

    def share(which: str, step: str) -> str:
        entry = (shares.get(which) or {}).get(step)
        if not entry or entry.get("share") is None:
            return "-"
        batch = f", batch {entry['avg_batch_size']:.1f}" if entry.get("avg_batch_size") is not None else ""
        return (f"{100 * entry['share']:.0f}% (queue {fmt.ms(entry['queue_us'] / 1e3)} ms, compute "
                f"{fmt.ms(entry['compute_us'] / 1e3)} ms{batch})")

    rows = [dict(step=step, chosen=chosen_ids.get(step, "-"), chosen_share=share("chosen", step),
                 default=default_ids.get(step, "-"), default_share=share("default", step))
            for step in pipeline.get("steps") or ()]
    whole = {which: (shares.get(which) or {}).get("pipeline_us") for which in ("chosen", "default")}
    return dict(kind="ensemble" if pipeline.get("kind") == "ensemble" else "Python model calling through BLS",
                model=pipeline.get("model", "?"), rows=rows,
                whole=", ".join(f"{which} {fmt.ms(us / 1e3)} ms" for which, us in whole.items() if us))


def _why(why: dict | None) -> dict | None:
    """Why the chosen config won: per knob, what moving it away from the winner's value measured; and
    the trade-off against the runner-up."""
    if not why:
        return None
    rows = []
    for knob in why.get("knobs") or ():
        rows.append(dict(label=knob["label"], value=str(knob["winner_value"]), status=knob["status"],
                         summary=knob["summary"]))
    runner_up = (why.get("runner_up") or {}).get("summary", "")
    return dict(rows=rows, runner_up=runner_up) if rows or runner_up else None


def _figures(frame, bests, chosen, default, limits, meta) -> list[dict]:
    """The figures in reading order, each as {id, title, caption, json}; none for an empty run."""
    plotted = frame.dropna(subset=["throughput", "p99_ms"])
    if plotted.empty:
        return []
    marks = report_plots.Highlights(
        _value(chosen, "config_id"), _value(default, "config_id"),
        limits.get("max_p99_ms"), limits.get("min_throughput"))
    objective = str(meta.get("objective") or "objective")
    figures = [
        ("plot-throughput-latency", "Throughput vs p99 latency, per config",
         "Each line is one config over its concurrency sweep (hover a point for its knobs). Up and to the "
         "left is better; hollow markers miss a constraint. Red: the chosen config; dashed black: the default.",
         report_plots.throughput_vs_latency(plotted, marks)),
        ("plot-pareto", "Pareto front",
         "The best throughput measured at each p99 latency, whatever the config. Points below the front "
         "are beaten on both counts by a point on it. The star is the chosen point.",
         report_plots.pareto(plotted, report_data.pareto_front(plotted), chosen, default, marks)),
    ]
    effects = report_data.knob_effects(bests)
    if effects:
        among = ("among configs meeting the constraints" if bests["meets_constraints"].any()
                 else "among all configs, since none meets the constraints")
        figures.append((
            "plot-knobs", "Effect of each knob",
            f"Bars: the best objective ({objective}) reached with each value of a knob (other knobs free), {among}. "
            "Dots: every config's best point (green meets the constraints, grey misses one). The knob "
            "that moves the best the most is on the left.",
            report_plots.knob_effect_panels(bests, effects, marks)))
    if len(effects) >= 2 and frame["meets_constraints"].any():
        first, second = effects[0].column, effects[1].column
        figures.append((
            "plot-heatmap", f"Best throughput by {dict(report_data.KNOBS)[first].lower()} and "
                            f"{dict(report_data.KNOBS)[second].lower()}",
            "The highest throughput meeting the constraints for each pair of values of the two knobs that "
            "mattered most; blank cells: no config with that pair met them (or none was measured).",
            report_plots.throughput_heatmap(frame, first, second)))
    return [dict(id=i, title=t, caption=c, json=f.to_json().replace("</", "<\\/")) for i, t, c, f in figures]


def _verdict(frame, bests, chosen, default, meta) -> dict:
    """The headline: what to deploy and what it gains, or why there is nothing to deploy."""
    constraints = _constraints_text(meta.get("constraints") or {})
    if bests.empty:
        return dict(kind="empty", subtitle="", title="Nothing was measured",
                    lines=["The run stopped before its first measurement finished."])
    if chosen is None:
        top = bests.iloc[0]
        if not bests["meets_constraints"].any():
            fastest = frame.loc[frame["p99_ms"].idxmin()] if frame["p99_ms"].notna().any() else top
            busiest = frame.loc[frame["throughput"].idxmax()] if frame["throughput"].notna().any() else top
            return dict(kind="fail", subtitle="", title="No measured config meets the constraints", lines=[
                f"Constraints: {constraints}.",
                f"Lowest p99 measured: {_point_words(fastest)}.",
                f"Highest throughput measured: {_point_words(busiest)}.",
                "Loosen a constraint or widen the search space (more instances, other batch sizes), then run again."])
        return dict(kind="fail", subtitle="", title="No best config was chosen", lines=[
            f"The highest-ranked measured config is {top['config_id']} ({knob_summary(top)}): "
            f"{fmt.throughput(top['throughput'])} infer/s at p99 {fmt.ms(top['p99_ms'])} ms."])
    lines = [f"{fmt.throughput(chosen['throughput'])} infer/s at p99 {fmt.ms(chosen['p99_ms'])} ms "
             f"({_load(chosen)})."]
    if default is None:
        lines.append("The default config was not measured, so there is no comparison with it.")
    elif default["config_id"] == chosen["config_id"]:
        lines.append("The model's default config is already the best measured one.")
    else:
        gain = fmt.ratio(chosen["throughput"], default["throughput"])
        change = fmt.ratio(chosen["p99_ms"], default["p99_ms"])
        lines.append(
            (f"{gain:.2f}x the default config's throughput" if math.isfinite(gain) else
             "The default config's throughput")
            + f" ({fmt.throughput(default['throughput'])} infer/s at {_load(default)});"
            " "
            f"p99 {fmt.ms(chosen['p99_ms'])} ms vs {fmt.ms(default['p99_ms'])} ms"
            + (f" ({(change - 1) * 100:+.0f}%)." if math.isfinite(change) else "."))
        if not default["meets_constraints"]:
            lines.append("The default config meets the constraints at none of the concurrencies measured.")
    final = meta.get("final_round") or {}
    if final.get("verdict"):
        lines.append(f"Margin: {final['verdict']}.")
    return dict(kind="ok", title=f"Best config: {chosen['config_id']}", subtitle=knob_summary(chosen), lines=lines)


def _point_words(row) -> str:
    """A measured point in words, for the verdict."""
    return (f"{row['config_id']} ({knob_summary(row)}), {fmt.throughput(row['throughput'])} infer/s at "
            f"p99 {fmt.ms(row['p99_ms'])} ms ({_load(row)})")



def _facts(frame, meta) -> list[tuple[str, str]]:
    """The run at a glance, as (label, value) pairs."""
    total, measured = meta.get("candidates_total"), meta.get("candidates_measured")
    candidates = f"{measured} of {total}" if measured is not None and total else str(measured or "?")
    if measured is not None and total:
        candidates += f" ({100 * measured / total:.0f}%)"
    return [
        ("Objective", str(meta.get("objective") or "?")),
        ("Constraints", _constraints_text(meta.get("constraints") or {})),
        ("Strategy", str(meta.get("strategy") or "?")),
        ("Candidates measured", candidates),
        ("Engine", str(meta.get("engine") or "?")),
        ("Wall time", f"{fmt.duration(meta.get('wall_s'))}, {len(frame)} "
                      + ("measurement" if len(frame) == 1 else "measurements")),
    ]


# The configs table: (header, how a cell shows, how it sorts) per column. Knob columns whose value
# is the same for every config are left out of the table and said once above it instead.
_COLUMNS = (
    ("Config", lambda r: r["config_id"], lambda r: r["config_id"]),
    ("Instances", lambda r: fmt.integer(r["instance_count"]), lambda r: fmt.sortable(r["instance_count"])),
    ("Kind", lambda r: _kind(r["instance_kind"]), lambda r: _kind(r["instance_kind"])),
    ("Max batch", lambda r: fmt.integer(r["max_batch_size"]), lambda r: fmt.sortable(r["max_batch_size"])),
    ("Preferred", lambda r: "none" if r["preferred_batch_size"] == 0 else fmt.integer(r["preferred_batch_size"]),
     lambda r: fmt.sortable(r["preferred_batch_size"])),
    ("Delay (µs)", lambda r: fmt.integer(r["max_queue_delay_us"], thousands=True),
     lambda r: fmt.sortable(r["max_queue_delay_us"])),
    ("Load", lambda r: _load(r).removeprefix("concurrency "),
     lambda r: fmt.sortable(load_level(r))),
    ("Infer/s", lambda r: fmt.throughput(r["throughput"]), lambda r: fmt.sortable(r["throughput"])),
    ("p99 (ms)", lambda r: fmt.ms(r["p99_ms"]), lambda r: fmt.sortable(r["p99_ms"])),
    ("Avg batch", lambda r: fmt.number(r["avg_batch_size"], ".1f"), lambda r: fmt.sortable(r["avg_batch_size"])),
    ("Meets", lambda r: "failed" if r["error"] else "yes" if r["meets_constraints"] else "no",
     lambda r: int(bool(r["meets_constraints"]))),
    ("Objective", lambda r: fmt.number(r["objective"], ".4g"), lambda r: fmt.sortable(r["objective"])),
    ("Stage", lambda r: str(r["stage"]) if report_data.known(r["stage"]) else "", lambda r: str(r["stage"])),
    ("Points", lambda r: str(r["points"]), lambda r: int(r["points"])),
)
_CONSTANT_KNOBS = {"Kind": "instance_kind", "Preferred": "preferred_batch_size"}


def _table(bests, best_id, default_id) -> dict:
    """The configs table: headers, one row per config (its best point) with a sort key per cell,
    and a note naming the knobs that every config shares."""
    shared = {header: bests[column].iloc[0] for header, column in _CONSTANT_KNOBS.items()
              if len(bests) > 1 and bests[column].nunique(dropna=False) == 1}
    columns = [column for column in _COLUMNS if column[0] not in shared]
    rows = []
    for _, row in bests.iterrows():
        is_best, is_default = row["config_id"] == best_id, row["config_id"] == default_id
        classes = [name for name, on in (("best", is_best), ("default", is_default),
                                         ("fails", not row["meets_constraints"])) if on]
        rows.append(dict(cells=[(show(row), key(row), header) for header, show, key in columns],
                         classes=" ".join(classes), best=is_best, default=is_default, error=row["error"]))
    notes = [f"instance kind {_kind(value)}" if header == "Kind" else
             ("no preferred batch size" if value == 0 else f"preferred batch size {fmt.integer(value)}")
             for header, value in shared.items()]
    return dict(headers=[column[0] for column in columns], rows=rows,
                note=f"Every config has {' and '.join(notes)}." if notes else "")


def _kind(value) -> str:
    return str(value).removeprefix("KIND_") if report_data.known(value) else "?"


def _default_config_id(frame, meta) -> str | None:
    if meta.get("default_config_id"):
        return str(meta["default_config_id"])
    flagged = frame.loc[frame["is_default"], "config_id"]
    return str(flagged.iloc[0]) if len(flagged) else None


def _constraints_text(constraints: dict) -> str:
    words = []
    for name, value in constraints.items():
        if value is None:
            continue
        key = str(name).lstrip("-").replace("-", "_").lower()
        if key == "min_throughput":
            words.append(f"throughput ≥ {value:g} infer/s")
        elif key == "max_reject_rate":
            words.append(f"rejected ≤ {100 * float(value):g}%")
        elif key.startswith("max_") and key.endswith("_ms"):
            words.append(f"{key[4:-3]} latency ≤ {value:g} ms")
        else:
            words.append(f"{name} = {value}")
    return ", ".join(words) or "none"


def _row(bests, config_id):
    if config_id is None:
        return None
    match = bests[bests["config_id"] == config_id]
    return match.iloc[0] if len(match) else None


def _value(row, column):
    return None if row is None else row[column]
