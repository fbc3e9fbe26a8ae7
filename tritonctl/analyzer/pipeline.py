"""``run_pipeline``: tune the composing models of an ensemble or of a BLS Python model together,
measured on the pipeline's own endpoint.

A joint candidate loads every step with its config (through the load API, as a single model's
candidate is loaded), then the load runs against the pipeline model; the steps' share of the
latency comes from the statistics endpoint (``/v2/models/STEP/stats``) read before and after
each measurement: per pipeline request, the time each step's requests spent queued and
computing. The outputs are the single-model run's (tables, summary.json, report.html) plus
``OUTPUT/STEP/config.pbtxt`` for every step (with the header the single-model run writes) and
``OUTPUT/PIPELINE/config.pbtxt``, the pipeline model's own config, unchanged.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from tritonctl import __version__
from tritonctl.analyzer.analyze import (AnalyzeOptions, AnalyzeResult, Reporter, _points_by_stage, _Runner,
                                        _settings, drive, raise_kept, write_reports)
from tritonctl.analyzer.checkpoint import Checkpoint
from tritonctl.analyzer.engine import Engine, LoadFailed, make_engine, model_gpus
from tritonctl.analyzer.objective import ConfigResult, choose_best, summarize
from tritonctl.analyzer.output import apply_config, config_header
from tritonctl.analyzer.pipeline_search import JointSmartSearch, joint_budget, register
from tritonctl.analyzer.pipeline_space import JointSpace, Pipeline, PipelineCandidate, load_pipeline
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.results import points_frame, write_tables
from tritonctl.analyzer.search import AnalyzeError, validation_error
from tritonctl.analyzer.strategy import Search, TimeBudget, chosen_result, run_exhaustive
from tritonctl.perf.measurement import ServerStats
from tritonctl.perf.options import PerfOptions, check_options
from tritonctl.repo_schema.writer import to_pbtxt

STEP_KNOBS = ("max_batch_size", "preferred_batch_size", "max_queue_delay_us", "instance_count", "instance_kind",
              "dynamic_batching", "max_queue_size", "queue_timeout_us")


class PipelineEngine(Engine):
    """An engine that applies a joint candidate step by step, reloading only the steps that change,
    and loads the pipeline model once its steps are there."""

    def __init__(self, inner: Engine, pipeline: Pipeline):
        super().__init__(inner.repository, inner.protocol)
        self.inner = inner
        self.pipeline = pipeline
        self.kind = inner.kind
        self.loaded: dict[str, str | None] = {}  # step -> config hash on the server
        self.top_loaded = False

    @property
    def url(self) -> str:  # type: ignore[override]
        return self.inner.url

    def start(self) -> None:
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()

    def describe(self) -> str:
        return self.inner.describe()

    def apply(self, model: str, candidate: PipelineCandidate) -> None:
        for name, part in zip(candidate.knobs.names, candidate.parts):
            if self.loaded.get(name) == part.config_hash:
                continue
            self.loaded[name] = None
            try:
                self.inner.apply(name, part)
            except LoadFailed as exc:
                raise LoadFailed(f"step '{name}' ({part.config_id}): {exc}") from None
            self.loaded[name] = part.config_hash
        if not self.top_loaded:
            for name in self.pipeline.fixed:
                try:
                    self.inner.apply(name, None)
                except LoadFailed as exc:
                    raise LoadFailed(f"step '{name}' (not tuned): {exc}") from None
            try:
                self.inner.apply(model, None)
            except LoadFailed as exc:
                raise LoadFailed(f"the pipeline model '{model}': {exc}") from None
            self.top_loaded = True

    def restore(self, model: str) -> None:
        for name in (*self.pipeline.names, *self.pipeline.fixed):
            self.inner.restore(name)
        self.inner.restore(model)

    def statistics(self, model: str) -> ServerStats | None:
        return self.inner.statistics(model)

    @property
    def hardware(self) -> dict:
        return self.inner.hardware


class _PipelineRunner(_Runner):
    """The single-model runner, with each step's statistics read around every measurement."""

    def __init__(self, options: AnalyzeOptions, engine: PipelineEngine, checkpoint: Checkpoint, reporter: Reporter):
        super().__init__(options, engine, checkpoint, reporter)
        self.pipeline = engine.pipeline

    def _measure(self, candidate, concurrency: int, stage: str, repeat: int) -> Point:
        if self.loaded != candidate.config_hash:  # load first: a reload starts a step's statistics anew
            self.touched = True
            try:
                self.engine.apply(self.options.model, candidate)
                self.loaded = candidate.config_hash
            except LoadFailed:
                pass  # the base class loads it again and reports the failure as it does for one model
        names = (self.options.model, *self.pipeline.names)
        before = {name: self.engine.statistics(name) for name in names}
        point = super()._measure(candidate, concurrency, stage, repeat)
        if point.ok:
            after = {name: self.engine.statistics(name) for name in names}
            point = replace(point, steps=step_shares(self.options.model, self.pipeline.names, before, after, point))
        return point


def step_shares(model: str, steps: tuple[str, ...], before: dict, after: dict, point: Point) -> dict | None:
    """Per step: its queue and compute time per pipeline request (µs), its executions' average batch
    size, and its share of the pipeline's request time on the server (the client's latency when the
    server gives no time for the pipeline model)."""
    if before.get(model) is None or after.get(model) is None:
        return None
    top = after[model] - before[model]
    if top.success_count <= 0:
        return None
    whole_us = top.success_ns / top.success_count / 1e3 or point.avg_ms * 1e3
    shares: dict = {}
    for name in steps:
        if before.get(name) is None or after.get(name) is None:
            return None
        delta = after[name] - before[name]
        queue = delta.queue_ns / top.success_count / 1e3
        compute = (delta.compute_input_ns + delta.compute_infer_ns + delta.compute_output_ns) / top.success_count / 1e3
        batch = delta.inference_count / delta.execution_count if delta.execution_count else None
        shares[name] = {"queue_us": round(queue, 1), "compute_us": round(compute, 1),
                        "share": round((queue + compute) / whole_us, 4) if whole_us > 0 else None,
                        "avg_batch_size": round(batch, 2) if batch is not None else None}
    shares["pipeline_us"] = round(whole_us, 1)
    return shares


def share_words(steps: dict | None) -> str:
    """``pre 31% (queue 0.05 ms, compute 1.20 ms, batch 3.2), post 52% (...); outside the steps 17%``."""
    if not steps:
        return "no statistics from the server"
    parts, total = [], 0.0
    for name, entry in steps.items():
        if name == "pipeline_us" or not isinstance(entry, dict):
            continue
        share = entry.get("share")
        total += share or 0.0
        batch = f", batch {entry['avg_batch_size']:.1f}" if entry.get("avg_batch_size") is not None else ""
        parts.append(f"{name} {share:.0%} (queue {entry['queue_us'] / 1e3:.2f} ms, compute "
                     f"{entry['compute_us'] / 1e3:.2f} ms{batch})" if share is not None else f"{name} -")
    rest = f"; outside the steps {max(0.0, 1.0 - total):.0%}" if total else ""
    return ", ".join(parts) + rest + f" of {steps.get('pipeline_us', 0) / 1e3:.2f} ms per request"


def run_pipeline(options: AnalyzeOptions, reporter: Reporter | None = None) -> AnalyzeResult:
    """Tune the pipeline ``options.model``: its steps' configs searched together at its endpoint."""
    reporter = reporter or Reporter()
    check_options(PerfOptions(options.model, protocol=options.protocol, input_data=options.input_data,
                              measurement_interval_ms=options.measurement_interval_ms,
                              stability_percentage=options.stability_percentage, max_trials=options.max_trials))
    started, clock = datetime.now(timezone.utc), time.monotonic()
    time_budget = TimeBudget(clock + options.time_budget_s, options.time_budget_s) if options.time_budget_s else None
    repository = options.repository.resolve()
    pipeline = load_pipeline(repository, options.model, options.composing_models, options.space,
                             model_gpus(options.engine))
    options = replace(options, space=options.space.resolved(pipeline.steps[0].config))
    space = JointSpace(pipeline)
    reporter.note(f"tuning the {pipeline.describe()} together, measured at '{pipeline.model}'")
    for dropped in space.set.dropped:
        reporter.note(f"skipped {dropped}")
    output_dir = options.output_dir
    engine = PipelineEngine((options.engine_maker or make_engine)(options.engine, repository, options.protocol, output_dir / "server.log",
                                        options.url, options.tritonserver, options.triton_args), pipeline)
    settings = {**_settings(options, engine), "pipeline": list(pipeline.names)}
    checkpoint = Checkpoint.open(output_dir, settings, options.resume, options.overwrite)
    if checkpoint.dropped_line:
        reporter.note("the last line of the checkpoint was cut off by the kill; that point is measured again")
    smart = options.strategy == "smart"
    budget = joint_budget(space, options.budget) if smart else None
    runner = _PipelineRunner(options, engine, checkpoint, reporter)
    search = Search(space.set, runner.evaluate, options.objective, options.constraints, reporter.decision, budget,
                    runner.sample, time_budget)
    register(search, space)
    if not smart:
        space.every()
    reporter.plan(min(budget or space.total, space.total), options.strategy)
    strategy = (lambda: JointSmartSearch(search, space).run()) if smart else (lambda: run_exhaustive(search))
    interrupted, failure = drive(strategy, search, engine, runner, checkpoint, options.model)
    result = _finish(options, pipeline, space, search, runner, started, time.monotonic() - clock, interrupted)
    raise_kept(failure, checkpoint, output_dir)
    return result


def pipeline_frame(points: list[Point], options: AnalyzeOptions, pipeline: Pipeline):
    """The single-model table with every step's knobs and share (``STEP.max_batch_size``, ...,
    ``STEP.share``) in place of the single-model knob columns, which are left unknown."""
    frame = points_frame(points, options.objective, options.constraints)
    ok = [p for p in points if p.ok]
    for column in STEP_KNOBS:
        if column != "dynamic_batching":
            frame[column] = math.nan
    for name in pipeline.names:
        for knob in STEP_KNOBS:
            frame[f"{name}.{knob}"] = [getattr(p.knobs.step(name), knob) for p in ok]
        for key in ("share", "queue_us", "compute_us", "avg_batch_size"):
            frame[f"{name}.{key}"] = [_step_value(p, name, key) for p in ok]
    return frame


def _step_value(point: Point, name: str, key: str) -> float:
    value = ((point.steps or {}).get(name) or {}).get(key)
    return math.nan if value is None else float(value)


def _finish(options: AnalyzeOptions, pipeline: Pipeline, space: JointSpace, search: Search, runner: _PipelineRunner,
            started: datetime, wall_s: float, interrupted: bool) -> AnalyzeResult:
    points = [p for r in search.results.values() for p in r.points]
    points += [p for samples in search.samples.values() for p in samples]
    seen = {id(p) for p in points}
    points += [p for p in runner.checkpoint.new if id(p) not in seen]
    results = list(summarize([p for p in points if p.repeat == 0], options.objective, options.constraints).values())
    for result in results:
        if result.config_id in search.results:
            result.stop_reason = search.results[result.config_id].stop_reason
    final = search.final
    best = chosen_result(final, results) if final is not None else choose_best(results, options.objective)
    default = next((r for r in results if r.is_default), None)
    frame = pipeline_frame(points, options, pipeline)
    chosen = search.by_id.get(best.config_id) if best is not None else None
    decisions = list(search.decisions)
    shares = {}
    for label, result in (("chosen", best), ("default", default)):
        if result is not None and result.best is not None:
            shares[label] = result.best.steps
            decisions.append(f"latency share at the {label} config ({result.config_id}): "
                             f"{share_words(result.best.steps)}")
    for text in decisions[len(search.decisions):]:
        runner.reporter.decision(text)
    meta = {
        "model": options.model, "strategy": options.strategy, "objective": options.objective.describe(),
        "constraints": options.constraints.as_dict(), "best_config_id": best.config_id if best else None,
        "default_config_id": space.default.config_id, "best_config_pbtxt": "", "decisions": decisions,
        "engine": runner.engine.describe(), "hardware": runner.engine.hardware, "started": started.isoformat(),
        "finished": datetime.now(timezone.utc).isoformat(), "wall_s": round(wall_s, 2),
        "candidates_total": space.total, "candidates_measured": len(results), "tritonctl_version": __version__,
        "interrupted": interrupted, "final_round": final.as_dict() if final is not None else None,
        "budget": search.budget, "unexplored_knobs": list(search.unexplored),
        "time_budget_s": options.time_budget_s, "out_of_time": search.out_of_time,
        "points_by_stage": _points_by_stage(points),
        "measurement_s": round(sum(p.measured_s for p in points), 2),
        "load": options.space.describe_load(),
        "pipeline": {
            "model": pipeline.model, "kind": pipeline.kind, "steps": list(pipeline.names),
            "chosen": _step_ids(chosen), "default": _step_ids(space.default), "latency_share": shares,
            "dropped": list(space.set.dropped), "config_files": [],
        },
    }
    notes: list[str] = []
    files = write_tables(frame, options.output_dir, notes)
    applied = None
    if best is not None and chosen is not None and not interrupted and final is not None:
        texts, paths = write_step_configs(chosen, best, default, meta, pipeline, options.output_dir)
        meta["best_config_pbtxt"] = "\n".join(f"# --- {name}/config.pbtxt ---\n{text}" for name, text in texts.items())
        meta["pipeline"]["config_files"] = [str(p.relative_to(options.output_dir)) for p in paths]
        files += paths
        if options.apply:
            for step, part in zip(pipeline.steps, chosen.parts):
                path, note = apply_config(part, texts[step.name], step.model_dir)
                applied = applied or path
                notes.append(note)
    else:
        for name in (*pipeline.names, pipeline.model):
            (options.output_dir / name / "config.pbtxt").unlink(missing_ok=True)
    write_reports(frame, meta, best, default, options, runner, interrupted, files, notes)
    return AnalyzeResult(options.output_dir, results, best, default, frame, meta, files, interrupted,
                         runner.measured, runner.reused, notes, applied)


def _step_ids(candidate: PipelineCandidate | None) -> dict[str, str] | None:
    if candidate is None:
        return None
    return {name: part.config_id for name, part in zip(candidate.knobs.names, candidate.parts)}


def write_step_configs(chosen: PipelineCandidate, best: ConfigResult, default: ConfigResult | None, meta: dict,
                       pipeline: Pipeline, output_dir: Path) -> tuple[dict[str, str], list[Path]]:
    """``OUTPUT/STEP/config.pbtxt`` for every step (validated against its model directory) and
    ``OUTPUT/PIPELINE/config.pbtxt``, the pipeline model's config as it is."""
    common = config_header(best, default, meta)
    texts, paths = {}, []
    for step, part in zip(pipeline.steps, chosen.parts):
        head = (f"Step '{step.name}' of the {pipeline.describe()}, tuned together with the other steps and "
                f"measured at '{pipeline.model}'; this step: {part.config_id}"
                + (" (its default config)" if part.is_default else "") + ".")
        text = part.pbtxt(f"{head}\n{common}")
        problem = validation_error(step.model_dir, text)
        if problem:
            raise AnalyzeError(f"the chosen config of step '{step.name}' does not validate ({problem}); "
                               "it is not written")
        path = output_dir / step.name / "config.pbtxt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        texts[step.name], _ = text, paths.append(path)
    source = pipeline.model_dir / "config.pbtxt"
    path = output_dir / pipeline.model / "config.pbtxt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source.read_text() if source.is_file() else to_pbtxt(pipeline.config))
    paths.append(path)
    return texts, paths
