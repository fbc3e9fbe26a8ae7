"""Model warmup (``model_warmup`` in a config), as Triton's TritonModelInstance::WarmUp runs it:
before a version serves, each of its instances runs every sample of the config, in order,
``count`` times (once when 0): ``batch_size`` requests of batch 1 in one execution, straight on
the instance (no queue, no rate limiter), counted in the model's statistics as Triton counts
them. A sample with ``batch_size: 0`` is skipped. Its data: zeros (empty strings for BYTES),
random bytes (BYTES: empty strings, as in Triton), or the file ``<model>/warmup/<name>`` (raw
little-endian values; BYTES as 4-byte little-endian lengths, each followed by its bytes, checked
as a request's BYTES input is). An
error in any response fails the load: "failed to run warmup sample '<name>': <error>; ".

The config's samples were checked by ``tritonctl validate``'s WU rules when the model loaded.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonctl.repo_schema.datatypes import BY_NUMBER
from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.tensors import deserialize_bytes
from tritonctl.serve.core.types import InferRequest, InferTensor

log = logging.getLogger("tritonctl.serve")
INVALID = "Invalid argument: "  # the status words Triton puts before a warmup failure


@dataclass(frozen=True)
class Sample:
    name: str
    iterations: int
    batch_size: int
    inputs: dict[str, InferTensor]  # one request's tensors (batch 1 when the model batches)


def samples(config, model_dir: Path) -> list[Sample]:
    """The config's warmup samples with their data; BackendLoadError when a data file falls short."""
    made = []
    batching = config.max_batch_size > 0
    for setting in config.model_warmup:
        if setting.batch_size == 0:
            log.debug("Skipping batch 0 warmup sample '%s'", setting.name)
            continue
        log.debug("Generating warmup sample data for '%s'", setting.name)
        inputs = {key: _tensor(key, value, model_dir, batching, config.name)
                  for key, value in setting.inputs.items()}
        made.append(Sample(setting.name, max(setting.count, 1), setting.batch_size, inputs))
    return made


def _tensor(key: str, value, model_dir: Path, batching: bool, model: str) -> InferTensor:
    datatype = BY_NUMBER.get(value.data_type)
    if datatype is None:
        raise BackendLoadError(f"{INVALID}warmup setting for input '{key}' has no valid data_type")
    shape = ([1] if batching else []) + list(value.dims)
    count = math.prod(shape)
    source = value.WhichOneof("input_data_type")
    try:
        raw = (model_dir / "warmup" / value.input_data_file).read_bytes() if source == "input_data_file" else None
    except OSError as exc:
        raise BackendLoadError(f"{INVALID}failed to read warmup file {value.input_data_file} for input '{key}': "
                               f"{exc.strerror}") from None
    if datatype.size == 0:  # BYTES: the file is checked as a request's input is, in Triton's words
        try:
            data = (deserialize_bytes(raw, count, key, model, request_id="") if raw is not None
                    else np.array([b""] * count, dtype=object)).reshape(shape)
        except ServeError as exc:
            raise BackendLoadError(f"{INVALID}{exc.message}") from None
    else:
        size = count * datatype.size
        if raw is None:
            raw = bytes(size) if source == "zero_data" else np.random.default_rng().bytes(size)
        if len(raw) < size:
            raise BackendLoadError(f"{INVALID}warmup setting expects {size} bytes, but the data provided from "
                                   f"{value.input_data_file}only has {len(raw)} bytes")
        data = np.frombuffer(raw[:size], dtype=np.dtype(datatype.numpy).newbyteorder("<")).reshape(shape).copy()
    return InferTensor(key, datatype.wire, data)


class _Answers:
    """What the requests of one execution answered: their errors, and when the last one ended."""

    def __init__(self, requests: int):
        self.errors: list[str] = []
        self._left = requests
        self._lock = threading.Lock()
        self.done = threading.Event()

    def complete(self, _response, error: ServeError | None) -> None:
        self.stream(_response, error, True)

    def stream(self, _response, error: ServeError | None, final: bool) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(error.message)
            if final:
                self._left -= 1
                if self._left == 0:
                    self.done.set()


def warm_up(version, instances: list, run) -> None:
    """Run ``version``'s warmup samples on each of ``instances``; ``run(instance, requests)``
    executes one batch on one instance. BackendLoadError at the first sample that fails. Each
    execution is waited for until every request has its final response, as Triton waits (a
    decoupled model that never sends the final flag holds its load)."""
    if not version.config.model_warmup:
        return
    for instance in instances:
        for sample in samples(version.config, version.model_dir):  # made anew for each instance, as in Triton
            # The model's inputs are checked as a request's are; a sequence model's control and
            # state inputs, which its sequence batcher would add, go to the model as given.
            given = {k: t for k, t in sample.inputs.items() if k in version.inputs}
            added = {k: t for k, t in sample.inputs.items() if k not in version.inputs}
            for iteration in range(1, sample.iterations + 1):
                log.debug("model '%s' instance %s is running warmup sample '%s' for iteration %d", version.name,
                          instance.instance.name, sample.name, iteration)
                answers = _Answers(sample.batch_size)
                requests = [InferRequest(version.name, dict(given), version.version_str,
                                         complete=answers.complete, stream=answers.stream)
                            for _ in range(sample.batch_size)]
                try:
                    for request in requests:
                        version.prepare(request)
                        request.inputs.update(added)
                except ServeError as exc:
                    raise BackendLoadError(f"{INVALID}failed to run warmup sample '{sample.name}': "
                                           f"{exc.message}; ") from None
                start = time.monotonic_ns()
                for request in requests:
                    request.queue_start_ns = start
                run(instance, requests)
                answers.done.wait()
                if answers.errors:
                    raise BackendLoadError(f"{INVALID}failed to run warmup sample '{sample.name}': "
                                           + "".join(f"{error}; " for error in answers.errors))
