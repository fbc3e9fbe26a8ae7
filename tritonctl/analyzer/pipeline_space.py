"""A pipeline for ``tritonctl analyze``: an ensemble, or a Python model that calls others through
BLS, whose composing models ("steps") are tuned together for the pipeline's end-to-end objective.

The steps of an ensemble are the models its ``ensemble_scheduling`` names. Triton cannot tell
from a Python model's config which models it calls, so a BLS model names them: ``--composing-models
a,b`` on the command line, or in its config (the name Model Analyzer's option has)::

    parameters { key: "bls_composing_models" value { string_value: "a,b" } }

The joint space is the product of every step's own candidates (the same search-space options
apply to each step); a joint candidate is one candidate per step. The pipeline model itself (the
ensemble, or the BLS model) keeps its config. For an ensemble, step candidates that the ensemble
would refuse (a batching step must accept the ensemble's max_batch_size, ENS13) are dropped with
the validator's reason.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tritonctl.analyzer.search import (AnalyzeError, Candidate, CandidateSet, GpusFor, Knobs, SearchSpace,
                                       build_candidates, load_model_config, read_model_config)

BLS_PARAMETER = "bls_composing_models"
MAX_EXHAUSTIVE = 2000  # the most joint candidates the exhaustive strategy measures


@dataclass(frozen=True)
class PipelineKnobs:
    """The knobs of every step, in the pipeline's step order. The single-model knob names read as
    totals or maxima over the steps (the tables' columns); ``step(name)`` gives one step's knobs."""

    names: tuple[str, ...]
    steps: tuple[Knobs, ...]

    def step(self, name: str) -> Knobs:
        return self.steps[self.names.index(name)]

    def with_step(self, index: int, knobs: Knobs) -> "PipelineKnobs":
        return PipelineKnobs(self.names, self.steps[:index] + (knobs,) + self.steps[index + 1:])

    @property
    def config_id(self) -> str:
        return "+".join(f"{name}:{knobs.config_id}" for name, knobs in zip(self.names, self.steps))

    @property
    def resources(self) -> tuple[int, int, int, int]:
        """Summed over the steps, for tie-breaking: instances first, then batch sizes, delays, preferred sizes."""
        return tuple(sum(parts) for parts in zip(*(k.resources for k in self.steps)))  # type: ignore[return-value]

    @property
    def dynamic_batching(self) -> bool:
        """Every step that can batch has the dynamic batcher on."""
        return all(k.dynamic_batching or k.max_batch_size == 0 for k in self.steps)

    @property
    def max_batch_size(self) -> int:
        return max(k.max_batch_size for k in self.steps)

    @property
    def max_queue_delay_us(self) -> int:
        return max(k.max_queue_delay_us for k in self.steps)

    @property
    def instance_count(self) -> int:
        return sum(k.instance_count for k in self.steps)

    @property
    def instance_kind(self) -> str:
        kinds = list(dict.fromkeys(k.instance_kind for k in self.steps))
        return kinds[0] if len(kinds) == 1 else "mixed"

    @property
    def preferred_batch_size(self) -> int:
        return max(k.preferred_batch_size for k in self.steps)

    @property
    def max_queue_size(self) -> int:
        return max(k.max_queue_size for k in self.steps)

    @property
    def queue_timeout_us(self) -> int:
        return max(k.queue_timeout_us for k in self.steps)

    @classmethod
    def from_dict(cls, record: dict) -> "PipelineKnobs":
        return cls(tuple(record["names"]), tuple(Knobs(**k) for k in record["steps"]))


def knobs_from_record(record: dict) -> Knobs | PipelineKnobs:
    """A checkpoint record's knobs: one model's, or a pipeline's (with ``steps``)."""
    return PipelineKnobs.from_dict(record) if "steps" in record else Knobs(**record)


@dataclass
class PipelineCandidate(Candidate):
    """One candidate per step; applying it loads each step with its config."""

    parts: tuple[Candidate, ...] = ()

    @cached_property
    def config_json(self) -> str:
        return json.dumps({name: part.config_json for name, part in zip(self.knobs.names, self.parts)},
                          sort_keys=True)


@dataclass
class Step:
    """A composing model: its directory, its config as written, and its own candidates."""

    name: str
    model_dir: Path
    config: Any
    candidates: CandidateSet

    @cached_property
    def lookup(self) -> dict[Knobs, Candidate]:
        return {c.knobs: c for c in self.candidates.candidates}


@dataclass
class Pipeline:
    """The pipeline model (an ensemble or a BLS Python model) and its steps."""

    model: str
    kind: str  # "ensemble" or "bls"
    model_dir: Path
    config: Any
    steps: list[Step] = field(default_factory=list)
    fixed: tuple[str, ...] = ()  # ensemble steps left out of --composing-models: loaded with their own configs

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    def describe(self) -> str:
        what = "ensemble" if self.kind == "ensemble" else "Python model calling through BLS"
        return f"{what} '{self.model}' with steps {', '.join(self.names)}"


def composing_from_config(config) -> tuple[str, ...]:
    """The ``bls_composing_models`` parameter of a config, split at commas."""
    if BLS_PARAMETER not in config.parameters:
        return ()
    return tuple(n.strip() for n in config.parameters[BLS_PARAMETER].string_value.split(",") if n.strip())


def pipeline_kind(repository: Path, model: str, composing: tuple[str, ...] = ()) -> str | None:
    """"ensemble" or "bls" when ``model`` is tuned as a pipeline, else None (a single model)."""
    _, config = read_model_config(repository, model)
    if config.platform == "ensemble":
        return "ensemble"
    if config.backend == "python" and (composing or composing_from_config(config)):
        return "bls"
    if composing:
        raise AnalyzeError(f"--composing-models: model '{model}' is neither an ensemble nor a Python model, so it "
                           "calls no other model; leave the option out to tune it on its own")
    return None


def step_names(repository: Path, model: str, composing: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The steps of the pipeline ``model``: an ensemble's (or ``composing``, a subset of them), or the
    models a BLS model calls (``composing``, else its config's ``bls_composing_models``)."""
    _, config = read_model_config(repository, model)
    kind = pipeline_kind(repository, model, composing)
    if kind == "ensemble":
        members = tuple(dict.fromkeys(s.model_name for s in config.ensemble_scheduling.step))
        unknown = [n for n in composing if n not in members]
        if unknown:
            raise AnalyzeError(f"--composing-models: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                               f"a step of ensemble '{model}' (its steps: {', '.join(members)})")
        return tuple(dict.fromkeys(composing)) or members
    if kind == "bls":
        return tuple(dict.fromkeys(composing or composing_from_config(config)))
    raise AnalyzeError(f"model '{model}' is not a pipeline")


def load_pipeline(repository: Path, model: str, composing: tuple[str, ...], space: SearchSpace,
                  gpus_for: GpusFor | None = None) -> Pipeline:
    """The pipeline and every step's candidates (``space`` resolved for each step); ``gpus_for`` as
    in ``read_model_config``."""
    model_dir, config = read_model_config(repository, model)
    kind = pipeline_kind(repository, model, composing)
    names = step_names(repository, model, composing)
    if model in names:
        raise AnalyzeError(f"model '{model}' cannot be a composing model of itself")
    pipeline = Pipeline(model, kind, model_dir, config)
    if kind == "ensemble":
        pipeline.fixed = tuple(n for n in dict.fromkeys(s.model_name for s in config.ensemble_scheduling.step)
                               if n not in names)
    for name in names:
        try:
            step_dir, base = load_model_config(repository, name, gpus_for)
        except AnalyzeError as exc:
            raise AnalyzeError(f"composing model '{name}' of '{model}' cannot be tuned: {exc}") from None
        candidates = build_candidates(step_dir, base, space.resolved(base))
        pipeline.steps.append(Step(name, step_dir, base, candidates))
    if kind == "ensemble":
        for step in pipeline.steps:
            _drop_refused_by_ensemble(repository, pipeline, step)
    return pipeline


def _drop_refused_by_ensemble(repository: Path, pipeline: Pipeline, step: Step) -> None:
    """Drop the step candidates the ensemble refuses. The ensemble's rules look at a step's
    interface and max_batch_size, and the knobs change only the latter: one check per size."""
    verdicts: dict[int, str | None] = {}
    kept = []
    for candidate in step.candidates.candidates:
        size = candidate.knobs.max_batch_size
        if size not in verdicts:
            verdicts[size] = ensemble_error(repository, pipeline.model, step.name, candidate.pbtxt())
        if verdicts[size]:
            step.candidates.dropped.append(f"{step.name} {candidate.config_id}: in ensemble '{pipeline.model}': "
                                           f"{verdicts[size]}")
        else:
            kept.append(candidate)
    if not kept:  # the step keeps its own config, which the ensemble loads with
        kept = [step.candidates.default]
        step.candidates.dropped.append(f"{step.name}: no candidate config fits ensemble '{pipeline.model}', so the "
                                       "step keeps its own config (widen --batch-sizes to tune it)")
    step.candidates.candidates = kept


def ensemble_error(repository: Path, ensemble: str, step: str, pbtxt: str) -> str | None:
    """The first error ``tritonctl validate`` reports for the ensemble with ``step`` configured by ``pbtxt``."""
    from tritonctl.repo_schema.context import ModelContext, RepositoryContext
    from tritonctl.repo_schema.diagnostics import Severity
    from tritonctl.repo_schema.repository import ModelSource, model_dirs
    from tritonctl.repo_schema.validate import check_model

    with tempfile.TemporaryDirectory(prefix="tritonctl-step-") as tmp:
        path = Path(tmp) / "config.pbtxt"
        path.write_text(pbtxt)
        repo = RepositoryContext(repository)
        for model_dir in model_dirs(repository):
            source = ModelSource(model_dir, config_file=path if model_dir.name == step else None)
            repo.models[model_dir.name] = ModelContext(source, repo)
        context = repo.models[ensemble]
        check_model(context)
    errors = [d for d in context.diagnostics if d.severity is Severity.ERROR]
    return f"{errors[0].code} {errors[0].message}" if errors else None


class JointSpace:
    """The joint candidates of a pipeline, made when first asked for (the product can be large)."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self._made: dict[tuple[str, ...], PipelineCandidate] = {}
        defaults = tuple(s.candidates.default for s in pipeline.steps)
        self.default = self.joint(defaults, is_default=True)
        self.set = CandidateSet([], self.default, [d for s in pipeline.steps for d in s.candidates.dropped])

    @property
    def total(self) -> int:
        """Every joint candidate, the default included."""
        count = 1
        for step in self.pipeline.steps:
            count *= len(step.candidates.candidates)
        defaults_in_grid = all(s.candidates.default in s.candidates.candidates for s in self.pipeline.steps)
        return count + (0 if defaults_in_grid else 1)

    def joint(self, parts: tuple[Candidate, ...], is_default: bool = False) -> PipelineCandidate:
        key = tuple(p.config_id for p in parts)
        made = self._made.get(key)
        if made is None:
            knobs = PipelineKnobs(self.pipeline.names, tuple(p.knobs for p in parts))
            default = is_default or all(p.is_default for p in parts)
            made = PipelineCandidate(knobs, None, is_default=default,
                                     config_id="default" if default else knobs.config_id, parts=parts)
            self._made[key] = made
            if not default:
                self.set.candidates.append(made)
        return made

    def at(self, position: PipelineKnobs) -> PipelineCandidate | None:
        """The joint candidate at a grid position (None when a step's knobs are not a candidate of it)."""
        parts = []
        for step, knobs in zip(self.pipeline.steps, position.steps):
            part = step.lookup.get(_normal(knobs))
            if part is None:
                return None
            parts.append(part)
        return self.joint(tuple(parts))

    def every(self) -> list[PipelineCandidate]:
        """Every joint candidate (for the exhaustive strategy)."""
        if self.total > MAX_EXHAUSTIVE:
            raise AnalyzeError(f"the joint space of {self.pipeline.model} has {self.total} candidate configs, too many "
                               f"to measure them all (at most {MAX_EXHAUSTIVE}): use --strategy smart, or narrow "
                               "the space (--batch-sizes, --queue-delays, --instance-counts)")
        for parts in itertools.product(*(s.candidates.candidates for s in self.pipeline.steps)):
            self.joint(tuple(parts))
        return list(self.set.candidates)


def _normal(knobs: Knobs) -> Knobs:
    """A batch of 1 never waits, and a preferred size at or above the max batch size is none."""
    from dataclasses import replace

    if knobs.max_batch_size <= 1:
        return replace(knobs, max_queue_delay_us=0, preferred_batch_size=0)
    if knobs.preferred_batch_size >= knobs.max_batch_size:
        return replace(knobs, preferred_batch_size=0)
    return knobs
