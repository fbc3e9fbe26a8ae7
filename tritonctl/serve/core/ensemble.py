"""Ensembles (serving_protocol.md B.9): each request runs as a dataflow over the composing
models. A step is queued on its model's own scheduler (so ensemble traffic is batched with that
model's other requests) as soon as every tensor its ``input_map`` names exists; when no step
can run any more, the request is answered with the requested ensemble outputs. Steps that no
requested output depends on do not run (``EnsembleVersion.steps_for``). A step's
error fails the request with the step's status and message, prefixed "in ensemble '<name>', ".

As in Triton's ensemble scheduler, an optional ensemble input the request leaves out, and a step
output its model did not produce, exist as placeholders: a step runs without them (its model's
input must be optional), and a requested ensemble output that is one is left out of the
response. A successful request counts as one execution of the ensemble with the request's batch
size, whose compute times are the sums of its steps' (Triton's secondary stats aggregator); a
failed one counts as two failures (reason OTHER), as in Triton. The response carries the
request's sequence_id, sequence_start and sequence_end as parameters, as Triton's does."""

from __future__ import annotations

import logging
import threading
import time
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
        self._describe(config, version, model_dir, [])
        self.steps = [Step(s.model_name, "" if s.model_version < 0 else str(s.model_version),
                           dict(s.input_map), dict(s.output_map)) for s in config.ensemble_scheduling.step]
        for step in self.steps:
            try:
                _not_decoupled(self.name, resolve(step.model, step.version))
            except ServeError as exc:
                raise BackendLoadError(f"ensemble '{self.name}' depends on '{step.model}' which is not available: "
                                       f"{exc.message}") from None
        self._producer = {tensor: i for i, step in enumerate(self.steps) for tensor in step.output_map.values()}
        self._needed: dict[frozenset[str], list[int]] = {}  # requested outputs -> the steps that run
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



class Run:
    """One ensemble request on its way through the steps."""

    def __init__(self, scheduler: EnsembleScheduler, request: InferRequest):
        self.scheduler = scheduler
        self.ensemble = scheduler.ensemble
        self.request = request
        # None: a placeholder (an optional input left out, an output a step did not produce)
        self.tensors: dict[str, np.ndarray | None] = {n: t.data for n, t in request.inputs.items()}
        for name, spec in self.ensemble.inputs.items():
            if spec.optional and name not in self.tensors:
                self.tensors[name] = None
        self.compute = [0, 0, 0]  # the steps' compute input, infer and output times, summed
        wanted = frozenset(o.name for o in request.requested_outputs) if request.requested_outputs is not None \
            else frozenset(self.ensemble.all_outputs)
        self.waiting = self.ensemble.steps_for(wanted)
        self.running = 0
        self.failed = False
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            ready = self._take_ready()
        self._dispatch(ready)

    def _take_ready(self) -> list[int]:
        """Steps whose inputs all exist, removed from ``waiting`` (under the lock)."""
        steps = self.ensemble.steps
        ready = [i for i in self.waiting if all(t in self.tensors for t in steps[i].input_map.values())]
        self.waiting = [i for i in self.waiting if i not in ready]
        self.running += len(ready)
        if not ready and self.running == 0:
            self._answer()
        return ready

    def _dispatch(self, ready: list[int]) -> None:
        for index in ready:
            step = self.ensemble.steps[index]
            if self.failed:
                self._step_done(step, None, None)
                continue
            try:
                if self.request.cancelled:
                    raise ServeError(Status.CANCELLED, "Request was cancelled")
                model = _not_decoupled(self.ensemble.name, self.scheduler.resolve(step.model, step.version))
                sub = InferRequest(
                    step.model, {name: InferTensor(name, model.inputs[name].datatype,
                                                   _fit(self.tensors[tensor], model.inputs[name].dims))
                                 for name, tensor in step.input_map.items()
                                 if name in model.inputs and self.tensors[tensor] is not None},
                    model_version=step.version, id=self.request.id,
                    requested_outputs=[RequestedOutput(n) for n in step.output_map if n in model.outputs],
                    parameters=self.request.parameters, priority=self.request.priority,
                    timeout_us=self.request.timeout_us, sequence_id=self.request.sequence_id,
                    sequence_start=self.request.sequence_start, sequence_end=self.request.sequence_end,
                    complete=lambda response, error, s=step: self._step_done(s, response, error),
                    compute_sink=self._add_compute)
                model.prepare(sub)
                model.enqueue(sub)
            except ServeError as exc:
                self._step_done(step, None, exc)

    def _step_done(self, step: Step, response, error: ServeError | None) -> None:
        with self.lock:
            self.running -= 1
            if self.failed:
                return
            if error is not None:
                self.failed = True
                self._fail(ServeError(error.status, f"in ensemble '{self.ensemble.name}', {error.message}"))
                return
            produced = {tensor.name: tensor.data for tensor in response.outputs}
            for output, tensor in step.output_map.items():
                self.tensors[tensor] = produced.get(output)
            ready = self._take_ready()
        self._dispatch(ready)

    def _add_compute(self, input_ns: int, infer_ns: int, output_ns: int) -> None:
        with self.lock:
            for index, ns in enumerate((input_ns, infer_ns, output_ns)):
                self.compute[index] += ns

    def _answer(self) -> None:
        ensemble, request = self.ensemble, self.request
        wanted = [o.name for o in request.requested_outputs] if request.requested_outputs is not None \
            else ensemble.all_outputs
        if any(name not in self.tensors for name in wanted):
            self._fail(invalid_arg(f"in ensemble '{ensemble.name}', [request id: {request.id or '<id_unknown>'}] "
                                   "unexpected deadlock, at least one output is not set while no more ensemble steps "
                                   "can be made"))
            return
        produced = {name: _fit(self.tensors[name], ensemble.outputs[name].dims) for name in wanted
                    if self.tensors[name] is not None}
        try:
            response = ensemble._response(request, produced, strict=False)
        except ServeError as exc:
            self._fail(exc)
            return
        # Triton's ensemble response carries the request's sequence fields, whatever the steps'
        response.parameters = {"sequence_id": request.sequence_id, "sequence_start": request.sequence_start,
                               "sequence_end": request.sequence_end}
        now = time.monotonic_ns()
        ensemble.stats.record_execution(1, max(request.batch_size, 1), *self.compute)
        ensemble.stats.record_success(now - request.arrival_ns, 0, max(request.batch_size, 1))
        self.scheduler.finished()
        request.finish(response)

    def _fail(self, error: ServeError) -> None:
        """Answer ``error``. Triton counts a failed ensemble request twice, both times with
        reason OTHER: once when it answers the error, once when it releases the request."""
        duration = time.monotonic_ns() - self.request.arrival_ns
        for _ in range(2):
            self.ensemble.stats.record_failure(duration, "OTHER")
        self.scheduler.finished()
        self.request.finish(None, error)


def _not_decoupled(ensemble: str, model: ModelVersion) -> ModelVersion:
    if model.decoupled:
        raise ServeError(Status.UNSUPPORTED, f"model '{model.name}' is decoupled; tritonctl serve does not run "
                                             f"decoupled models as steps of an ensemble such as '{ensemble}'")
    return model


def _fit(data: np.ndarray, dims: list[int]) -> np.ndarray:
    """Add or drop a leading 1 between batching and non-batching models (Triton's ReshapeTensorDims)."""
    if data.ndim == len(dims) + 1 and data.shape[0] == 1:
        return data[0]
    if data.ndim + 1 == len(dims):
        return data[None]
    return data
