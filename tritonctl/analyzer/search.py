"""The search space of ``tritonctl analyze`` and the candidate configs it spans.

A candidate is the model's effective config (what the server runs it with) with these knobs
changed: ``max_batch_size``, one ``preferred_batch_size``, ``max_queue_delay_microseconds``, one
instance group's ``count`` and ``kind``, and the dynamic batcher's ``default_queue_policy``
(``max_queue_size``, and ``default_timeout_microseconds`` with ``timeout_action: REJECT``).
Candidates that mean the same thing to the batcher are made once (a batch of 1 never waits, so
every queue delay of ``max_batch_size: 1`` is the same config), and a candidate the validator
rejects is dropped with the reason.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tritonctl.repo_schema.autocomplete import effective_config
from tritonctl.repo_schema.context import ModelContext, RepositoryContext
from tritonctl.repo_schema.diagnostics import Severity
from tritonctl.repo_schema.gpus import detect_gpus
from tritonctl.repo_schema.normalize import core_normalize
from tritonctl.repo_schema.repository import ModelSource
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.validate import check_model, validate_paths
from tritonctl.repo_schema.writer import to_json_dict, to_pbtxt

AUTO = -1  # --preferred-batch-sizes auto: every power of two below each max_batch_size
# backend -> the GPU ids a server gives a model of it (analyzer.engine.model_gpus)
GpusFor = Callable[[str], Sequence[int]]
KIND_NAMES = {"cpu": "KIND_CPU", "gpu": "KIND_GPU", "model": "KIND_MODEL"}


class AnalyzeError(ValueError):
    """A problem the user can fix: a bad option, a model analyze cannot tune, a server it cannot use."""


@dataclass(frozen=True)
class Knobs:
    """The values of the tuned fields; ``preferred_batch_size`` 0 means none (the batcher's default)."""

    max_batch_size: int
    max_queue_delay_us: int = 0
    instance_count: int = 1
    instance_kind: str = "KIND_CPU"
    preferred_batch_size: int = 0
    dynamic_batching: bool = True
    max_queue_size: int = 0  # default_queue_policy.max_queue_size; 0: unbounded
    queue_timeout_us: int = 0  # default_queue_policy.default_timeout_microseconds (REJECT); 0: none

    @property
    def config_id(self) -> str:
        """Short and readable: ``b8-d500-i2-cpu`` (``-p4`` with a preferred size, ``nobatcher`` without one,
        ``-q16`` with a bounded queue, ``-t5000`` with a queue timeout)."""
        kind = self.instance_kind.removeprefix("KIND_").lower()
        batching = f"d{self.max_queue_delay_us}" if self.dynamic_batching else "nobatcher"
        preferred = f"-p{self.preferred_batch_size}" if self.preferred_batch_size else ""
        queue = f"-q{self.max_queue_size}" if self.max_queue_size else ""
        timeout = f"-t{self.queue_timeout_us}" if self.queue_timeout_us else ""
        return f"b{self.max_batch_size}-{batching}-i{self.instance_count}-{kind}{preferred}{queue}{timeout}"

    @property
    def resources(self) -> tuple[int, int, int, int]:
        """What a config costs, for tie-breaking: instances first, then batch size, delay, preferred size."""
        return (self.instance_count, self.max_batch_size, self.max_queue_delay_us, self.preferred_batch_size)


@dataclass(frozen=True)
class SearchSpace:
    """The values of each knob; the candidates are their product (minus equivalent and invalid ones).
    A knob left as None gets its default from the model (``resolved``)."""

    batch_sizes: tuple[int, ...] | None = None
    queue_delays_us: tuple[int, ...] | None = None
    instance_counts: tuple[int, ...] | None = None
    instance_kinds: tuple[str, ...] | None = None
    preferred_batch_sizes: tuple[int, ...] | None = None  # 0 = none, AUTO = powers of two below max_batch_size
    concurrency: tuple[int, ...] | None = None
    max_queue_sizes: tuple[int, ...] | None = None  # 0 = unbounded
    queue_timeouts_us: tuple[int, ...] | None = None  # 0 = no timeout
    # The load: a concurrency sweep (above), a request-rate sweep, or a replayed trace (exactly one).
    request_rates: tuple[float, ...] | None = None
    request_intervals_us: tuple[int, ...] | None = None
    request_intervals_file: str = ""  # where the trace came from, for the report

    @property
    def load_kind(self) -> str:
        """``concurrency``, ``request_rate`` or ``request_intervals``."""
        if self.request_intervals_us:
            return "request_intervals"
        return "request_rate" if self.request_rates else "concurrency"

    @property
    def load_levels(self) -> tuple[float, ...]:
        """The sweep's levels in order: concurrencies, rates, or the trace's mean rate (one level)."""
        if self.request_intervals_us:
            return (len(self.request_intervals_us) * 1e6 / sum(self.request_intervals_us),)
        return tuple(self.request_rates or self.concurrency or ())

    def resolved(self, base) -> "SearchSpace":
        """Every knob filled: powers of two up to 64, delays 0 to 10 ms, the model's instance kind and
        1 to N instances of it, no preferred size, the model's own queue policy, and (unless a request
        rate or a trace is the load) concurrency 1 to 256."""
        loads = [flag for flag, value in (("--concurrency", self.concurrency), ("--request-rate", self.request_rates),
                                          ("--request-intervals", self.request_intervals_us)) if value]
        if len(loads) > 1:
            raise AnalyzeError(f"give one kind of load: {' or '.join(loads)}, not "
                               + ("both" if len(loads) == 2 else "all three"))
        knobs = default_knobs(base)
        kinds = self.instance_kinds or (knobs.instance_kind,)
        return SearchSpace(
            batch_sizes=self.batch_sizes or DEFAULT_BATCH_SIZES,
            queue_delays_us=self.queue_delays_us or DEFAULT_QUEUE_DELAYS_US,
            instance_counts=self.instance_counts or default_instance_counts(kinds[0]),
            instance_kinds=kinds,
            preferred_batch_sizes=self.preferred_batch_sizes or (0,),
            concurrency=None if loads and not self.concurrency else self.concurrency or DEFAULT_CONCURRENCY,
            max_queue_sizes=self.max_queue_sizes or (knobs.max_queue_size,),
            queue_timeouts_us=self.queue_timeouts_us or (knobs.queue_timeout_us,),
            request_rates=self.request_rates, request_intervals_us=self.request_intervals_us,
            request_intervals_file=self.request_intervals_file,
        )

    def describe(self) -> dict[str, Any]:
        preferred = ["auto" if p == AUTO else ("none" if p == 0 else p) for p in self.preferred_batch_sizes or ()]
        return {"max_batch_size": list(self.batch_sizes or ()), "max_queue_delay_us": list(self.queue_delays_us or ()),
                "instance_count": list(self.instance_counts or ()), "instance_kind": list(self.instance_kinds or ()),
                "preferred_batch_size": preferred, "concurrency": list(self.concurrency or ()),
                "max_queue_size": list(self.max_queue_sizes or ()),
                "queue_timeout_us": list(self.queue_timeouts_us or ()),
                "load": self.describe_load()}

    def describe_load(self) -> dict[str, Any]:
        """The load each candidate is measured under, for the summary and the checkpoint."""
        if self.request_intervals_us:
            intervals = self.request_intervals_us
            return {"kind": "request_intervals", "file": self.request_intervals_file, "count": len(intervals),
                    "total_us": sum(intervals), "mean_rate_per_s": round(self.load_levels[0], 6)}
        if self.request_rates:
            return {"kind": "request_rate", "request_rates": list(self.request_rates)}
        return {"kind": "concurrency", "concurrency": list(self.concurrency or ())}


@dataclass
class Candidate:
    """One config to measure: the knobs and the full ModelConfig they give."""

    knobs: Knobs
    config: Any  # ModelConfig
    is_default: bool = False
    config_id: str = ""

    def __post_init__(self) -> None:
        self.config_id = self.config_id or self.knobs.config_id

    @cached_property
    def config_json(self) -> str:
        """The config as the repository load API's ``config`` parameter takes it."""
        return json.dumps(to_json_dict(self.config))

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(self.config_json.encode()).hexdigest()[:16]

    def pbtxt(self, header: str | None = None) -> str:
        return to_pbtxt(self.config, header)


@dataclass
class CandidateSet:
    """Every candidate of a space, the default config, and the candidates dropped on the way."""

    candidates: list[Candidate]
    default: Candidate
    dropped: list[str] = field(default_factory=list)  # "config_id: reason"

    @property
    def all(self) -> list[Candidate]:
        """The default first (when it is not one of the candidates), then the grid."""
        if any(c is self.default for c in self.candidates):
            return list(self.candidates)
        return [self.default, *self.candidates]


# --- the model and its candidates ----------------------------------------------------------

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_QUEUE_DELAYS_US = (0, 100, 500, 2000, 10000)
DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def default_instance_counts(kind: str) -> tuple[int, ...]:
    """1 to 4 instances on a GPU; on the CPU no more instances than cores (at least 2)."""
    if kind == "KIND_GPU":
        return (1, 2, 3, 4)
    return tuple(range(1, min(4, max(2, os.cpu_count() or 1)) + 1))


def load_model_config(repository: Path, model: str, gpus_for: GpusFor | None = None) -> tuple[Path, Any]:
    """The model directory and its effective config; refuses what analyze cannot tune."""
    model_dir, config = read_model_config(repository, model, gpus_for)
    if config.platform == "ensemble":
        raise AnalyzeError(f"model '{model}' is an ensemble: analyze tunes it as a pipeline (--model {model}), "
                           "not as a step of another pipeline")
    if config.HasField("sequence_batching"):
        raise AnalyzeError(f"model '{model}' uses the sequence batcher; analyze tunes dynamic batching and "
                           "instances of stateless models only")
    if config.model_transaction_policy.decoupled:
        raise AnalyzeError(f"model '{model}' is decoupled; analyze measures request/response models only "
                           "(measure it with tritonctl perf -i grpc --streaming)")
    return model_dir, config


def read_model_config(repository: Path, model: str, gpus_for: GpusFor | None = None) -> tuple[Path, Any]:
    """The model directory and its effective config, which must load as it is. ``gpus_for``: the GPU
    ids the server gives a model of a backend (the engine's ``model_gpus``); else this machine's."""
    if not repository.is_dir():
        raise AnalyzeError(f"{repository} is not a directory (give the model repository)")
    model_dir = repository / model
    if not model_dir.is_dir():
        known = ", ".join(sorted(p.name for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")))
        raise AnalyzeError(f"model '{model}' is not in {repository} (models there: {known or 'none'})")
    gpus = detect_gpus().ids
    config, diagnostics = effective_config(model_dir, gpus=gpus)
    served_on = list(gpus_for(config.backend)) if config is not None and gpus_for is not None else gpus
    if served_on != gpus:
        config, diagnostics = effective_config(model_dir, gpus=served_on)
    diagnostics += validate_paths([model_dir]).diagnostics
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if config is None or errors:
        first = f"{errors[0].code} {errors[0].message}" if errors else "the config does not parse"
        fix = f": {errors[0].hint}" if errors and errors[0].hint else ""
        raise AnalyzeError(f"model '{model}' does not load as configured ({first}); "
                           f"run `tritonctl validate {model_dir}` and fix it first{fix}")
    return model_dir, config


def default_knobs(config) -> Knobs:
    """The knob values of a config as written (an approximation when it has several instance groups)."""
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    groups = list(config.instance_group)
    batching = config.HasField("dynamic_batching")
    preferred = max(config.dynamic_batching.preferred_batch_size, default=0) if batching else 0
    policy = config.dynamic_batching.default_queue_policy
    rejects = batching and policy.timeout_action == policy.REJECT
    return Knobs(
        max_batch_size=config.max_batch_size,
        max_queue_delay_us=int(config.dynamic_batching.max_queue_delay_microseconds) if batching else 0,
        instance_count=sum(g.count for g in groups) or 1,
        instance_kind=kinds.Name(groups[0].kind) if groups else "KIND_CPU",
        preferred_batch_size=0 if preferred >= config.max_batch_size else preferred,
        dynamic_batching=batching,
        max_queue_size=int(policy.max_queue_size) if batching else 0,
        queue_timeout_us=int(policy.default_timeout_microseconds) if rejects else 0,
    )


def make_config(base, knobs: Knobs, model_dir: Path):
    """The base config with the knobs set, normalized the way the server will normalize it."""
    pb = model_config_pb2()
    config = pb.ModelConfig()
    config.CopyFrom(base)
    config.max_batch_size = knobs.max_batch_size
    if knobs.dynamic_batching:
        batching = config.dynamic_batching
        batching.max_queue_delay_microseconds = knobs.max_queue_delay_us
        del batching.preferred_batch_size[:]
        if knobs.preferred_batch_size:
            batching.preferred_batch_size.append(knobs.preferred_batch_size)
        _set_queue_policy(batching, knobs)
    else:
        config.ClearField("dynamic_batching")
    name = base.instance_group[0].name if base.instance_group else config.name
    del config.instance_group[:]
    group = config.instance_group.add()
    group.name = name
    group.kind = pb.ModelInstanceGroup.Kind.Value(knobs.instance_kind)
    group.count = knobs.instance_count
    return core_normalize(config, model_dir)


def _set_queue_policy(batching, knobs: Knobs) -> None:
    """The knobs' queue policy: a bounded queue and a timeout that rejects; none of either leaves
    the batcher's own policy (a DELAY action, a timeout override) as the base config has it."""
    policy = batching.default_queue_policy
    if knobs.max_queue_size or batching.HasField("default_queue_policy"):
        policy.max_queue_size = knobs.max_queue_size
    if knobs.queue_timeout_us:
        policy.timeout_action = policy.REJECT
        policy.default_timeout_microseconds = knobs.queue_timeout_us
    elif policy.timeout_action == policy.REJECT and batching.HasField("default_queue_policy"):
        policy.default_timeout_microseconds = 0
    if batching.HasField("default_queue_policy") and not policy.ListFields():
        batching.ClearField("default_queue_policy")


def grid_knobs(space: SearchSpace, batching: bool) -> list[Knobs]:
    """Every distinct knob combination of the space, in a stable order."""
    seen: dict[Knobs, None] = {}
    queues = list(itertools.product(space.max_queue_sizes or (0,), space.queue_timeouts_us or (0,)))
    for count, kind in itertools.product(space.instance_counts, space.instance_kinds):
        if not batching:  # max_batch_size 0: no batch dimension, nothing to batch
            seen.setdefault(Knobs(0, 0, count, kind, 0, False))
            continue
        for size, delay in itertools.product(space.batch_sizes, space.queue_delays_us):
            for preferred in _preferred_values(space.preferred_batch_sizes, size):
                for queue, timeout in queues:
                    knobs = Knobs(size, 0 if size == 1 else delay, count, kind, preferred, True, queue, timeout)
                    seen.setdefault(knobs)
    return list(seen)


def _preferred_values(choices: tuple[int, ...], max_batch_size: int) -> list[int]:
    """Preferred sizes below max_batch_size; one at or above it means none (0): the batcher then
    fills batches up to max_batch_size, as it does without a preferred size."""
    values = set()
    for choice in choices:
        if choice == AUTO:
            power = 2
            while power < max_batch_size:
                values.add(power)
                power *= 2
        else:
            values.add(choice if choice < max_batch_size else 0)
    return sorted(values)


def build_candidates(model_dir: Path, base, space: SearchSpace, validate: bool = True) -> CandidateSet:
    """The default config and every candidate of the space that the validator accepts."""
    default = Candidate(default_knobs(base), base, is_default=True, config_id="default")
    candidates: list[Candidate] = []
    dropped: list[str] = []
    batching = base.max_batch_size > 0
    if not batching and any(space.max_queue_sizes or ()) or not batching and any(space.queue_timeouts_us or ()):
        dropped.append("the queue policy (--max-queue-sizes, --queue-timeouts): the model has max_batch_size 0, "
                       "so there is no dynamic batcher whose queue it would bound")
    for knobs in grid_knobs(space, batching):
        candidate = Candidate(knobs, make_config(base, knobs, model_dir))
        if candidate.config_json == default.config_json:
            candidate.is_default = True
            default = candidate
        problem = validation_error(model_dir, candidate.pbtxt()) if validate else None
        if problem:
            dropped.append(f"{candidate.config_id}: {problem}")
            continue
        candidates.append(candidate)
    if not candidates:
        detail = f" ({dropped[0]})" if dropped else ""
        raise AnalyzeError(f"the search space has no valid candidate config{detail}")
    return CandidateSet(candidates, default, dropped)


def validation_error(model_dir: Path, pbtxt: str) -> str | None:
    """The first error ``tritonctl validate`` reports for this config text in ``model_dir``, or None."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tritonctl-candidate-") as tmp:
        path = Path(tmp) / "config.pbtxt"
        path.write_text(pbtxt)
        repo = RepositoryContext(model_dir.parent)
        context = ModelContext(ModelSource(model_dir, config_file=path), repo)
        repo.models[model_dir.name] = context
        check_model(context)
    errors = [d for d in context.diagnostics if d.severity is Severity.ERROR]
    return f"{errors[0].code} {errors[0].message}" if errors else None
