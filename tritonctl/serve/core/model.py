"""One loaded model version: its config, instances, scheduler and statistics, the checks a
request must pass before it is queued, and the execution of a batch of requests."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tritonctl.repo_schema.schema import wire_datatype
from tritonctl.serve.core.backend_api import (AnsweredFailure, BackendLoadError, BackendRegistry, InstanceSpec,
                                              LoadRequest, ModelInstance, RequestBackend, ServerHandle)
from tritonctl.serve.core.cache import ResponseCache, serve_from_cache
from tritonctl.serve.core.classification import classify
from tritonctl.serve.core.errors import ServeError, Status, internal, invalid_arg, unavailable
from tritonctl.serve.core.ragged import RaggedLayout
from tritonctl.serve.core.rate_limiter import Gate, RateLimiter, Slot
from tritonctl.serve.core.responder import ErrorResponse, Responder, is_failure
from tritonctl.serve.core.scheduler import BatchingOptions, DynamicBatchScheduler, Scheduler, drop_stale
from tritonctl.serve.core.sequence_state import keep_states
from tritonctl.serve.core.stats import ModelStats
from tritonctl.serve.core.types import DATATYPE_OF_NUMPY, InferRequest, InferResponse, InferTensor, ModelOutputs
from tritonctl.serve.core.warmup import warm_up


class TensorSpec:
    __slots__ = ("name", "datatype", "dims", "reshape", "optional", "label_file")

    def __init__(self, tensor, batching: bool):
        self.name: str = tensor.name
        self.datatype: str = wire_datatype(tensor.data_type)
        self.dims: list[int] = ([-1] if batching else []) + list(tensor.dims)
        self.reshape: list[int] | None = list(tensor.reshape.shape) if tensor.HasField("reshape") else None
        self.optional: bool = getattr(tensor, "optional", False)
        self.label_file: str = getattr(tensor, "label_filename", "")

    def matches(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.dims) and all(d == -1 or d == s for d, s in zip(self.dims, shape))


def instance_specs(config) -> list[InstanceSpec]:
    return [spec for _, spec, _ in instances_of(config)]


def instance_kind(kind: int) -> str:
    """The kind an instance group's instances run as: KIND_GPU, KIND_MODEL (the model places its
    own tensors, as Triton's KIND_MODEL), else KIND_CPU (KIND_AUTO (0) runs on CPU without a GPU)."""
    return {1: "KIND_GPU", 3: "KIND_MODEL"}.get(kind, "KIND_CPU")


def instances_of(config) -> list[tuple[tuple, InstanceSpec, object]]:
    """Each instance of ``config``: its signature, spec and instance group. The signature is what
    Triton compares in a model update to keep an instance: its kind, device and the rest of its
    group (rate limiter, profiles, host policy), but not the group's name or count."""
    triples = []
    for group in config.instance_group:
        kind = instance_kind(group.kind)
        rest = type(group)()
        rest.CopyFrom(group)
        for name in ("name", "count", "gpus", "kind"):
            rest.ClearField(name)
        settings = rest.SerializeToString(deterministic=True)
        for gpu in (list(group.gpus) or [0]) if kind == "KIND_GPU" else [-1]:
            triples.extend(((kind, gpu, settings), InstanceSpec(f"{group.name}_{i}", kind, gpu), group)
                           for i in range(group.count))
    return triples


def without_instances(config) -> bytes:
    """``config`` less its instance groups, for comparing two configs of a model."""
    rest = type(config)()
    rest.CopyFrom(config)
    rest.ClearField("instance_group")
    return rest.SerializeToString(deterministic=True)


class ModelVersion:
    """A READY model version. Build with ``ModelVersion.load``; ``stop`` drains it."""

    takes_requests = True  # False while every instance is passive

    def __init__(self, config, version: int, model_dir: Path, instances: list[ModelInstance],
                 response_cache: ResponseCache | None = None, passive: frozenset[int] = frozenset(),
                 rate_limiter: RateLimiter | None = None, slots: dict[int, Slot] | None = None):
        """``passive``: id() of the instances of passive instance groups, which the scheduler
        never gives work (Triton's ``passive: true``); ``rate_limiter``: the server's, when it limits
        executions, and ``slots`` the instances' (by id()) there."""
        self._describe(config, version, model_dir, instances)
        self._passive = set(passive)
        self._rate_limiter = rate_limiter
        self._slots: dict[int, Slot] = dict(slots or {})
        instances = self._scheduled(instances)
        self.takes_requests = bool(instances)
        if config.response_cache.enable and not config.HasField("sequence_batching") \
                and not config.model_transaction_policy.decoupled:
            self.response_cache = response_cache  # None when the server has no cache: served uncached
            # Triton publishes the model's cache metrics (all 0 then) even without a server cache
            self.stats.cache_enabled = True
        self.scheduler: Scheduler
        if config.HasField("sequence_batching"):
            self.scheduler = self._sequence_scheduler(config, model_dir, instances)
        else:
            self.scheduler = DynamicBatchScheduler(self.name, BatchingOptions.from_config(config), instances,
                                                   self._run_fresh, self.stats,
                                                   self._gate if rate_limiter is not None else None)

    def _sequence_scheduler(self, config, model_dir: Path, instances: list[ModelInstance]):
        from tritonctl.serve.core.sequence import SequenceScheduler

        try:
            return SequenceScheduler(self.name, config, model_dir, instances, self._run_batch, self.stats)
        except BackendLoadError:
            for instance in self.instances:
                instance.close()
            raise

    def _describe(self, config, version: int, model_dir: Path, instances: list[ModelInstance]) -> None:
        """Everything but the scheduler: tensors, labels, statistics."""
        self.config = config
        self.name: str = config.name
        self.version = version
        self.version_str = str(version)
        self.model_dir = model_dir
        self.max_batch_size: int = config.max_batch_size
        batching = config.max_batch_size > 0
        self.inputs = {t.name: TensorSpec(t, batching) for t in config.input}
        self.outputs = {t.name: TensorSpec(t, batching) for t in config.output}
        self.required_inputs = [n for n, s in self.inputs.items() if not s.optional]
        self.all_outputs = list(self.outputs)
        self.state_outputs = [s.output_name for s in config.sequence_batching.state]  # implicit state
        self.labels = {name: _read_labels(model_dir, spec.label_file) for name, spec in self.outputs.items()
                       if spec.label_file}
        self.instances = instances
        self._signatures: list[tuple] = []  # per instance, as instances_of gives them (set by load)
        self.text_inputs = instances[0].text_inputs() if instances else frozenset()
        self.stats = ModelStats(self.name, self.version_str)
        self.ragged = RaggedLayout(config)
        self.response_cache: ResponseCache | None = None
        self.decoupled: bool = config.model_transaction_policy.decoupled
        self.responder = Responder(self)

    @classmethod
    def load(cls, config, version: int, model_dir: Path, backends: BackendRegistry, host: ServerHandle,
             response_cache: ResponseCache | None = None, rate_limiter: RateLimiter | None = None
             ) -> "ModelVersion":
        """The version with its instances, made by the config's backend in ``backends``;
        ``host``: the server handle the instances get; ``rate_limiter``: the server's, when it
        limits executions (each instance registers with it before it is made)."""
        triples = instances_of(config)
        instances, slots = _create_limited(config, model_dir, version, triples, backends, host, rate_limiter)
        try:
            model_version = cls(config, version, model_dir, instances, response_cache, _passive_ids(instances, triples),
                                rate_limiter, dict(zip(map(id, instances), slots)))
        except BaseException:
            if rate_limiter is not None:
                rate_limiter.unregister(slots)
            raise
        model_version._signatures = [signature for signature, _, _ in triples]
        try:
            warm_up(model_version, instances, model_version._warm)
        except BaseException:
            model_version.stop()
            raise
        return model_version

    def _warm(self, instance: ModelInstance, batch: list[InferRequest]) -> None:
        """Run a warmup batch on ``instance`` at once: no queue, no rate limiter, as in Triton."""
        self._execute(instance, batch, fresh_only=False)

    def _gate(self, instance: ModelInstance) -> Gate | None:
        """The rate limiter's gate for ``instance``, None when it has no slot."""
        slot = self._slots.get(id(instance))
        return None if slot is None else Gate(self._rate_limiter, slot)

    def _scheduled(self, instances: list[ModelInstance]) -> list[ModelInstance]:
        """Those of ``instances`` the scheduler gives work: all but the passive ones."""
        return [instance for instance in instances if id(instance) not in self._passive]

    def _unlimit(self, instances: list[ModelInstance]) -> None:
        """Unregister ``instances`` (removed, or the version stopped) from the rate limiter."""
        slots = [self._slots.pop(id(instance)) for instance in instances if id(instance) in self._slots]
        if self._rate_limiter is not None and slots:
            self._rate_limiter.unregister(slots)

    def can_update_instances(self, config) -> bool:
        """Whether ``config`` differs from this version's config in its instance groups alone, and
        its scheduler (the dynamic or the sequence batcher) takes instances in and out: Triton then
        updates the instances in place."""
        return (hasattr(self.scheduler, "add_instances") and len(self._signatures) == len(self.instances)
                and without_instances(config) == without_instances(self.config))

    def update_instances(self, config, backends: BackendRegistry, host: ServerHandle) -> None:
        """Triton's instance update: the instances whose signature ``config`` still has stay (and
        keep serving throughout); the new ones are created first, then the ones ``config`` drops
        finish their running batch and are finalized. A new instance that fails to load leaves
        the version as it was (BackendLoadError)."""
        spare = list(zip(self._signatures, self.instances))
        kept, wanted = [], []
        for signature, spec, group in instances_of(config):
            match = next((pair for pair in spare if pair[0] == signature), None)
            if match is None:
                wanted.append((signature, spec, group))
            else:
                spare.remove(match)
                kept.append(match)
        added, slots = _create_limited(config, self.model_dir, self.version, wanted, backends, host,
                                       self._rate_limiter)
        try:
            warm_up(self, added, self._warm)
        except BaseException:
            for instance in added:
                instance.close()
            if self._rate_limiter is not None:
                self._rate_limiter.unregister(slots)
            raise
        self._slots.update(zip(map(id, added), slots))
        self._passive |= _passive_ids(added, wanted)
        self.scheduler.add_instances(self._scheduled(added))
        removed = [instance for _, instance in spare]
        self.scheduler.remove_instances(self._scheduled(removed))
        self._passive -= set(map(id, removed))
        self._unlimit(removed)
        for instance in removed:
            instance.close()
        pairs = kept + [(signature, instance) for (signature, _, _), instance in zip(wanted, added)]
        self._signatures = [signature for signature, _ in pairs]
        self.instances = [instance for _, instance in pairs]
        self.takes_requests = bool(self._scheduled(self.instances))
        self.config = config

    # ---- request checks ---------------------------------------------------------------------
    def prepare(self, request: InferRequest) -> None:
        """Check ``request`` against the config (Triton's texts, A.9) and set its batch size."""
        rid = f"[request id: {request.id or '<id_unknown>'}] "
        model = self.name
        if not len(self.required_inputs) <= len(request.inputs) <= len(self.inputs):
            raise self._input_count_error(request, rid)
        for name, tensor in request.inputs.items():
            spec = self.inputs.get(name)
            if spec is None:
                raise invalid_arg(f"unexpected inference input '{name}' for model '{model}'")
            if tensor.datatype != spec.datatype:
                raise invalid_arg(f"{rid}inference input '{name}' data-type is '{tensor.datatype}', but model "
                                  f"'{model}' expects '{spec.datatype}'")
        if any(n not in request.inputs for n in self.required_inputs):
            raise self._input_count_error(request, rid)
        batch = 1
        if self.max_batch_size > 0:
            batch = self._request_rows(request, rid)
            if batch < 1 or batch > self.max_batch_size:
                raise invalid_arg(f"{rid}inference request batch-size must be <= {self.max_batch_size} for "
                                  f"'{model}'" if batch else f"{rid}inference request batch-size must be >= 1 "
                                  f"for '{model}'")
        for name, tensor in request.inputs.items():
            spec = self.inputs[name]
            if not spec.matches(tensor.data.shape):
                note = BATCH_DIMENSION_NOTE if self.max_batch_size > 0 else ""
                raise invalid_arg(f"{rid}unexpected shape for input '{name}' for model '{model}'. Expected "
                                  f"{_dims(spec.dims)}, got {_dims(tensor.data.shape)}. {note}")
        for name in self.text_inputs.intersection(request.inputs):
            _check_text(request.inputs[name].data, name, model, rid)
        if request.requested_outputs is not None:
            for output in request.requested_outputs:
                if output.name not in self.outputs:
                    raise invalid_arg(f"unexpected inference output '{output.name}' for model '{model}'")
        request.batch_size = batch

    def _request_rows(self, request: InferRequest, rid: str) -> int:
        """The batch size of a batching model's request: the first dimension of its inputs, which
        Triton compares in the reverse order of the request's, naming the first that differs."""
        rows = 0
        for name, tensor in reversed(request.inputs.items()):
            first = tensor.data.shape[0] if tensor.data.ndim else 0
            if rows == 0:
                rows = first
            elif first != rows:
                raise invalid_arg(f"{rid}input '{name}' batch size does not match other inputs for '{self.name}'")
        return rows

    def _input_count_error(self, request: InferRequest, rid: str) -> ServeError:
        """Triton's refusal of a request whose inputs are too few or too many, or lack a required
        one; with no input missing, its list of them reads ``]``, as Triton writes it."""
        required, total = len(self.required_inputs), len(self.inputs)
        expected = f"{required} inputs" if required == total else f"number of inputs between {required} and {total}"
        missing = [n for n in self.required_inputs if n not in request.inputs]
        return invalid_arg(
            f"{rid}expected {expected} but got {len(request.inputs)} inputs for model '{self.name}'. Got input(s) "
            f"{_names(request.inputs)}, but missing required input(s) {_names(missing) if missing else ']'}. "
            "Please provide all required input(s).")

    # ---- execution (instance worker thread) ---------------------------------------------------
    def _model_input(self, name: str, arrays: list[np.ndarray], total: int) -> np.ndarray:
        spec = self.inputs.get(name)
        if spec is None:  # a sequence control or state input, in the model's shape already
            return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        if name in self.ragged.inputs:
            data = self.ragged.model_input(arrays)  # 1-D, every request's elements in turn
        else:
            data = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
            if spec.reshape is not None:
                data = data.reshape(([total] if self.max_batch_size > 0 else []) + spec.reshape)
        if spec.datatype == "BYTES":
            data = data.astype(object)
        return data

    def _run_fresh(self, instance: ModelInstance, batch: list[InferRequest]) -> None:
        """The dynamic batcher's: run ``batch`` without the requests that went stale on the way
        from the queue (``scheduler.drop_stale``), looked at the last moment before the backend
        gets them. (A sequence batch keeps its slots: its requests are never left out.)"""
        self._run_batch(instance, batch, fresh_only=True)

    def _run_batch(self, instance: ModelInstance, batch: list[InferRequest], fresh_only: bool = False) -> None:
        """Run ``batch`` on ``instance``, once the rate limiter (when the server has one) lets it.
        (The dynamic batcher's batches, ``fresh_only``, passed its gate before they were taken.)"""
        gate = self._gate(instance) if self._slots and not fresh_only else None
        if gate is None:
            self._execute(instance, batch, fresh_only)
            return
        gate.acquire()
        try:
            self._execute(instance, batch, fresh_only)
        finally:
            gate.release()

    def _execute(self, instance: ModelInstance, batch: list[InferRequest], fresh_only: bool) -> None:
        if isinstance(instance, RequestBackend):
            self._run_requests(instance, batch, fresh_only)
            return
        start = time.monotonic_ns()
        try:
            while True:
                total = sum(r.batch_size for r in batch)
                names = batch[0].inputs.keys()
                inputs = {n: self._model_input(n, [r.inputs[n].data for r in batch], total) for n in names}
                if self.ragged.batch_inputs:
                    inputs.update(self.ragged.batch_input_tensors(batch))
                wanted = self._wanted_outputs(batch)
                wanted = wanted + [n for n in self.state_outputs if n not in wanted]  # never all_outputs itself
                fresh = drop_stale(batch, self.stats) if fresh_only else batch
                if fresh is batch:
                    break
                if not fresh:
                    return
                batch = fresh  # gathered again without the stale ones (rare: only at a deadline)
            computed = time.monotonic_ns()
            self._count_stale(batch, computed)
            produced = instance.execute(inputs, wanted)
            executed = time.monotonic_ns()
            if self.state_outputs:
                keep_states(batch, produced, self.max_batch_size > 0)
            responses = self._split(batch, produced)
        except ServeError as exc:
            self._fail_all(batch, exc, "BACKEND")
            return
        except Exception as exc:  # a model must never take the worker down
            self._fail_all(batch, internal(f"model '{self.name}' failed: {exc}"), "BACKEND")
            return
        end = time.monotonic_ns()
        real = sum(1 for r in batch if not r.padding)  # fillers of idle sequence slots run, uncounted
        self.stats.record_execution(real, total, computed - start, executed - computed, end - executed)
        _report_compute(batch, computed - start, executed - computed, end - executed)
        for request, response in zip(batch, responses):
            if request.padding:
                continue
            self.stats.record_success(end - request.arrival_ns, start - request.queue_start_ns, request.batch_size)
            if request.trace is not None:
                request.trace.computed(request.queue_start_ns, start, computed, executed, end)
            request.finish(response)

    def _count_stale(self, batch: list[InferRequest], now: int) -> None:
        """Count the requests about to run although their client has gone or their queue timeout
        (REJECT) has passed: ``tritonctl_inference_stale_exec_count``."""
        stale = sum(1 for r in batch if r.cancelled or 0 < r.reject_after_ns <= now)
        if stale:
            self.stats.record_stale_executions(stale)

    def _wanted_outputs(self, batch: list[InferRequest]) -> list[str]:
        if any(r.requested_outputs is None for r in batch):
            return self.all_outputs
        names = {o.name for r in batch for o in r.requested_outputs}
        return [n for n in self.all_outputs if n in names]

    def _split(self, batch: list[InferRequest], produced: dict[str, np.ndarray]) -> list[InferResponse]:
        scattered = {n: self.ragged.scatter(n, d, batch) for n, d in produced.items()
                     if n in self.ragged.scatter_outputs}
        responses = []
        offset = 0
        for index, request in enumerate(batch):
            mine = produced
            if self.max_batch_size > 0 and len(batch) > 1:
                mine = {n: d[offset:offset + request.batch_size] for n, d in produced.items()}
            if scattered:
                mine = {**mine, **{n: pieces[index] for n, pieces in scattered.items()}}
            responses.append(self._response(request, mine, strict=True))
            offset += request.batch_size
        return responses

    def _response(self, request: InferRequest, produced: dict[str, np.ndarray], strict: bool) -> InferResponse:
        """The requested outputs of ``produced``. ``strict``: every one must be there (a Python
        model's response may leave some out, as in Triton)."""
        outputs = []
        requested = request.requested_outputs
        selection = [(n, 0) for n in self.all_outputs] if requested is None \
            else [(o.name, o.classification) for o in requested]
        for name, top_n in selection:
            data = produced.get(name)
            if data is None:
                if strict:
                    raise internal(f"model '{self.name}' did not produce output '{name}'")
                continue
            spec = self.outputs[name]
            if spec.reshape is not None and name not in self.ragged.scatter_outputs:
                data = data.reshape(([request.batch_size] if self.max_batch_size > 0 else [])
                                    + [d for d in spec.dims[1 if self.max_batch_size > 0 else 0:]])
            if top_n:
                outputs.append(InferTensor(name, "BYTES", classify(data, top_n, self.max_batch_size > 0,
                                                                   self.labels.get(name))))
            else:
                outputs.append(InferTensor(name, spec.datatype if strict else _datatype(data, spec), data))
        parameters = dict(produced.parameters) if isinstance(produced, ModelOutputs) else {}
        return InferResponse(self.name, self.version_str, request.id, outputs, parameters)

    def _run_requests(self, instance: RequestBackend, batch: list[InferRequest], fresh_only: bool = False) -> None:
        """A backend that answers each request of the batch on its own (Python models). As in
        Triton, an execution counts even when execute() fails, and its compute time counts for
        the requests that succeed, those answered with an error response of the model included."""
        if fresh_only:
            batch = drop_stale(batch, self.stats)
            if not batch:
                return
        start = time.monotonic_ns()
        self._count_stale(batch, start)
        total = sum(r.batch_size for r in batch)
        try:
            results = instance.execute_requests(batch, self.responder.deliver)
            executed = time.monotonic_ns()
            if results is None:  # decoupled: the model answers through its response senders
                self.stats.record_execution(sum(1 for r in batch if not r.padding), total, 0, executed - start, 0)
                _report_compute(batch, 0, executed - start, 0)
                self._release(batch)
                return
            answers = [r if r is None or isinstance(r, ServeError) else self._response(q, r, strict=False)
                       for q, r in zip(batch, results)]
        except AnsweredFailure:
            self.stats.record_execution(0, total, 0, time.monotonic_ns() - start, 0)
            self._release(batch)
            return
        except Exception as exc:
            error = exc if isinstance(exc, ServeError) else internal(f"model '{self.name}' failed: {exc}")
            self.stats.record_execution(0, total, 0, time.monotonic_ns() - start, 0)
            self._fail_all(batch, error, "BACKEND")
            return
        end = time.monotonic_ns()
        succeeded = sum(1 for r, a in zip(batch, answers) if not r.padding and not is_failure(a))
        self.stats.record_execution(succeeded, total, 0, executed - start, end - executed)
        _report_compute(batch, 0, executed - start, end - executed)
        self._release(batch)
        for request, answer in zip(batch, answers):
            if request.padding or answer is None:  # None: answered through its response sender
                continue
            if is_failure(answer):
                self.stats.record_failure(end - request.arrival_ns, "BACKEND")
                request.finish(None, answer)
                continue
            self.stats.record_success(end - request.arrival_ns, start - request.queue_start_ns, request.batch_size)
            if request.trace is not None:
                request.trace.computed(request.queue_start_ns, start, start, executed, end)
            if isinstance(answer, ErrorResponse):
                request.finish(None, answer)
            else:
                request.finish(answer)

    def _release(self, batch: list[InferRequest]) -> None:
        """After execute(): a request the backend released with RESCHEDULE runs again where its
        scheduler runs iterative sequences, and fails where it does not (Triton's text); the
        others end their iterative sequence, if they belong to one."""
        scheduler = self.scheduler
        iterative = getattr(scheduler, "iterative", False)
        for request in batch:
            if request.padding:
                continue
            rescheduled = request.reschedule and not request.done  # a request already answered ends
            request.reschedule = False
            if iterative:
                error = scheduler.released(request, rescheduled)
            elif rescheduled:
                error = internal("Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the "
                                 "model is not configured to handle such a flag. (Model "
                                 f"'{self.name}' reschedules only with sequence_batching {{ iterative_sequence: "
                                 "true }.)")
            else:
                continue
            if error is not None:
                self.stats.record_failure(time.monotonic_ns() - request.arrival_ns, "BACKEND")
                if request.stream is not None and self.decoupled:
                    request.send(None, error, True)
                else:
                    request.finish(None, error)

    def _fail_all(self, batch: list[InferRequest], error: ServeError, reason: str) -> None:
        now = time.monotonic_ns()
        for request in batch:
            if request.padding:
                continue
            self.stats.record_failure(now - request.arrival_ns, reason)
            request.finish(None, error)

    def enqueue(self, request: InferRequest) -> None:
        """Queue ``request``, unless the response cache answers it at once."""
        if not self.takes_requests:
            raise unavailable(f"model '{self.name}' version {self.version} takes no requests: every instance of it "
                              "is passive (instance_group passive: true), and the scheduler gives passive instances "
                              "no work")
        if self.response_cache is not None and serve_from_cache(self.response_cache, self, request):
            return
        self.scheduler.enqueue(request)

    def stop(self, timeout_s: float | None = None) -> None:
        """Finish queued and running requests (up to ``timeout_s``), then release the instances."""
        if not self.scheduler.stop(timeout_s):
            self.scheduler.fail_queued(ServeError(Status.UNAVAILABLE, f"model '{self.name}' was unloaded"))
        self._unlimit(self.instances)
        for instance in self.instances:
            instance.close()


def _passive_ids(instances: list[ModelInstance], triples: list) -> frozenset[int]:
    """id() of those of ``instances`` (made from ``triples``, ``instances_of``) whose group is passive."""
    return frozenset(id(instance) for instance, (_, _, group) in zip(instances, triples) if group.passive)


def _create_limited(config, model_dir: Path, version: int, triples: list, backends: BackendRegistry,
                    host: ServerHandle, rate_limiter: RateLimiter | None) -> tuple[list[ModelInstance], list[Slot]]:
    """The instances of ``triples`` (``instances_of``), each registered with ``rate_limiter`` (when
    there is one) before it is made; its slots. Raises BackendLoadError with neither left over."""
    slots: list[Slot] = []
    try:
        if rate_limiter is not None:
            for _, spec, group in triples:
                slots.append(rate_limiter.register(group.rate_limiter, spec.device_id))
        instances = _create_instances(config, model_dir, version, [spec for _, spec, _ in triples], backends, host)
    except BaseException as exc:
        if slots:
            rate_limiter.unregister(slots)
        if isinstance(exc, ServeError):  # the rate limiter's refusal, with Triton's status words
            raise BackendLoadError(f"Invalid argument: {exc.message}") from None
        raise
    return instances, slots


def _create_instances(config, model_dir: Path, version: int, specs: list[InstanceSpec], backends: BackendRegistry,
                      host: ServerHandle) -> list[ModelInstance]:
    """An instance per spec, by the config's backend; those made are closed if one fails."""
    instances: list[ModelInstance] = []
    try:
        for spec in specs:
            instances.append(backends.create(LoadRequest(config, model_dir, model_dir / str(version), spec, host)))
    except BackendLoadError:
        for instance in instances:
            instance.close()
        raise
    return instances


def _report_compute(batch: list[InferRequest], input_ns: int, infer_ns: int, output_ns: int) -> None:
    """Tell the requests that ask (ensemble steps) the compute time of the execution that ran them."""
    for request in batch:
        if request.compute_sink is not None:
            request.compute_sink(input_ns, infer_ns, output_ns)


def _check_text(array: np.ndarray, name: str, model: str, rid: str) -> None:
    for index, item in enumerate(array.reshape(-1)):
        if isinstance(item, (bytes, bytearray, memoryview)):
            try:
                bytes(item).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise invalid_arg(f"{rid}element {index} of input '{name}' for model '{model}' is not UTF-8 text "
                                  f"({exc.reason} at byte {exc.start}); the model takes BYTES inputs as strings"
                                  ) from None


def _datatype(data: np.ndarray, spec: TensorSpec) -> str:
    """The protocol datatype of an array a model returned: its own, BYTES for text."""
    if data.dtype.kind in "OSU":
        return "BYTES"
    if spec.datatype == "BF16" and data.dtype == np.uint16:
        return "BF16"
    return DATATYPE_OF_NUMPY.get(data.dtype, spec.datatype)


# What Triton adds to a shape refusal of a model that batches (the usual mistake: the batch
# dimension left out of the request's shape).
BATCH_DIMENSION_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to "
    "each input shape. If you want to specify the full shape including the batch dim in your input dims config, "
    "try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size.")


def _names(names) -> str:
    """Triton's list of tensor names: ``['INPUT0','INPUT1']`` (no spaces)."""
    return "[" + ",".join(f"'{name}'" for name in names) + "]"


def _dims(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _read_labels(model_dir: Path, filename: str) -> list[str]:
    try:
        return (model_dir / filename).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
