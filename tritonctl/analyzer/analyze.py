"""``run_analyze``: measure candidate configs of one model, choose the best, write the outputs.

The flow: effective config -> candidates -> engine -> strategy (each candidate: apply it through
the load API, sweep the load (concurrency, request rate or a replayed trace) with ``run_perf``,
checkpoint every point) -> choose the best ->
output directory. Ctrl-C ends the search where it is; what was measured is kept and written.
"""

from __future__ import annotations

import hashlib
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tritonctl import __version__
from tritonctl.analyzer.checkpoint import Checkpoint
from tritonctl.analyzer.engine import Engine, LoadFailed, make_engine, model_gpus
from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective, best_point, choose_best, summarize
from tritonctl.analyzer.output import apply_config, write_best_config, write_html, write_summary
from tritonctl.perf.options import PerfError, PerfOptions, check_options
from tritonctl.analyzer.pipeline_space import pipeline_kind
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.results import points_frame, write_tables
from tritonctl.analyzer.search import (AnalyzeError, Candidate, CandidateSet, SearchSpace, build_candidates,
                                       load_model_config)
from tritonctl.analyzer.strategy import (Search, TimeBudget, chosen_result, knob_values, run_exhaustive, run_smart,
                                         smart_budget)
from tritonctl.analyzer.sweep import SweepRule, sweep
from tritonctl.analyzer.why import explain

if TYPE_CHECKING:
    import pandas

STRATEGIES = ("smart", "exhaustive")


@dataclass
class AnalyzeOptions:
    repository: Path
    model: str
    output_dir: Path
    space: SearchSpace = field(default_factory=SearchSpace)
    strategy: str = "smart"
    objective: Objective = field(default_factory=Objective)
    constraints: Constraints = field(default_factory=Constraints)
    budget: int | None = None  # smart: the most configs to measure (default: a quarter of them, or every knob's line)
    time_budget_s: float | None = None  # the most wall time for the run, final round included (server start too)
    engine: str = "subprocess"
    url: str | None = None
    protocol: str = "http"
    tritonserver: str | None = None
    triton_args: tuple[str, ...] = ()
    measurement_interval_ms: float = 1000.0
    stability_percentage: float = 10.0
    max_trials: int = 6
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_data: str = "random"
    request_timeout_s: float = 30.0
    sweep_rule: SweepRule = field(default_factory=SweepRule)
    resume: bool = False
    overwrite: bool = False
    apply: bool = False
    composing_models: tuple[str, ...] = ()  # the models a BLS Python model calls (or a subset of an ensemble's steps)
    # Builds the engine in place of make_engine, with its arguments (analyzer.ray_cluster: a server on a Ray node).
    engine_maker: Callable[..., Engine] | None = None


class Reporter:
    """What a run tells its user as it goes; the CLI shows it, a library caller may ignore it."""

    def plan(self, total: int, strategy: str) -> None: ...
    def candidate(self, candidate: Candidate, stage: str) -> None: ...
    def point(self, point: Point, reused: bool) -> None: ...
    def candidate_done(self, result: ConfigResult) -> None: ...
    def decision(self, text: str) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass
class AnalyzeResult:
    output_dir: Path
    results: list[ConfigResult]
    best: ConfigResult | None
    default: ConfigResult | None
    frame: "pandas.DataFrame"
    meta: dict
    files: list[Path]
    interrupted: bool
    measured: int  # points measured in this run
    reused: int  # points taken from the checkpoint
    notes: list[str]
    applied: Path | None = None


def run_analyze(options: AnalyzeOptions, reporter: Reporter | None = None) -> AnalyzeResult:
    """Run the whole analysis. Raises AnalyzeError / PerfError for anything the user must fix."""
    reporter = reporter or Reporter()
    if options.strategy not in STRATEGIES:
        raise AnalyzeError(f"--strategy {options.strategy!r}: use smart or exhaustive")
    check_options(PerfOptions(options.model, protocol=options.protocol, input_data=options.input_data,
                              measurement_interval_ms=options.measurement_interval_ms,
                              stability_percentage=options.stability_percentage, max_trials=options.max_trials))
    if pipeline_kind(options.repository, options.model, options.composing_models):
        from tritonctl.analyzer.pipeline import run_pipeline

        return run_pipeline(options, reporter)
    started, clock = datetime.now(timezone.utc), time.monotonic()
    time_budget = TimeBudget(clock + options.time_budget_s, options.time_budget_s) if options.time_budget_s else None
    repository = options.repository.resolve()
    model_dir, base = load_model_config(repository, options.model, model_gpus(options.engine))
    options = replace(options, space=options.space.resolved(base))
    candidates = build_candidates(model_dir, base, options.space)
    for dropped in candidates.dropped:
        reporter.note(f"skipped {dropped}")
    output_dir = options.output_dir
    engine = (options.engine_maker or make_engine)(options.engine, repository, options.protocol, output_dir / "server.log", options.url,
                         options.tritonserver, options.triton_args)
    checkpoint = Checkpoint.open(output_dir, _settings(options, engine), options.resume, options.overwrite)
    if checkpoint.dropped_line:
        reporter.note("the last line of the checkpoint was cut off by the kill; that point is measured again")
    budget = smart_budget(candidates, options.budget) if options.strategy == "smart" else None
    runner = _Runner(options, engine, checkpoint, reporter)
    search = Search(candidates, runner.evaluate, options.objective, options.constraints, reporter.decision, budget,
                    runner.sample, time_budget)
    reporter.plan(min(budget or len(candidates.all), len(candidates.all)), options.strategy)
    strategy = run_smart if options.strategy == "smart" else run_exhaustive
    interrupted, failure = drive(lambda: strategy(search), search, engine, runner, checkpoint, options.model)
    result = _finish(options, model_dir, candidates, search, runner, started, time.monotonic() - clock, interrupted)
    raise_kept(failure, checkpoint, output_dir)
    return result


def drive(run: Callable[[], None], search: Search, engine: Engine, runner: "_Runner", checkpoint: Checkpoint,
          model: str) -> tuple[bool, Exception | None]:
    """Start the engine and run the search on it; then restore the model's own config and stop.
    Returns (interrupted, the failure to report after the results are written): Ctrl-C, or a fault
    once something was measured (e.g. the server died), keeps what was measured."""
    interrupted, failure = False, None
    try:
        with _noting_ctrl_c():
            engine.start()
            run()
    except KeyboardInterrupt:
        interrupted = True
        search.decide("interrupted: stopped on Ctrl-C; the measurements so far are kept")
    except (AnalyzeError, PerfError) as exc:
        if not runner.measured + runner.reused:
            raise
        interrupted, failure = True, exc
        search.decide(f"stopped: {exc}")
    finally:
        try:
            if runner.touched:
                engine.restore(model)
        except (AnalyzeError, OSError):
            pass  # the server is gone: nothing to restore
        finally:
            engine.stop()
            checkpoint.close()
    return interrupted, failure


def write_reports(frame, meta: dict, best, default, options: AnalyzeOptions, runner: "_Runner", interrupted: bool,
                  files: list, notes: list) -> None:
    """summary.json and report.html, added to ``files``; what the report could not do, to ``notes``."""
    files.append(write_summary(meta, best, default, options, runner, interrupted))
    report, note = write_html(frame, meta, options.output_dir)
    if report:
        files.append(report)
    if note:
        notes.append(note)


def raise_kept(failure: Exception | None, checkpoint: Checkpoint, output_dir: Path) -> None:
    """After the results are written: the failure that stopped the run, and how to go on."""
    if failure is not None:
        kept = sum(p.ok for p in checkpoint.recorded + checkpoint.new)
        raise AnalyzeError(f"{failure}\nThe {kept} points measured so far are in {output_dir}; fix the problem "
                           "and run the same command with --resume.")


def _settings(options: AnalyzeOptions, engine: Engine) -> dict:
    """What makes two measurements of one config comparable (checked on --resume)."""
    settings = {"model": options.model, "engine": engine.kind, "url": options.url, "protocol": options.protocol,
            "measurement_interval_ms": options.measurement_interval_ms,
            "stability_percentage": options.stability_percentage, "max_trials": options.max_trials,
            "shapes": {k: list(v) for k, v in sorted(options.shapes.items())}, "input_data": options.input_data,
            "client_batch_size": 1}
    space = options.space
    if space.load_kind == "request_intervals":  # rates and concurrencies are told apart by the points' keys
        trace = space.request_intervals_us
        settings["request_intervals"] = {"count": len(trace), "total_us": sum(trace),
                                         "sha256": hashlib.sha256(repr(trace).encode()).hexdigest()}
    if space.load_kind == "request_rate":
        settings["load"] = "request_rate"
    return settings


CTRL_C = threading.Event()  # set once Ctrl-C was pressed during the current run
_HOLD_CTRL_C = threading.Event()  # set inside ``_ctrl_c_deferred``: Ctrl-C waits for its end


@contextmanager
def _noting_ctrl_c():
    """Ctrl-C raises KeyboardInterrupt as usual and is also noted, so that the next point stops
    the run even if the exception was swallowed on its way up; this also keeps asyncio.run from
    turning Ctrl-C into a cancellation that a library awaiting inside a measurement may absorb."""
    CTRL_C.clear()
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return

    def interrupted(signum, frame):
        CTRL_C.set()
        if not _HOLD_CTRL_C.is_set():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _ctrl_c_deferred():
    """Ctrl-C pressed inside the block takes effect at its end, so the block runs whole."""
    _HOLD_CTRL_C.set()
    try:
        yield
    finally:
        _HOLD_CTRL_C.clear()
    if CTRL_C.is_set():
        raise KeyboardInterrupt


class _Runner:
    """Evaluates one candidate: its load sweep, each point from the checkpoint or measured."""

    def __init__(self, options: AnalyzeOptions, engine: Engine, checkpoint: Checkpoint, reporter: Reporter):
        self.options = options
        self.engine = engine
        self.checkpoint = checkpoint
        self.reporter = reporter
        self.loaded: str | None = None  # config_hash of the config the server has now
        self.touched = False
        self.measured = 0
        self.reused = 0
        self.any_ok = any(p.ok for p in checkpoint.recorded)

    def evaluate(self, candidate: Candidate, stage: str, near: float | None = None) -> ConfigResult:
        options = self.options
        self.reporter.candidate(candidate, stage)
        points, reason = sweep(options.space.load_levels, lambda level: self._point(candidate, level, stage),
                               options.objective, options.constraints, options.sweep_rule, near)
        result = ConfigResult(candidate.config_id, candidate.knobs, candidate.is_default, points,
                              best_point(points, options.objective, options.constraints), reason)
        self.reporter.candidate_done(result)
        return result

    def sample(self, candidate: Candidate, level: float, repeat: int, stage: str) -> Point:
        """Measure one point again (a tie-break or the final round): ``repeat`` numbers the re-measurements.
        One taken from the checkpoint may have been made for another stage (by another strategy): it is
        a measurement of the same point all the same, and is labelled with the stage that uses it now."""
        point = self._point(candidate, level, stage, repeat)
        return point if point.stage == stage else replace(point, stage=stage)

    def _point(self, candidate: Candidate, level: float, stage: str, repeat: int = 0) -> Point:
        if CTRL_C.is_set():  # pressed, but swallowed on its way up (inside a client library)
            raise KeyboardInterrupt
        recorded = self.checkpoint.lookup(candidate.config_id, candidate.config_hash, level, repeat,
                                          self.engine.hardware["id"])
        if recorded is not None:
            self.reused += 1
            self.reporter.point(recorded, True)
            return recorded
        point = replace(self._measure(candidate, level, stage, repeat), hardware=self.engine.hardware["id"])
        with _ctrl_c_deferred():  # the checkpoint file and the final tables keep the same points
            self.checkpoint.record(point)
            self.measured += 1
            self.any_ok = self.any_ok or point.ok
            self.reporter.point(point, False)
        return point

    def _measure(self, candidate: Candidate, level: float, stage: str, repeat: int) -> Point:
        options = self.options
        load = options.space.load_kind
        if self.loaded != candidate.config_hash:
            self.touched = True
            try:
                self.engine.apply(options.model, candidate)
            except LoadFailed as exc:
                if not self.any_ok:
                    raise AnalyzeError(f"the server refused config {candidate.config_id} of model "
                                       f"'{options.model}': {exc}") from None
                self.loaded = None
                return Point.failure(candidate, level, stage, f"load failed: {exc}", repeat, load)
            self.loaded = candidate.config_hash
        perf = PerfOptions(options.model, url=self.engine.url, protocol=options.protocol,
                           shapes=options.shapes, input_data=options.input_data,
                           measurement_interval_ms=options.measurement_interval_ms,
                           stability_percentage=options.stability_percentage, max_trials=options.max_trials,
                           request_timeout_s=options.request_timeout_s, **_load_options(options.space, level))
        started = time.monotonic()
        try:
            result = self.engine.measure(perf)
        except PerfError as exc:
            if not self.any_ok:  # nothing has worked yet: a setup problem, not this config's
                raise
            return Point.failure(candidate, level, stage, str(exc), repeat, load)
        return Point.from_level(candidate, result.levels[0], stage, time.monotonic() - started, repeat, load,
                                0.0 if load == "concurrency" else float(level))


def _load_options(space: SearchSpace, level: float) -> dict:
    """The perf options of one load level, with a warm-up of one request per request in flight, or of
    a tenth of a second's requests at a rate (at least one)."""
    if space.load_kind == "concurrency":
        return {"concurrency": (int(level),), "warmup_requests": int(level)}
    warmup = max(1, round(level / 10))
    if space.load_kind == "request_rate":
        return {"concurrency": (), "request_rates": (float(level),), "warmup_requests": warmup}
    return {"concurrency": (), "request_intervals": space.request_intervals_us, "warmup_requests": warmup}


def _points_by_stage(points: list[Point]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for point in points:
        counts[point.stage] = counts.get(point.stage, 0) + 1
    return counts


def _finish(options: AnalyzeOptions, model_dir: Path, candidates: CandidateSet, search: Search, runner: _Runner,
            started: datetime, wall_s: float, interrupted: bool) -> AnalyzeResult:
    points = [p for r in search.results.values() for p in r.points]
    points += [p for samples in search.samples.values() for p in samples]
    seen = {id(p) for p in points}
    points += [p for p in runner.checkpoint.new if id(p) not in seen]  # a candidate cut off by Ctrl-C
    # Configs are judged by their sweeps; re-measurements count only in the search's comparisons.
    results = list(summarize([p for p in points if p.repeat == 0], options.objective, options.constraints).values())
    for result in results:
        if result.config_id in search.results:
            result.stop_reason = search.results[result.config_id].stop_reason
    final = search.final
    if final is not None:
        best = chosen_result(final, results)
    else:  # stopped before the final round: the best of the sweeps, shown but not written
        best = choose_best(results, options.objective)
    default = next((r for r in results if r.is_default), None)
    frame = points_frame(points, options.objective, options.constraints)
    by_id = {c.config_id: c for c in candidates.all}
    best_candidate = by_id.get(best.config_id) if best else None
    meta = {
        "model": options.model, "strategy": options.strategy, "objective": options.objective.describe(),
        "constraints": options.constraints.as_dict(), "best_config_id": best.config_id if best else None,
        "default_config_id": candidates.default.config_id, "best_config_pbtxt": "",
        "decisions": list(search.decisions), "engine": runner.engine.describe(), "hardware": runner.engine.hardware,
        "started": started.isoformat(),
        "finished": datetime.now(timezone.utc).isoformat(), "wall_s": round(wall_s, 2),
        "candidates_total": len(candidates.all), "candidates_measured": len(results),
        "tritonctl_version": __version__, "interrupted": interrupted,
        "final_round": final.as_dict() if final is not None else None,
        "budget": search.budget, "unexplored_knobs": list(search.unexplored),
        "time_budget_s": options.time_budget_s, "out_of_time": search.out_of_time,
        "points_by_stage": _points_by_stage(points),
        "measurement_s": round(sum(p.measured_s for p in points), 2),  # reused points: their original time
        "load": options.space.describe_load(),
    }
    if best is not None:
        searched = {k: v for k, v in knob_values(candidates.all).items()}
        searched["dynamic_batching"] = list(dict.fromkeys(c.knobs.dynamic_batching for c in candidates.all))
        meta["why"] = explain(results, best, meta["final_round"], options.objective, options.constraints, searched)
    notes: list[str] = []
    files = write_tables(frame, options.output_dir, notes)
    applied = None
    if best is not None and best_candidate is not None and not interrupted and final is not None:
        text, path = write_best_config(best_candidate, best, default, meta, model_dir, options.output_dir)
        meta["best_config_pbtxt"] = text
        files.append(path)
        if options.apply:
            applied, note = apply_config(best_candidate, text, model_dir)
            notes.append(note)
    else:  # no choice this time: a config.pbtxt from an earlier run must not look like this run's
        (options.output_dir / "config.pbtxt").unlink(missing_ok=True)
    write_reports(frame, meta, best, default, options, runner, interrupted, files, notes)
    return AnalyzeResult(options.output_dir, results, best, default, frame, meta, files, interrupted,
                         runner.measured, runner.reused, notes, applied)
