"""Ensembles (serving_protocol.md B.9): each request runs as a dataflow over the composing
models. A step is queued on its model's own scheduler (so ensemble traffic is batched with that
model's other requests) as soon as every tensor its ``input_map`` names exists. Steps that no
requested output depends on do not run (``EnsembleVersion.steps_for``). A step's error fails the
request with the step's status and message, prefixed "in ensemble '<name>', ". An ordinary
ensemble answers once no step can run any more, with the requested ensemble outputs.

Decoupled steps work as in Triton's ensemble scheduler. An ensemble with a decoupled step in its
dataflow is decoupled itself: its config says ``model_transaction_policy { decoupled: true }``,
and it takes only requests that can have several responses (a gRPC stream, BLS
``exec(decoupled=True)``, HTTP generate_stream). Each response of a decoupled step runs the steps
after it once (``Run``); the ensemble sends a response each time its requested outputs of one
such iteration are all made, flagged final when no step is running any more, else the final flag
alone at the end (a decoupled step that sent no response: no response at all, never "unexpected
deadlock"). The first error ends the request; responses that steps still send are dropped.

As in Triton's ensemble scheduler, an optional ensemble input the request leaves out, and a step
output its model did not produce, exist as placeholders: a step runs without them (its model's
input must be optional), and a requested ensemble output that is one is left out of the
response. A successful request counts as one execution of the ensemble with the request's batch
size, whose compute times are the sums of its steps' (Triton's secondary stats aggregator). A
failed one counts two failures (reason OTHER), as in Triton, or one where Triton never releases
the request: a step was still running when the error was answered (``Run._fail``). Every
response carries the request's sequence_id, sequence_start and sequence_end as parameters, as
Triton's does."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

import numpy as np

from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.serve.core.errors import ServeError, Status, invalid_arg, unavailable
from tritonctl.serve.core.model import ModelVersion
from tritonctl.serve.core.types import InferRequest, InferTensor, RequestedOutput

log = logging.getLogger("tritonctl.serve")

Resolve = Callable[[str, str], ModelVersion]  # (model name, version or "") -> a ready version


class EnsembleVersion(ModelVersion):
    """A READY ensemble version: the same request checks as any model, no instances."""

    def __init__(self, config, version: int, model_dir: Path, resolve: Resolve):
        self.steps = [Step(s.model_name, "" if s.model_version < 0 else str(s.model_version),
                           dict(s.input_map), dict(s.output_map)) for s in config.ensemble_scheduling.step]
        models = []
        for step in self.steps:
            try:
                models.append(resolve(step.model, step.version))
            except ServeError as exc:
                raise BackendLoadError(f"ensemble '{config.name}' depends on '{step.model}' which is not available: "
                                       f"{exc.message}") from None
        decoupled = _runs_decoupled([t.name for t in config.input], self.steps, models)
        if config.model_transaction_policy.decoupled != decoupled:  # Triton sets it for every ensemble
            config.model_transaction_policy.decoupled = decoupled
        self._describe(config, version, model_dir, [])
        self._producer = {tensor: i for i, step in enumerate(self.steps) for tensor in step.output_map.values()}
        self._needed: dict[frozenset[str], list[int]] = {}  # requested outputs -> the steps that run
        self._plans: dict[tuple[str, ...], Plan] = {}  # requested outputs, in order -> their Plan
        self.scheduler = EnsembleScheduler(self, resolve)

    def steps_for(self, wanted: frozenset[str]) -> list[int]:
        """The steps a request for the ensemble outputs ``wanted`` runs: a step is pruned once none
        of its outputs is wanted (requested, or consumed by a step that runs), and then the tensors
        only it consumed. Where Triton's own pruning would starve the request (``_tritons_pruning``),
        the request is answered all the same and the log says so, once per set of outputs."""
        needed = self._needed.get(wanted)
        if needed is None:
            consumers = self._consumers()
            # a tensor is ignored when no one wants it: not requested, and no step left consumes it
            ignored = {name for name in self.outputs if name not in wanted and not consumers.get(name)}
            pruned = self._prune(ignored, consumers, wanted)
            needed = self._needed[wanted] = [i for i in range(len(self.steps)) if i not in pruned]
            if self._starves(self._tritons_pruning(wanted), wanted):
                log.warning("ensemble '%s': a request for %s runs here, but Triton answers it with 'unexpected "
                            "deadlock': its pruning drops a step these outputs need (an ensemble output left out "
                            "is dropped even where a step consumes it); ask for that output too to run it on "
                            "Triton", self.name, ", ".join(sorted(wanted)))
        return needed

    def plan_for(self, wanted: tuple[str, ...]) -> "Plan":
        """What every request for the outputs ``wanted`` shares (made once per set of outputs)."""
        plan = self._plans.get(wanted)
        if plan is None:
            steps = self.steps_for(frozenset(wanted))
            consumers: dict[str, list[int]] = {}
            for index in steps:
                for tensor in dict.fromkeys(self.steps[index].input_map.values()):
                    consumers.setdefault(tensor, []).append(index)
            takers = {tensor: len(readers) for tensor, readers in consumers.items()}
            for name in set(wanted):
                takers[name] = takers.get(name, 0) + 1
            plan = self._plans[wanted] = Plan(steps, consumers, takers)
        return plan

    def _consumers(self) -> dict[str, set[int]]:
        consumers: dict[str, set[int]] = {}
        for i, step in enumerate(self.steps):
            for tensor in step.input_map.values():
                consumers.setdefault(tensor, set()).add(i)
        return consumers

    def _prune(self, ignored: set[str], consumers: dict[str, set[int]], wanted: frozenset[str],
               producer_of: Callable[[str], int | None] | None = None) -> set[int]:
        """Steps pruned backwards from the ``ignored`` tensors: a step whose outputs are all ignored
        goes, and a tensor it consumed that no step left consumes is ignored in turn."""
        producer_of = producer_of or self._producer.get
        outputs_left = {i: len(step.output_map) for i, step in enumerate(self.steps)}
        pruned: set[int] = set()
        while ignored:
            newly: set[str] = set()
            for tensor in ignored:
                index = producer_of(tensor)
                if index is None or index in pruned:
                    continue
                outputs_left[index] -= 1
                if outputs_left[index] == 0:
                    pruned.add(index)
                    for source in self.steps[index].input_map.values():
                        consumers[source].discard(index)
                        if not consumers[source] and source not in wanted:
                            newly.add(source)
            ignored = newly
        return pruned

    def _tritons_pruning(self, wanted: frozenset[str]) -> set[int]:
        """The steps Triton 2.51 prunes: every ensemble output left out is ignored, even where a
        step consumes it, and a tensor no step makes (an ensemble input) counts against step 0."""
        ignored = {name for name in self.outputs if name not in wanted}
        return self._prune(ignored, self._consumers(), frozenset(), lambda tensor: self._producer.get(tensor, 0))

    def _starves(self, pruned: set[int], wanted: frozenset[str]) -> bool:
        """Whether running all steps but ``pruned`` leaves a wanted output or a step's input unmade."""
        made = set(self.inputs)
        kept = [step for i, step in enumerate(self.steps) if i not in pruned]
        for step in kept:
            made.update(step.output_map.values())
        needed = set(wanted) | {tensor for step in kept for tensor in step.input_map.values()}
        return not needed <= made

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop accepting and wait for the requests in flight (their steps run on other models)."""
        self.scheduler.stop(timeout_s)


class Plan:
    """The steps a set of requested outputs runs, the steps that read each tensor, and how many
    takers (those steps, and the response for a requested output) each tensor's values have."""

    __slots__ = ("steps", "consumers", "takers")

    def __init__(self, steps: list[int], consumers: dict[str, list[int]], takers: dict[str, int]):
        self.steps = steps
        self.consumers = consumers
        self.takers = takers


class Step:
    __slots__ = ("model", "version", "input_map", "output_map")

    def __init__(self, model: str, version: str, input_map: dict[str, str], output_map: dict[str, str]):
        self.model = model
        self.version = version
        self.input_map = input_map  # composing model input -> ensemble tensor
        self.output_map = output_map  # composing model output -> ensemble tensor


class EnsembleScheduler:
    """Runs ensemble requests; ``stop`` waits for the ones in flight."""

    def __init__(self, ensemble: EnsembleVersion, resolve: Resolve):
        self.ensemble = ensemble
        self.resolve = resolve
        self._cond = threading.Condition()
        self._in_flight = 0
        self._accepting = True

    @property
    def accepting(self) -> bool:
        return self._accepting

    def enqueue(self, request: InferRequest) -> None:
        with self._cond:
            if not self._accepting:
                raise unavailable(f"Server is stopping, scheduler for model '{self.ensemble.name}' has stopped "
                                  "accepting new inference requests")
            self._in_flight += 1
        request.queue_start_ns = time.monotonic_ns()
        self.ensemble.stats.add_pending(1)
        Run(self, request).start()

    def finished(self) -> None:
        self.ensemble.stats.add_pending(-1)
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def stop(self, timeout_s: float | None = None) -> bool:
        with self._cond:
            self._accepting = False
            return self._cond.wait_for(lambda: self._in_flight == 0, timeout_s)

    def hold_in_order(self, request: InferRequest) -> None:
        """Nothing to wait for: an ensemble's requests are answered as their steps finish."""

    def fail_queued(self, error: ServeError) -> None:
        """Nothing is queued here: the steps of the requests in flight queue on their models."""



# Failed ensemble requests that Triton never releases, because a step was still running when the
# error was answered: an ensemble that ran one as a step is never released either.
_UNRELEASED: "weakref.WeakSet[InferRequest]" = weakref.WeakSet()


class Run:
    """One ensemble request on its way through the steps (Triton's EnsembleContext).

    Every tensor holds one value per iteration: an ensemble input has iteration 0, and each
    response of a step adds the next iteration of each of its outputs. A step runs once for each
    iteration at which all its inputs exist, so the steps after a decoupled one run once per
    response. A value is dropped once every step that reads it (and the response, for a requested
    output) has taken it."""

    def __init__(self, scheduler: EnsembleScheduler, request: InferRequest):
        self.scheduler = scheduler
        self.ensemble = ensemble = scheduler.ensemble
        self.request = request
        self.streaming = ensemble.decoupled and request.stream is not None  # a response per iteration
        self.wanted = [o.name for o in request.requested_outputs] if request.requested_outputs is not None \
            else list(ensemble.all_outputs)
        plan = ensemble.plan_for(tuple(self.wanted))
        self.steps, self.consumers, self.takers = plan.steps, plan.consumers, plan.takers  # shared: read only
        # tensor -> iteration -> [value, takers left]; a value None is a placeholder (an optional
        # input left out, an output a step did not produce)
        self.values: dict[str, dict[int, list]] = {}
        self.made: dict[str, int] = {}  # tensor -> iterations made so far
        for name, tensor in request.inputs.items():
            self._add(name, tensor.data)
        for name, spec in ensemble.inputs.items():
            if spec.optional and name not in request.inputs:
                self._add(name, None)
        self.compute = [0, 0, 0]  # the steps' compute input, infer and output times, summed
        self.running = 0  # steps queued whose final response has not come
        self.nested: list[InferRequest] = []  # the requests of steps that are ensembles
        self.failed = False
        self.lock = threading.Lock()

    def start(self) -> None:
        steps = self.ensemble.steps
        with self.lock:
            updated = [(tensor, 0) for tensor in self.values]
            ready = self._ready(updated) + [(i, 0) for i in self.steps if not steps[i].input_map]
            jobs = self._advance(updated, ready)
        self._dispatch(jobs)

    # ---- tensors (under the lock) --------------------------------------------------------
    def _add(self, tensor: str, data: np.ndarray | None) -> int:
        """Store the next iteration of ``tensor``; returns that iteration."""
        iteration = self.made.get(tensor, 0)
        self.made[tensor] = iteration + 1
        takers = self.takers.get(tensor, 0)
        if takers:
            self.values.setdefault(tensor, {})[iteration] = [data, takers]
        return iteration

    def _take(self, tensor: str, iteration: int) -> np.ndarray | None:
        """The value of ``tensor`` at ``iteration``, for one of its takers."""
        slot = self.values[tensor][iteration]
        slot[1] -= 1
        if slot[1] == 0:
            del self.values[tensor][iteration]
        return slot[0]

    def _has(self, tensor: str, iteration: int) -> bool:
        return iteration in self.values.get(tensor, ())

    def _ready(self, updated: list[tuple[str, int]]) -> list[tuple[int, int]]:
        """The (step, iteration) pairs that the tensors just made complete (Triton's GetNextSteps)."""
        steps = self.ensemble.steps
        ready = {(index, iteration) for tensor, iteration in updated for index in self.consumers.get(tensor, ())
                 if all(self._has(t, iteration) for t in steps[index].input_map.values())}
        return sorted(ready)

    def _advance(self, updated: list[tuple[str, int]], ready: list[tuple[int, int]]) -> list:
        """Claim the inputs of the ``ready`` steps, then answer what ``updated`` completes: the
        outputs of an iteration (decoupled), or the request once no step runs (ordinary)."""
        jobs = []
        for index, iteration in ready:
            step = self.ensemble.steps[index]
            inputs = {name: self.values[tensor][iteration][0] for name, tensor in step.input_map.items()}
            for tensor in dict.fromkeys(step.input_map.values()):
                self._take(tensor, iteration)
            jobs.append((step, inputs))
        self.running += len(jobs)
        if self.streaming:
            self._stream(updated)
        elif self.running == 0:
            self._answer()
        return jobs

    # ---- steps ----------------------------------------------------------------------------
    def _dispatch(self, jobs: list) -> None:
        for step, inputs in jobs:
            if self.failed:  # as in Triton, a step made ready before the request failed is not queued
                self._on_response(step, None, None, True)
                continue
            try:
                if self.request.cancelled:
                    raise ServeError(Status.CANCELLED, "Request was cancelled")
                model = self.scheduler.resolve(step.model, step.version)
                sub = self._step_request(step, model, inputs)
                model.prepare(sub)
                if isinstance(model, EnsembleVersion):
                    self.nested.append(sub)
                model.enqueue(sub)
            except ServeError as exc:
                self._on_response(step, None, exc, True)

    def _step_request(self, step: Step, model: ModelVersion, inputs: dict) -> InferRequest:
        """The step's request, with the ensemble request's id, parameters, priority, timeout and
        sequence fields; each response of a decoupled model comes back on its own."""
        request = self.request
        tensors = {name: InferTensor(name, model.inputs[name].datatype, _fit(data, model.inputs[name].dims))
                   for name, data in inputs.items() if name in model.inputs and data is not None}
        stream = (lambda response, error, final: self._on_response(step, response, error, final)) \
            if model.decoupled else None
        return InferRequest(
            step.model, tensors, model_version=step.version, id=request.id,
            requested_outputs=[RequestedOutput(n) for n in step.output_map if n in model.outputs],
            parameters=request.parameters, priority=request.priority, timeout_us=request.timeout_us,
            sequence_id=request.sequence_id, sequence_start=request.sequence_start,
            sequence_end=request.sequence_end,
            complete=lambda response, error: self._on_response(step, response, error, True), stream=stream,
            compute_sink=self._add_compute)

    def _on_response(self, step: Step, response, error: ServeError | None, final: bool) -> None:
        """One response of a step (``final``: its last), its error, or its final flag alone."""
        with self.lock:
            if final:
                self.running -= 1
            if self.failed:
                return
            if error is not None:
                self._fail(ServeError(error.status, f"in ensemble '{self.ensemble.name}', {error.message}"))
                return
            updated = []
            if response is not None:  # its outputs are the next iteration of their tensors
                produced = {tensor.name: tensor.data for tensor in response.outputs}
                updated = [(tensor, self._add(tensor, produced.get(output)))
                           for output, tensor in step.output_map.items()]
            jobs = self._advance(updated, self._ready(updated))
        self._dispatch(jobs)

    def _add_compute(self, input_ns: int, infer_ns: int, output_ns: int) -> None:
        with self.lock:
            for index, ns in enumerate((input_ns, infer_ns, output_ns)):
                self.compute[index] += ns

    # ---- answers (under the lock) ---------------------------------------------------------
    def _stream(self, updated: list[tuple[str, int]]) -> None:
        """Send the requested outputs of an iteration ``updated`` completes, flagged final when no
        step runs any more; with nothing to send, the final flag alone then (Triton's
        CheckAndSetEnsembleOutput and FinishEnsemble: a decoupled ensemble never deadlocks)."""
        iteration = None
        for tensor, made in sorted(updated):  # as in Triton, the last requested output made decides
            if tensor in self.wanted:
                iteration = made if all(self._has(name, made) for name in self.wanted) else None
        final = self.running == 0
        response = None
        if iteration is not None:
            try:
                response = self._response(iteration)
            except ServeError as exc:
                self._fail(exc)
                return
        if final:
            self._succeeded()
        if response is not None or final:
            self.request.send(response, None, final)

    def _answer(self) -> None:
        ensemble, request = self.ensemble, self.request
        if not all(self._has(name, 0) for name in self.wanted):
            self._fail(invalid_arg(f"in ensemble '{ensemble.name}', [request id: {request.id or '<id_unknown>'}] "
                                   "unexpected deadlock, at least one output is not set while no more ensemble steps "
                                   "can be made"))
            return
        try:
            response = self._response(0)
        except ServeError as exc:
            self._fail(exc)
            return
        self._succeeded()
        request.finish(response)

    def _response(self, iteration: int):
        """The response of the requested outputs at ``iteration`` (a placeholder is left out)."""
        ensemble, request = self.ensemble, self.request
        produced = {}
        for name in dict.fromkeys(self.wanted):
            data = self._take(name, iteration)
            if data is not None:
                produced[name] = _fit(data, ensemble.outputs[name].dims)
        response = ensemble._response(request, produced, strict=False)
        # Triton's ensemble response carries the request's sequence fields, whatever the steps'
        response.parameters = {"sequence_id": request.sequence_id, "sequence_start": request.sequence_start,
                               "sequence_end": request.sequence_end}
        return response

    def _succeeded(self) -> None:
        """Count the request as one execution of the ensemble (its steps' compute times summed)."""
        request, stats = self.request, self.ensemble.stats
        batch_size = max(request.batch_size, 1)
        stats.record_execution(1, batch_size, *self.compute)
        stats.record_success(time.monotonic_ns() - request.arrival_ns, 0, batch_size)
        self.scheduler.finished()

    def _fail(self, error: ServeError) -> None:
        """Answer ``error``. Triton counts a failure (reason OTHER) when it answers the error and a
        second one when it releases the request, which it never does where a step was still
        running then, or where a step's own ensemble request was never released."""
        self.failed = True
        unreleased = self.running > 0 or any(sub in _UNRELEASED for sub in self.nested)
        if unreleased:
            _UNRELEASED.add(self.request)
        duration = time.monotonic_ns() - self.request.arrival_ns
        for _ in range(1 if unreleased else 2):
            self.ensemble.stats.record_failure(duration, "OTHER")
        self.scheduler.finished()
        if self.streaming:
            self.request.send(None, error, True)
        else:
            self.request.finish(None, error)


def _runs_decoupled(inputs: list[str], steps: list[Step], models: list[ModelVersion]) -> bool:
    """Whether a decoupled model runs in the dataflow from the ensemble ``inputs``: Triton then
    makes the ensemble decoupled (its validation walks the same graph)."""
    made = set(inputs)
    waiting = list(range(len(steps)))
    while True:
        fed = [i for i in waiting if all(t in made for t in steps[i].input_map.values())]
        if not fed:
            return False
        if any(models[i].decoupled for i in fed):
            return True
        for i in fed:
            made.update(steps[i].output_map.values())
        waiting = [i for i in waiting if i not in fed]


def _fit(data: np.ndarray, dims: list[int]) -> np.ndarray:
    """Add or drop a leading 1 between batching and non-batching models (Triton's ReshapeTensorDims)."""
    if data.ndim == len(dims) + 1 and data.shape[0] == 1:
        return data[0]
    if data.ndim + 1 == len(dims):
        return data[None]
    return data
