"""``tritonctl analyze REPO --concurrent``: the models that will share one server, measured sharing it.

Each model is first tuned alone (a repository run). Then its best ``TOP`` configs (the chosen one
and the runner-up, among those meeting the constraints) are combined: every combination is loaded
into one server together and measured under simultaneous load on all models, each at the load
level of its own best point alone, in the same time windows (``perf.together``). The combination
of each model's own choice is measured first: it is what deploying the per-model results side by
side would give.

How a combination is judged: a model's *share* is its objective measured in the combination
divided by the objective of its chosen config's best point alone, so every model counts the same
whatever its speed. A combination meeting every model's constraints beats one that does not; among
those, the one whose worst-served model keeps the largest share wins (max-min: no model is
sacrificed for another). Within noise of that (``NOISE``), the models' own choices are kept when
they are among them (a change must prove itself), otherwise the largest mean share wins.

Outputs, in ``OUTPUT/concurrent/``: ``concurrent.json`` (every combination, per model: config,
load, throughput, p99, share, whether it meets the constraints; the chosen one), ``concurrent.md``,
``<model>/config.pbtxt`` for each model of the chosen combination (validate-clean), and the
checkpoint ``measurements.jsonl``: ``--resume`` measures only the combinations not yet measured.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonctl.analyzer.analyze import AnalyzeOptions, AnalyzeResult, _load_options, _settings
from tritonctl.analyzer.engine import Engine, LoadFailed, make_engine, model_gpus
from tritonctl.analyzer.objective import NOISE, Constraints, Objective
from tritonctl.analyzer.output import apply_config
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import (AnalyzeError, Candidate, build_candidates, load_model_config,
                                       validation_error)
from tritonctl.perf.options import PerfError, PerfOptions
from tritonctl.perf.together import run_together

TOP = 2  # configs per model that enter the combinations
MAX_COMBINATIONS = 16
STAGE = "concurrent"
CHECKPOINT = "measurements.jsonl"


@dataclass
class Choice:
    """One model's config in a combination, with its load level and its best point alone."""

    model: str
    candidate: Candidate
    solo: Point  # this config's best point alone: its load level is the one measured together
    reference: Point  # the model's chosen config's best point alone: what a share is of

    @property
    def level(self) -> float:
        return self.solo.level


@dataclass
class Combination:
    choices: tuple[Choice, ...]
    points: list[Point] = field(default_factory=list)  # one per model, in the choices' order
    error: str = ""
    own_choices: bool = False  # every model's own chosen config: the per-model results side by side

    @property
    def id(self) -> str:
        return " + ".join(f"{c.model}:{c.candidate.config_id}@{c.level:g}" for c in self.choices)

    def shares(self, objective: Objective) -> list[float]:
        return [objective.value(p) / objective.value(c.reference) if objective.value(c.reference) else 0.0
                for p, c in zip(self.points, self.choices)]

    def meets(self, constraints: Constraints) -> bool:
        return bool(self.points) and not self.error and all(constraints.meets(p) for p in self.points)


@dataclass
class ConcurrentResult:
    output_dir: Path
    combinations: list[Combination]
    chosen: Combination | None
    files: list[Path]
    notes: list[str]
    measured: int = 0
    reused: int = 0
    out_of_time: bool = False


def model_choices(result: AnalyzeResult, options: AnalyzeOptions, top: int = TOP) -> list[Choice]:
    """The model's chosen config first, then the next best meeting the constraints, up to ``top``."""
    model = result.meta["model"]
    if result.best is None or result.best.best is None:
        return []
    ranked = sorted((r for r in result.results if r.best is not None and r.config_id != result.best.config_id),
                    key=lambda r: options.objective.value(r.best), reverse=True)
    picked = [result.best, *ranked[:top - 1]]
    repository = options.repository.resolve()
    model_dir, base = load_model_config(repository, model, model_gpus(options.engine))
    space = options.space.resolved(base)
    candidates = build_candidates(model_dir, base, space, validate=False)
    by_id = {c.config_id: c for c in candidates.all}
    choices = []
    for config in picked:
        candidate = by_id.get(config.config_id)
        if candidate is not None and candidate.config_hash == config.best.config_hash:
            choices.append(Choice(model, candidate, config.best, result.best.best))
    return choices


def combinations(per_model: list[list[Choice]], limit: int = MAX_COMBINATIONS) -> list[Combination]:
    """Every combination of the models' choices, each model's own choice together first; when there
    are more than ``limit``, the models at the end of the list keep fewer alternatives."""
    per_model = [list(c) for c in per_model]
    while _product_size(per_model) > limit:
        longest = max(range(len(per_model)), key=lambda i: (len(per_model[i]), i))
        per_model[longest].pop()
    result = []
    for index, choices in enumerate(itertools.product(*per_model)):
        combination = Combination(tuple(choices))
        combination.own_choices = index == 0
        result.append(combination)
    return result


def _product_size(lists: list[list]) -> int:
    size = 1
    for items in lists:
        size *= len(items)
    return size


def run_repository_concurrent(options: AnalyzeOptions, models: list[str], reporter=None):
    """A repository run (each model tuned alone), then the combinations of their best configs on one
    server. ``options.time_budget_s`` holds for both: the models share ``n / (n + 1)`` of it (n
    models), the combinations get the rest and what the models left. ``--apply`` writes the chosen
    combination's configs (the models' own runs apply nothing). Returns both results."""
    from tritonctl.analyzer.repository import run_repository

    if len(models) < 2:
        raise AnalyzeError("--concurrent measures models sharing one server: give at least two (--models a,b, "
                           "or a repository with two or more)")
    clock = time.monotonic()
    budget = options.time_budget_s
    deadline = clock + budget if budget else None
    share = budget * len(models) / (len(models) + 1) if budget else None
    run = run_repository(replace(options, time_budget_s=share, apply=False), models, reporter)
    if run.interrupted:
        return run, None
    results = [o.result for o in run.outcomes if o.result is not None]
    note = getattr(reporter, "note", lambda text: None)
    return run, run_concurrent(options, results, deadline, note)


def run_concurrent(options: AnalyzeOptions, results: list[AnalyzeResult], deadline: float | None = None,
                   note=lambda text: None) -> ConcurrentResult:
    """Measure the combinations of the tuned ``results`` on one server; write ``OUTPUT/concurrent``."""
    for result in results:
        if result.meta.get("pipeline"):
            note(f"{result.meta['model']} is a pipeline: it takes no part in the combinations (they combine "
                 "single models' configs)")
    per_model = [c for c in (model_choices(r, options) for r in results
                             if not r.interrupted and not r.meta.get("pipeline")) if c]
    if len(per_model) < 2:
        raise AnalyzeError("--concurrent needs at least two models with a chosen config (a model whose search "
                           "was interrupted, or where no config met the constraints, cannot take part)")
    out = options.output_dir / "concurrent"
    out.mkdir(parents=True, exist_ok=True)
    repository = options.repository.resolve()
    engine = make_engine(options.engine, repository, options.protocol, out / "server.log", options.url,
                         options.tritonserver, options.triton_args)
    combos = combinations(per_model)
    settings = {**_settings(replace(options, model=""), engine), "models": [c[0].model for c in per_model]}
    recorded = _open_checkpoint(out / CHECKPOINT, settings, options.resume, options.overwrite)
    result = ConcurrentResult(out, combos, None, [], [])
    loaded: dict[str, str] = {}
    durations: list[float] = []
    engine.start()
    try:
        hardware = engine.hardware["id"]
        for choices in per_model:
            other = {c.solo.hardware for c in choices} - {hardware, ""}
            if other:
                raise AnalyzeError(f"model '{choices[0].model}' was tuned on other hardware ({', '.join(other)}) "
                                   f"than this machine ({hardware}); --concurrent compares with those numbers: "
                                   "run it where the models were tuned")
        for combination in combos:
            previous = recorded.get((combination.id, hardware))
            if previous is not None:
                combination.points, combination.error = previous
                result.reused += 1
                continue
            if deadline is not None and not combination.own_choices and durations and \
                    deadline - time.monotonic() < statistics.median(durations):
                result.out_of_time = True
                note(f"time budget: {combination.id} and the combinations after it were not measured")
                break
            started = time.monotonic()
            _measure(engine, combination, options, loaded, hardware)
            durations.append(time.monotonic() - started)
            _record(out / CHECKPOINT, combination)
            result.measured += 1
            note(_describe(combination, options.objective, options.constraints))
    finally:
        try:
            for model in loaded:
                engine.restore(model)
        except (AnalyzeError, OSError):
            pass
        finally:
            engine.stop()
    result.chosen = choose(combos, options.objective, options.constraints)
    result.files = _write(result, options)
    return result


def _measure(engine: Engine, combination: Combination, options: AnalyzeOptions, loaded: dict[str, str],
             hardware: str) -> None:
    for choice in combination.choices:
        if loaded.get(choice.model) != choice.candidate.config_hash:
            try:
                engine.apply(choice.model, choice.candidate)
            except LoadFailed as exc:
                loaded.pop(choice.model, None)
                combination.error = f"{choice.model} {choice.candidate.config_id} did not load: {exc}"
                return
            loaded[choice.model] = choice.candidate.config_hash
    loads = [PerfOptions(c.model, url=engine.url, protocol=options.protocol, shapes=options.shapes,
                         input_data=options.input_data, measurement_interval_ms=options.measurement_interval_ms,
                         stability_percentage=options.stability_percentage, max_trials=options.max_trials,
                         request_timeout_s=options.request_timeout_s,
                         **_load_options(options.space, c.level)) for c in combination.choices]
    started = time.monotonic()
    try:
        levels = run_together(loads)
    except PerfError as exc:
        combination.error = str(exc)
        return
    took = time.monotonic() - started
    combination.points = [
        replace(Point.from_level(c.candidate, level, STAGE, took, 0, c.solo.load, c.solo.request_rate),
                hardware=hardware) for c, level in zip(combination.choices, levels)]


def choose(combos: list[Combination], objective: Objective, constraints: Constraints) -> Combination | None:
    """Max-min over the models' shares among the combinations meeting every constraint; within noise
    of the best, the models' own choices, else the largest mean share. None when none meets them."""
    passing = [c for c in combos if c.meets(constraints)]
    if not passing:
        return None
    top = max(min(c.shares(objective)) for c in passing)
    near = [c for c in passing if min(c.shares(objective)) >= top * (1.0 - NOISE)]
    baseline = next((c for c in near if c.own_choices), None)
    return baseline or max(near, key=lambda c: statistics.fmean(c.shares(objective)))


def _describe(combination: Combination, objective: Objective, constraints: Constraints) -> str:
    if combination.error:
        return f"{combination.id}: {combination.error}"
    parts = [f"{p.throughput:,.1f} infer/s, p99 {p.p99_ms:.2f} ms ({share:.0%} of alone)"
             for p, share in zip(combination.points, combination.shares(objective))]
    return f"{combination.id}: " + "; ".join(parts) + ("" if combination.meets(constraints) else " [misses]")


# --- the checkpoint and the outputs --------------------------------------------------------

def _open_checkpoint(path: Path, settings: dict, resume: bool, overwrite: bool) -> dict:
    settings = json.loads(json.dumps(settings))
    recorded: dict = {}
    if path.is_file() and path.stat().st_size:
        if not resume and not overwrite:
            raise AnalyzeError(f"{path.parent} already holds measurements of combinations: pass --resume to "
                               "continue, --overwrite to start again, or another --output-dir")
        if overwrite:
            path.unlink()
        else:
            lines = path.read_text().splitlines()
            header = json.loads(lines[0]) if lines else {}
            if header.get("settings") != settings:
                raise AnalyzeError(f"cannot resume from {path}: it was measured with other settings; use the same "
                                   "options, or --overwrite")
            for line in lines[1:]:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut off by a kill: that combination is measured again
                points = [Point.from_record(p) for p in record["points"]]
                recorded[(record["id"], record["hardware"])] = (points, record["error"])
    if not path.is_file() or not path.stat().st_size:
        path.write_text(json.dumps({"kind": "run", "settings": settings}) + "\n")
    return recorded


def _record(path: Path, combination: Combination) -> None:
    hardware = combination.points[0].hardware if combination.points else ""
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps({"id": combination.id, "hardware": hardware, "error": combination.error,
                               "points": [p.to_record() for p in combination.points]}) + "\n")
        file.flush()
        os.fsync(file.fileno())


def _entry(combination: Combination, objective: Objective, constraints: Constraints) -> dict:
    shares = combination.shares(objective) if combination.points else []
    models = []
    for i, choice in enumerate(combination.choices):
        entry = {"model": choice.model, "config_id": choice.candidate.config_id, "load": choice.solo.load,
                 "level": choice.level, "alone": {"throughput": round(choice.solo.throughput, 2),
                                                  "p99_ms": round(choice.solo.p99_ms, 3)},
                 "reference": {"config_id": choice.reference.config_id,
                               "throughput": round(choice.reference.throughput, 2)}}
        if combination.points:
            p = combination.points[i]
            entry.update({"throughput": round(p.throughput, 2), "p99_ms": round(p.p99_ms, 3),
                          "share": round(shares[i], 4), "meets_constraints": constraints.meets(p)})
        models.append(entry)
    return {"id": combination.id, "own_choices": combination.own_choices, "error": combination.error or None,
            "meets_constraints": combination.meets(constraints),
            "min_share": round(min(shares), 4) if shares else None,
            "mean_share": round(statistics.fmean(shares), 4) if shares else None, "models": models}


def _write(result: ConcurrentResult, options: AnalyzeOptions) -> list[Path]:
    objective, constraints, out = options.objective, options.constraints, result.output_dir
    files: list[Path] = []
    chosen = result.chosen
    for stale in out.glob("*/config.pbtxt"):
        stale.unlink()  # a choice of an earlier run must not look like this one's
    applied: list[str] = []
    if chosen is not None:
        for choice, point in zip(chosen.choices, chosen.points):
            model_dir = options.repository.resolve() / choice.model
            header = (f"Chosen by tritonctl analyze --concurrent with {', '.join(c.model for c in chosen.choices)} "
                      f"on one server ({chosen.id}).\nMeasured together: {point.describe()}, "
                      f"p50 {point.p50_ms:.2f} ms; alone: {choice.solo.describe()}.")
            text = choice.candidate.pbtxt(header)
            problem = validation_error(model_dir, text)
            if problem:
                raise AnalyzeError(f"the chosen config of {choice.model} does not validate ({problem})")
            path = out / choice.model / "config.pbtxt"
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            files.append(path)
            if options.apply:
                applied.append(apply_config(choice.candidate, text, model_dir)[1])
    result.notes.extend(applied)
    document = {"objective": objective.describe(), "constraints": constraints.as_dict(),
                "rule": "max-min of each model's share of its objective alone; within noise the models' own "
                        "choices, else the largest mean share",
                "chosen": chosen.id if chosen else None, "out_of_time": result.out_of_time,
                "combinations": [_entry(c, objective, constraints) for c in result.combinations
                                 if c.points or c.error]}
    summary = out / "concurrent.json"
    summary.write_text(json.dumps(document, indent=2) + "\n")
    report = out / "concurrent.md"
    report.write_text(_markdown(document))
    return [summary, report, *files]


def _markdown(document: dict) -> str:
    chosen = document["chosen"]
    lines = ["# analyze --concurrent: the models sharing one server", "",
             f"Objective {document['objective']}; each model's share is its objective measured together "
             "divided by the objective of its chosen config alone (best alone). Chosen: the combination whose "
             "worst-served model keeps the largest share.",
             "", f"Chosen: {chosen}" if chosen else "Chosen: none (no combination met every constraint).", "",
             "| combination | model | throughput (infer/s) | best alone | share | p99 ms | meets |",
             "|---|---|---|---|---|---|---|"]
    for combo in document["combinations"]:
        mark = " *" if combo["id"] == chosen else ""
        own = " (own choices)" if combo["own_choices"] else ""
        if combo["error"]:
            lines.append(f"| {combo['id']}{own}{mark} | failed: {combo['error']} | | | | | |")
            continue
        for i, m in enumerate(combo["models"]):
            name = f"{combo['id']}{own}{mark}" if i == 0 else ""
            lines.append(f"| {name} | {m['model']} {m['config_id']} | {m['throughput']:,.1f} | "
                         f"{m['reference']['throughput']:,.1f} | {m['share']:.0%} | {m['p99_ms']:.2f} | "
                         f"{'yes' if m['meets_constraints'] else 'no'} |")
    return "\n".join(lines) + "\n"
