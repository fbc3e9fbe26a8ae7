"""``tritonctl analyze REPO`` without ``--model``: every model of the repository (or ``--models``),
one after the other in name order, each into ``OUTPUT/<model>/`` as a one-model run writes it,
under one time budget shared fairly: each model gets the time left divided by the models left, so
time a model does not use goes to the next ones. An ensemble, or a Python model whose config names
the models it calls (``bls_composing_models``), is tuned as a pipeline: its steps together, at its
endpoint; those steps are not tuned on their own as well (they are listed with the pipeline that
tunes them). Models analyze cannot tune (sequence and decoupled models, configs that do not
load) are listed with the reason. ``repository.json`` and
``repository.md`` sum the run up: per model, the chosen config against the default.

Each model's run keeps its own checkpoint, so ``--resume`` after Ctrl-C, a crash or a reboot
replays what was measured (without measuring it again) and measures only what is missing."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonctl.analyzer.analyze import AnalyzeOptions, AnalyzeResult, Reporter, run_analyze
from tritonctl.analyzer.pipeline_space import pipeline_kind, step_names
from tritonctl.analyzer.hardware import describe
from tritonctl.analyzer.search import AnalyzeError, load_model_config
from tritonctl.perf.options import PerfError
from tritonctl.repo_schema.repository import model_dirs


@dataclass
class ModelOutcome:
    """One model of a repository run: tuned (with its result) or skipped (with the reason)."""

    model: str
    budget_s: float | None = None
    result: AnalyzeResult | None = None
    skipped: str | None = None
    wall_s: float = 0.0

    def as_dict(self) -> dict:
        entry: dict = {"model": self.model, "budget_s": _round(self.budget_s), "wall_s": round(self.wall_s, 1)}
        if self.skipped is not None:
            return {**entry, "skipped": self.skipped}
        result = self.result
        best, default = result.best, result.default

        def point(config) -> dict | None:
            if config is None or config.best is None:
                return None
            p = config.best
            return {"config_id": config.config_id, "concurrency": p.concurrency, "load": p.load_words(),
                    "throughput": round(p.throughput, 2),
                    "p99_ms": round(p.p99_ms, 3), "instances": config.knobs.instance_count,
                    "instance_kind": config.knobs.instance_kind, "max_batch_size": config.knobs.max_batch_size,
                    "max_queue_delay_us": config.knobs.max_queue_delay_us}

        chosen, base = point(best), point(default)
        gain = (chosen["throughput"] / base["throughput"] - 1.0) if chosen and base and base["throughput"] else None
        return {**entry, "output_dir": result.output_dir.name, "chosen": chosen, "default": base,
                "throughput_gain": None if gain is None else round(gain, 4),
                "margin": (result.meta.get("final_round") or {}).get("verdict"),
                "configs_measured": result.meta["candidates_measured"],
                "configs_total": result.meta["candidates_total"], "out_of_time": result.meta.get("out_of_time"),
                "interrupted": result.interrupted, "hardware": (result.meta.get("hardware") or {}).get("id"),
                "config_written": (result.output_dir / "config.pbtxt").is_file()
                or bool((result.meta.get("pipeline") or {}).get("config_files"))}


@dataclass
class RepositoryResult:
    output_dir: Path
    outcomes: list[ModelOutcome] = field(default_factory=list)
    time_budget_s: float | None = None
    wall_s: float = 0.0
    interrupted: bool = False
    files: list[Path] = field(default_factory=list)


class RepositoryReporter(Reporter):
    """A repository run's reporter: told when each model starts and ends, besides each model's events."""

    def model_start(self, index: int, total: int, model: str, budget_s: float | None, eta_s: float | None) -> None:
        ...

    def model_done(self, outcome: ModelOutcome) -> None:
        ...


def repository_models(repository: Path, names: list[str] | None) -> list[str]:
    """The models to tune, in name order: ``names`` (each checked), or every model directory."""
    if not repository.is_dir():
        raise AnalyzeError(f"{repository} is not a directory (give the model repository)")
    present = sorted(p.name for p in model_dirs(repository))
    if not names:
        if not present:
            raise AnalyzeError(f"{repository} holds no model directory")
        return present
    unknown = [n for n in names if n not in present]
    if unknown:
        raise AnalyzeError(f"--models: {', '.join(unknown)} not in {repository} (models there: "
                           f"{', '.join(present) or 'none'})")
    return sorted(dict.fromkeys(names))


def plan_models(repository: Path, models: list[str]) -> tuple[list[str], list[ModelOutcome]]:
    """The models a repository run tunes, in order, and those it skips with the reason: a model that
    does not load, and a pipeline's step (tuned together with the pipeline's other steps)."""
    tunable: list[str] = []
    skipped: list[ModelOutcome] = []
    within: dict[str, list[str]] = {}  # a composing model -> the pipelines of this run that tune it
    for model in models:
        try:
            if pipeline_kind(repository, model):
                for step in step_names(repository, model):
                    within.setdefault(step, []).append(model)
            else:
                load_model_config(repository, model)
            tunable.append(model)
        except AnalyzeError as exc:
            skipped.append(ModelOutcome(model, skipped=str(exc)))
    for model in [m for m in tunable if m in within]:
        tunable.remove(model)
        places = ", ".join(f"'{p}' (its config: {p}/{model}/config.pbtxt)" for p in within[model])
        skipped.append(ModelOutcome(model, skipped=f"tuned together with the other steps of pipeline {places}"))
    return tunable, skipped


def begin_run(options: AnalyzeOptions, repository: Path, models: list[str]) \
        -> tuple[RepositoryResult, list[str], float, float | None]:
    """A repository run's start, one machine or Ray: its output directory made, its result with the
    skipped models listed, the models to tune, the start (time.monotonic()) and the budget's deadline."""
    options.output_dir.mkdir(parents=True, exist_ok=True)
    run = RepositoryResult(options.output_dir, time_budget_s=options.time_budget_s)
    clock = time.monotonic()
    deadline = clock + options.time_budget_s if options.time_budget_s else None
    tunable, skipped = plan_models(repository, models)
    run.outcomes += skipped
    return run, tunable, clock, deadline


def run_repository(options: AnalyzeOptions, models: list[str], reporter: RepositoryReporter | None = None) \
        -> RepositoryResult:
    """Tune ``models`` one after the other into ``options.output_dir / <model>``, sharing
    ``options.time_budget_s`` (None: no limit), then write the repository's summary."""
    reporter = reporter or RepositoryReporter()
    repository = options.repository.resolve()
    out = options.output_dir
    run, tunable, clock, deadline = begin_run(options, repository, models)
    try:
        for index, model in enumerate(tunable):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            share = None if left is None else left / (len(tunable) - index)
            eta = None if left is None else left
            reporter.model_start(index + 1, len(tunable), model, share, eta)
            outcome = ModelOutcome(model, share)
            started = time.monotonic()
            try:
                outcome.result = run_analyze(replace(options, model=model, output_dir=out / model,
                                                     time_budget_s=share), reporter)
            except (AnalyzeError, PerfError) as exc:
                outcome.skipped = f"failed: {exc}"
            outcome.wall_s = time.monotonic() - started
            run.outcomes.append(outcome)
            reporter.model_done(outcome)
            if outcome.result is not None and outcome.result.interrupted and \
                    not outcome.result.meta.get("out_of_time"):
                run.interrupted = True  # Ctrl-C: the models after this one wait for --resume
                break
    except KeyboardInterrupt:
        run.interrupted = True
    run.wall_s = time.monotonic() - clock
    run.outcomes.sort(key=lambda o: o.model)
    run.files = write_repository_report(run, repository)
    return run


def write_repository_report(run: RepositoryResult, repository: Path) -> list[Path]:
    entries = [o.as_dict() for o in run.outcomes]
    hardware = {o.result.meta["hardware"]["id"]: describe(o.result.meta["hardware"]) for o in run.outcomes
                if o.result is not None and o.result.meta.get("hardware")}
    document = {"repository": str(repository), "time_budget_s": _round(run.time_budget_s),
                "wall_s": round(run.wall_s, 1), "interrupted": run.interrupted, "models": entries,
                "hardware": hardware}
    summary = run.output_dir / "repository.json"
    summary.write_text(json.dumps(document, indent=2) + "\n")
    report = run.output_dir / "repository.md"
    report.write_text(_markdown(document))
    return [summary, report]


def _markdown(document: dict) -> str:
    budget = f", time budget {document['time_budget_s']:.0f} s" if document["time_budget_s"] else ""
    lines = [f"# analyze: {document['repository']}", "",
             f"{len(document['models'])} models, {document['wall_s']:.0f} s{budget}"
             + (" (interrupted: run again with --resume)" if document["interrupted"] else "") + ".", "",
             "| model | chosen | throughput (infer/s) | vs default | p99 ms | instances | configs measured | "
             "time s | report |", "|---|---|---|---|---|---|---|---|---|"]
    for entry in document["models"]:
        if "skipped" in entry:
            lines.append(f"| {entry['model']} | skipped: {entry['skipped'].splitlines()[0]} | | | | | | "
                         f"{entry['wall_s']:.0f} | |")
            continue
        chosen, default = entry["chosen"], entry["default"]
        if chosen is None:
            lines.append(f"| {entry['model']} | no config met the constraints | | | | | "
                         f"{entry['configs_measured']} of {entry['configs_total']} | {entry['wall_s']:.0f} | |")
            continue
        gain = entry["throughput_gain"]
        versus = f"{gain:+.0%} ({default['config_id']}: {default['throughput']:,.0f})" if gain is not None else "-"
        lines.append(
            f"| {entry['model']} | {chosen['config_id']} @ {_at(chosen)} | {chosen['throughput']:,.1f} | "
            f"{versus} | {chosen['p99_ms']:.2f} | {chosen['instances']} {chosen['instance_kind']} | "
            f"{entry['configs_measured']} of {entry['configs_total']}"
            f"{' (time budget)' if entry['out_of_time'] else ''} | {entry['wall_s']:.0f} | "
            f"[{entry['output_dir']}/report.html]({entry['output_dir']}/report.html) |")
    hardware = document.get("hardware") or {}
    if len(hardware) == 1:
        lines += ["", f"Measured on {next(iter(hardware.values()))}."]
    elif hardware:  # a --ray run over nodes of different hardware: each model's numbers hold for its own
        lines += ["", "Measured on different hardware; each model's numbers hold for its own:", ""]
        lines += [f"- {e['model']}: {hardware[e['hardware']]}" for e in document["models"] if e.get("hardware")]
    margins = [f"- {e['model']}: {e['margin']}" for e in document["models"] if e.get("margin")]
    if margins:
        lines += ["", "How sure each choice is (the final round, head to head):", "", *margins]
    return "\n".join(lines) + "\n"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _at(point: dict) -> str:
    """Where a config was measured, shortly: the concurrency, or the (mean) request rate."""
    load = point.get("load") or ""
    return load.removeprefix("concurrency ") if load.startswith("concurrency ") else load or str(point["concurrency"])
