"""The plotly figures of the analyze report.

Each function takes the prepared measurements (report_data.prepare) or what report_data derived
from them and returns a plotly Figure; html_report embeds them as JSON. The best config is drawn
in red and the default config in dashed black in every figure, so the eye finds both at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tritonctl.analyzer import report_format as fmt
from tritonctl.analyzer.report_data import (KNOBS, KnobEffect, best_throughput_grid, knob_summary, load_level,
                                             load_words)

if TYPE_CHECKING:
    import pandas
    from plotly.graph_objects import Figure

BEST_COLOR = "#d62728"
DEFAULT_COLOR = "#222222"
FRONT_COLOR = "#1f77b4"
LATENCY_AXIS = "p99 latency (ms)"
THROUGHPUT_AXIS = "throughput (infer/s)"


@dataclass
class Highlights:
    """What every figure marks: the chosen and the default config, and the constraint lines."""

    best_config_id: str | None
    default_config_id: str | None
    max_p99_ms: float | None = None
    min_throughput: float | None = None


def throughput_vs_latency(frame: "pandas.DataFrame", marks: Highlights) -> "Figure":
    """One line per config over its concurrency sweep; hollow markers for points that miss a constraint."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    figure = go.Figure()
    palette = qualitative.Plotly + qualitative.D3
    config_ids = list(dict.fromkeys(frame["config_id"]))
    # The best and default configs are drawn last, on top of the others.
    ordered = sorted(config_ids, key=lambda c: (c == marks.default_config_id, c == marks.best_config_id))
    for number, config_id in enumerate(ordered):
        rows = frame[frame["config_id"] == config_id].dropna(subset=["throughput", "p99_ms"])
        rows = rows.assign(_level=[load_level(row) for _, row in rows.iterrows()]).sort_values("_level")
        if rows.empty:
            continue
        is_best, is_default = config_id == marks.best_config_id, config_id == marks.default_config_id
        name = config_id + (" (best)" if is_best else "") + (" (default)" if is_default else "")
        if is_best:
            line, opacity = dict(color=BEST_COLOR, width=4), 1.0
        elif is_default:
            line, opacity = dict(color=DEFAULT_COLOR, width=3, dash="dash"), 1.0
        else:
            line, opacity = dict(color=palette[number % len(palette)], width=1.5), 0.6
        figure.add_trace(go.Scatter(
            x=rows["p99_ms"], y=rows["throughput"], name=name,
            mode="lines+markers+text" if is_best else "lines+markers",
            line=line, opacity=opacity, legendrank=1 if (is_best or is_default) else 1000,
            marker=dict(size=9 if is_best else 7,
                        symbol=["circle" if ok else "circle-open" for ok in rows["meets_constraints"]]),
            text=[_level_label(row) for _, row in rows.iterrows()] if is_best else None, textposition="top left",
            customdata=_point_details(rows), hovertemplate=_POINT_HOVER,
        ))
    _constraint_lines(figure, frame, marks)
    if _wide(frame["p99_ms"]):
        figure.update_xaxes(type="log")
    figure.update_layout(
        xaxis_title=LATENCY_AXIS, yaxis_title=THROUGHPUT_AXIS, legend_title_text="config",
        height=540, **_COMMON_LAYOUT)
    return figure


def pareto(frame: "pandas.DataFrame", front: "pandas.DataFrame", chosen, default, marks: Highlights) -> "Figure":
    """Every measured point in grey, the front (best throughput for a given p99) as a step line,
    the chosen point as a red star and the default config's best point as a black diamond."""
    import plotly.graph_objects as go

    points = frame.dropna(subset=["throughput", "p99_ms"])
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=points["p99_ms"], y=points["throughput"], mode="markers", name="measured points",
        marker=dict(color="rgba(120,120,120,0.45)", size=7), customdata=_point_details(points),
        hovertemplate=_POINT_HOVER))
    figure.add_trace(go.Scatter(
        x=front["p99_ms"], y=front["throughput"], mode="lines+markers", name="Pareto front",
        line=dict(color=FRONT_COLOR, width=3, shape="hv"), marker=dict(size=9),
        customdata=_point_details(front), hovertemplate=_POINT_HOVER))
    same = chosen is not None and default is not None and chosen["config_id"] == default["config_id"]
    for row, name, color, symbol in ((None if same else default, "default", DEFAULT_COLOR, "diamond"),
                                     (chosen, "chosen (the default)" if same else "chosen", BEST_COLOR, "star")):
        if row is None:
            continue
        figure.add_trace(go.Scatter(
            x=[row["p99_ms"]], y=[row["throughput"]], mode="markers", name=f"{name}: {row['config_id']}",
            marker=dict(color=color, size=20 if symbol == "star" else 14, symbol=symbol,
                        line=dict(color="white", width=1)),
            customdata=_point_details(row.to_frame().T), hovertemplate=_POINT_HOVER))
    _constraint_lines(figure, points, marks)
    if _wide(points["p99_ms"]):
        figure.update_xaxes(type="log")
    figure.update_layout(xaxis_title=LATENCY_AXIS, yaxis_title=THROUGHPUT_AXIS, height=480, **_COMMON_LAYOUT)
    return figure


def knob_effect_panels(bests: "pandas.DataFrame", effects: list[KnobEffect], marks: Highlights) -> "Figure":
    """Per knob (the one that mattered most on the left): a bar of the best objective per value and
    every config's best point as a dot, so both the ceiling and the spread show."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=1, cols=len(effects), shared_yaxes=True, horizontal_spacing=0.04,
        subplot_titles=[f"{e.label}<br><sup>moves the best by {e.spread_pct:.0f}%</sup>" for e in effects])
    for column_number, effect in enumerate(effects, start=1):
        labels = [_value_label(effect.column, v) for v in effect.values]
        figure.add_trace(go.Bar(
            x=labels, y=effect.best, name=f"best per value ({effect.label})", showlegend=False,
            marker_color="rgba(31,119,180,0.35)", marker_line=dict(color=FRONT_COLOR, width=1.5),
            hovertemplate=f"{effect.label} %{{x}}<br>best objective %{{y:.4g}}<extra></extra>"),
            row=1, col=column_number)
        for group, rows, color in _config_groups(bests, marks):
            figure.add_trace(go.Box(
                x=[_value_label(effect.column, v) for v in rows[effect.column]], y=rows["objective"],
                name=group, legendgroup=group, showlegend=column_number == 1, boxpoints="all", jitter=0.5,
                pointpos=0, fillcolor="rgba(0,0,0,0)", line=dict(color="rgba(0,0,0,0)"),
                marker=dict(color=color, size=11 if color in (BEST_COLOR, DEFAULT_COLOR) else 8),
                text=[f"{c}<br>{knob_summary(r)}" for c, (_, r) in zip(rows["config_id"], rows.iterrows())],
                hovertemplate="%{text}<br>objective %{y:.4g}<extra></extra>"), row=1, col=column_number)
        figure.update_xaxes(type="category", categoryorder="array", categoryarray=labels, row=1, col=column_number)
    figure.update_yaxes(title_text="objective (higher is better)", row=1, col=1)
    figure.update_layout(height=470, bargap=0.35, boxmode="overlay", legend=dict(orientation="h", y=-0.18),
                         **(_COMMON_LAYOUT | dict(margin=dict(l=70, r=30, t=90, b=60))))
    return figure


def throughput_heatmap(frame: "pandas.DataFrame", row_knob: str, column_knob: str) -> "Figure":
    """Best throughput meeting the constraints over the values of two knobs (blank: none met them)."""
    import plotly.graph_objects as go

    grid = best_throughput_grid(frame, row_knob, column_knob)
    labels = dict(KNOBS)
    figure = go.Figure(go.Heatmap(
        z=grid.to_numpy(), x=[_value_label(column_knob, v) for v in grid.columns],
        y=[_value_label(row_knob, v) for v in grid.index], colorscale="Viridis",
        texttemplate="%{z:,.0f}" if grid.max().max() >= 100 else "%{z:.3~g}", hoverongaps=False,
        colorbar=dict(title=dict(text="infer/s")),
        hovertemplate=f"{labels[row_knob]} %{{y}}<br>{labels[column_knob]} %{{x}}<br>"
                      "best throughput %{z:.4~g} infer/s<extra></extra>"))
    figure.update_xaxes(type="category", title_text=labels[column_knob])
    figure.update_yaxes(type="category", title_text=labels[row_knob])
    figure.update_layout(height=120 + 60 * len(grid.index), **_COMMON_LAYOUT)
    return figure


_COMMON_LAYOUT = dict(template="plotly_white", margin=dict(l=70, r=30, t=50, b=60), hovermode="closest",
                      font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=13))

_POINT_HOVER = ("<b>%{customdata[0]}</b><br>%{customdata[1]}<br>%{customdata[2]}<br>"
                "throughput %{y:,.1f} infer/s<br>p99 %{x:.2f} ms<br>%{customdata[3]}<extra></extra>")


def _config_groups(bests: "pandas.DataFrame", marks: Highlights):
    """Configs split by what the dot color says: (legend name, rows, color), empty groups left out."""
    is_best = bests["config_id"] == marks.best_config_id
    is_default = (bests["config_id"] == marks.default_config_id) & ~is_best
    rest = ~is_best & ~is_default
    groups = (("meets the constraints", rest & bests["meets_constraints"], "#2ca02c"),
              ("misses a constraint", rest & ~bests["meets_constraints"], "#9a9a9a"),
              ("default config", is_default, DEFAULT_COLOR), ("best config", is_best, BEST_COLOR))
    return [(name, bests[mask], color) for name, mask, color in groups if mask.any()]


def _point_details(rows: "pandas.DataFrame") -> list[list]:
    """Per point: config id, its knobs in words, concurrency, and the server-side detail line."""
    details = []
    for _, row in rows.iterrows():
        server = []
        if fmt.finite(row.get("avg_batch_size")):
            server.append(f"avg batch {row['avg_batch_size']:.1f}")
        if fmt.finite(row.get("queue_us")):
            server.append(f"queue {row['queue_us'] / 1000:.2f} ms")
        if fmt.finite(row.get("compute_us")):
            server.append(f"compute {row['compute_us'] / 1000:.2f} ms")
        if not row.get("meets_constraints"):
            server.append("misses a constraint")
        details.append([row["config_id"], knob_summary(row), load_words(row), ", ".join(server)])
    return details


def _level_label(row) -> str:
    """A point's label on the best config's line: ``c=4``, or ``50/s`` for a request rate."""
    if row.get("load") in ("request_rate", "request_intervals"):
        return f"{row['request_rate']:.4g}/s"
    return f"c={int(row['concurrency'])}"


def _constraint_lines(figure: "Figure", points: "pandas.DataFrame", marks: Highlights) -> None:
    """Dotted red lines at the constraints. A limit far outside the measured range would squeeze the
    data into a corner, so it becomes a note instead ("max p99 50 ms: off the chart, every point is under it")."""
    style = dict(color=BEST_COLOR, dash="dot", width=2)
    notes = []
    if marks.max_p99_ms is not None:
        text = f"max p99 {marks.max_p99_ms:g} ms"
        if marks.max_p99_ms <= 1.5 * points["p99_ms"].max():
            figure.add_vline(x=marks.max_p99_ms, line=style, annotation_text=text, annotation_position="top right")
        else:
            notes.append(f"{text}: off the chart, every point is under it")
    if marks.min_throughput is not None:
        text = f"min throughput {marks.min_throughput:g}/s"
        if marks.min_throughput >= points["throughput"].min() / 1.5:
            figure.add_hline(y=marks.min_throughput, line=style, annotation_text=text,
                             annotation_position="bottom right")
        else:
            notes.append(f"{text}: off the chart, every point is over it")
    if notes:
        figure.add_annotation(text="<br>".join(notes), xref="paper", yref="paper", x=1.0, y=1.0, xanchor="right",
                              yanchor="bottom", showarrow=False, font=dict(color=BEST_COLOR, size=12))


def _wide(latencies: "pandas.Series") -> bool:
    """A latency range over 50x reads better on a log axis."""
    finite = latencies.dropna()
    finite = finite[finite > 0]
    return len(finite) > 1 and finite.max() / finite.min() > 50


def _value_label(column: str, value) -> str:
    if not isinstance(value, str) and (value is None or (isinstance(value, float) and math.isnan(value))):
        return "?"
    if column == "instance_kind":
        return str(value).removeprefix("KIND_")
    if column == "preferred_batch_size" and float(value) == 0:
        return "none"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
