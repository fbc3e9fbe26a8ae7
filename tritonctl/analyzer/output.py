"""The output directory of ``tritonctl analyze``: the best config.pbtxt, summary.json, the HTML
report, and ``--apply`` (the best config written into the model directory, the old one kept)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tritonctl.analyzer.objective import ConfigResult
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError, Candidate, validation_error

if TYPE_CHECKING:
    import pandas

    from tritonctl.analyzer.analyze import AnalyzeOptions


def config_header(best: ConfigResult, default: ConfigResult | None, meta: dict) -> str:
    """The comment on top of the written config: what was measured, where, against what."""
    point = best.best
    lines = [
        f"Chosen by tritonctl analyze {meta['tritonctl_version']} ({meta['strategy']} search, "
        f"{meta['engine']}), {meta['finished'][:19]}Z.",
        f"Objective: {meta['objective']}; constraints: "
        + (", ".join(f"{k} {v:g}" for k, v in meta["constraints"].items()) or "none") + ".",
        f"Measured as {best.config_id}: {point.describe()}, p50 {point.p50_ms:.2f} ms.",
    ]
    final = meta.get("final_round")
    if final and final["rounds"]:
        chosen = next(f for f in final["finalists"] if f["config_id"] == final["chosen"])
        lines.append(f"Final round, {final['rounds']} head-to-head rounds: {chosen['throughput']:,.1f} infer/s, "
                     f"p99 {chosen['p99_ms']:.2f} ms (median); margin {final['verdict']}.")
    elif final:
        lines.append("Final round: none; it was the only measured config meeting the constraints.")
    if final and final.get("load_check"):
        lines.append(f"Load level: {final['load_check']['verdict']}.")
    for knob in meta.get("unexplored_knobs") or ():
        lines.append(f"Not explored (the --budget ran out first): {knob}.")
    if default is not None and default.config_id != best.config_id:
        baseline = default.best or _best_effort(default)
        if baseline is not None:
            misses = "" if default.best is not None else " (missing the constraints)"
            lines.append(f"The default config measured {baseline.describe()}{misses}.")
    elif default is not None:
        lines.append("This is the model's default config: no measured change beat it by more than noise.")
    lines.append("Numbers hold for this model, server and machine; measure again after changing any of them.")
    return "\n".join(lines)


def _best_effort(result: ConfigResult) -> Point | None:
    ok = [p for p in result.points if p.ok]
    return max(ok, key=lambda p: p.throughput) if ok else None


def write_best_config(candidate: Candidate, best: ConfigResult, default: ConfigResult | None, meta: dict,
                      model_dir: Path, output_dir: Path) -> tuple[str, Path]:
    """``OUTPUT/config.pbtxt``, checked by the validator against the model directory."""
    text = candidate.pbtxt(config_header(best, default, meta))
    problem = validation_error(model_dir, text)
    if problem:  # candidates are validated when the space is built; this would be a bug
        raise AnalyzeError(f"the best config does not validate ({problem}); it is not written")
    path = output_dir / "config.pbtxt"
    path.write_text(text)
    return text, path


def apply_config(candidate: Candidate, text: str, model_dir: Path) -> tuple[Path | None, str]:
    """Write the best config into the model directory; the old file is kept as config.pbtxt.orig
    (or .orig.N when an earlier run already kept one)."""
    target = model_dir / "config.pbtxt"
    if candidate.is_default:
        return None, f"--apply: the default config is already the best; {target} is unchanged"
    backup = None
    if target.exists():
        backup = target.with_name("config.pbtxt.orig")
        number = 1
        while backup.exists():
            backup = target.with_name(f"config.pbtxt.orig.{number}")
            number += 1
        os.replace(target, backup)
    target.write_text(text)
    kept = f"; the previous config is kept as {backup.name}" if backup else ""
    return target, f"--apply: wrote the best config to {target}{kept}"


def write_summary(meta: dict, best: ConfigResult | None, default: ConfigResult | None, options: "AnalyzeOptions",
                  runner, interrupted: bool) -> Path:
    """``summary.json``: the report's meta data plus the best and default points, for scripts."""

    def point(result: ConfigResult | None) -> dict | None:
        chosen = result.best if result is not None else None
        if chosen is None:
            return None
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in chosen.to_record().items()}

    document = {**meta, "interrupted": interrupted, "best": point(best), "default": point(default),
                "points_measured": runner.measured, "points_reused": runner.reused,
                "search_space": options.space.describe()}
    path = options.output_dir / "summary.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def write_html(frame: "pandas.DataFrame", meta: dict, output_dir: Path) -> tuple[Path | None, str]:
    """``report.html`` when the report module and its plotting library are installed."""
    try:
        from tritonctl.analyzer.html_report import write_html_report

        return write_html_report(output_dir / "report.html", frame, meta), ""
    except ImportError as exc:  # plotly and Jinja2 are imported when the report is written
        from tritonctl.optional import missing_dependency

        return None, f"no HTML report: {missing_dependency(exc, 'the HTML report') or exc}"
