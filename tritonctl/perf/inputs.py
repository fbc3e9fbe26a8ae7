"""Request data: random, zero, or perf_analyzer's real data (a JSON file or a directory), shaped from
the model metadata and put together into requests."""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonctl.perf.client import ModelInfo
from tritonctl.perf.input_data import DataSet, Sample, numpy_dtype, read_data
from tritonctl.perf.options import PerfError

GENERATED = ("random", "zero")


@dataclass
class Request:
    """One request's input arrays (batch dimension included) and the outputs expected back, if known."""

    inputs: dict[str, Any]
    expected: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    """Requests used in turn; for a sequence model, one list of requests per data stream."""

    streams: list[list[Request]]

    @property
    def requests(self) -> list[Request]:
        return [request for stream in self.streams for request in stream]


def request_shapes(info: ModelInfo, batch_size: int, shapes: dict[str, tuple[int, ...]],
                   data_gives_shapes: bool = False) -> dict[str, tuple[int, ...]]:
    """The full shape of each input for one request; variable dims come from ``--shape``. With
    ``data_gives_shapes`` (real input data, which may carry a "shape" per tensor) an input still
    variable is left out instead of refused."""
    unknown = sorted(set(shapes) - {t.name for t in info.inputs})
    if unknown:
        known = ", ".join(t.name for t in info.inputs)
        raise PerfError(f"--shape names input '{unknown[0]}', which model '{info.name}' does not have "
                        f"(inputs: {known})")
    if info.max_batch_size == 0 and batch_size > 1:
        raise PerfError(f"-b {batch_size}: model '{info.name}' does not support batching (max_batch_size 0)")
    if info.max_batch_size and batch_size > info.max_batch_size:
        raise PerfError(f"-b {batch_size}: larger than model '{info.name}'s max_batch_size {info.max_batch_size}")
    result: dict[str, tuple[int, ...]] = {}
    for tensor in info.inputs:
        dims = tensor.shape[1:] if info.max_batch_size else tensor.shape
        if tensor.name in shapes:
            given = shapes[tensor.name]
            if len(given) != len(dims) or any(d != -1 and d != g for d, g in zip(dims, given)):
                raise PerfError(f"--shape {tensor.name}:{','.join(map(str, given))} does not fit input "
                                f"'{tensor.name}' dims {list(dims)} (give the dims without the batch dimension)")
            dims = given
        elif any(d < 0 for d in dims):
            if data_gives_shapes:
                continue
            raise PerfError(f"input '{tensor.name}' has variable dims {list(dims)}: give them with "
                            f"--shape {tensor.name}:" + ",".join("1" if d < 0 else str(d) for d in dims))
        result[tensor.name] = ((batch_size,) if info.max_batch_size else ()) + tuple(dims)
    return result


def build_requests(info: ModelInfo, shapes: dict[str, tuple[int, ...]], source: str, batch_size: int,
                   string_length: int = 128, string_data: str | None = None) -> list[dict[str, Any]]:
    """The requests' input arrays (input name -> numpy array), used round-robin by the load generator."""
    return [r.inputs for r in build_workload(info, shapes, source, batch_size, string_length, string_data).requests]


def build_workload(info: ModelInfo, shapes: dict[str, tuple[int, ...]], source: str, batch_size: int,
                   string_length: int = 128, string_data: str | None = None,
                   more_sources: tuple[str, ...] = ()) -> Workload:
    """``shapes`` as ``request_shapes`` gives them; ``more_sources``: further JSON files read after
    ``source``. Real data is batched as perf_analyzer does it: a request of batch size b takes b
    consecutive entries."""
    import numpy as np

    if source in GENERATED:
        rng = np.random.default_rng(0)
        arrays = {t.name: _generated(np, rng, t.datatype, shapes[t.name], source == "zero", string_length,
                                     string_data) for t in info.inputs}
        return Workload([[Request(arrays)]])
    sample_shapes = {name: shape[1:] if info.max_batch_size else shape for name, shape in shapes.items()}
    data = read_data([Path(p) for p in (source, *more_sources)], info, sample_shapes)
    if info.sequence:
        return Workload([[_batch(np, info, [sample], 1) for sample in stream] for stream in data.streams])
    return Workload([_batched_requests(np, info, data, batch_size)])


def _batched_requests(np: Any, info: ModelInfo, data: DataSet, batch_size: int) -> list[Request]:
    samples = data.samples
    count = len(samples) // math.gcd(len(samples), batch_size)
    requests = []
    for index in range(count):
        start = index * batch_size
        requests.append(_batch(np, info, [samples[(start + i) % len(samples)] for i in range(batch_size)],
                               batch_size, start % len(samples)))
    return requests


def _batch(np: Any, info: ModelInfo, samples: list[Sample], batch_size: int, first: int = 0) -> Request:
    """Stack batch-1 samples into one request (or use the one sample as is for a model without batching)."""
    if not info.max_batch_size:
        return Request(dict(samples[0].inputs), dict(samples[0].expected))
    inputs = {name: _stack(np, [s.inputs.get(name) for s in samples], name, first, len(samples))
              for name in samples[0].inputs}
    expected = {}
    if all(s.expected for s in samples):
        expected = {name: _stack(np, [s.expected.get(name) for s in samples], name, first, len(samples))
                    for name in samples[0].expected if all(name in s.expected for s in samples)}
    return Request(inputs, expected)


def _stack(np: Any, arrays: list[Any], name: str, first: int, count: int) -> Any:
    if any(a is None for a in arrays):
        raise PerfError(f"--input-data: input '{name}' is given in some of entries {first}..{first + count - 1} "
                        "but not all; they make one batch, so each must give the same optional inputs")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise PerfError(f"--input-data: entries {first}..{first + count - 1} make one batch but give input "
                        f"'{name}' different shapes ({', '.join(str(list(s)) for s in sorted(shapes))}); tensors "
                        "of one batch must have one shape: use -b 1 or the same shape in consecutive entries")
    return np.stack(arrays)


def _generated(np: Any, rng: Any, datatype: str, shape: tuple[int, ...], zero: bool, string_length: int,
               string_data: str | None) -> Any:
    if datatype == "BYTES":
        return _generated_strings(np, rng, shape, zero, string_length, string_data)
    dtype = numpy_dtype(datatype)
    if dtype is None:
        raise PerfError(f"input datatype {datatype} is not supported for generated data")
    if zero:
        return np.zeros(shape, dtype=dtype)
    if dtype.kind == "f" or datatype == "BF16":
        return rng.random(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 64, shape).astype(dtype)


def _generated_strings(np: Any, rng: Any, shape: tuple[int, ...], zero: bool, string_length: int,
                       string_data: str | None) -> Any:
    """--string-data for every element, else zero-filled or random strings of --string-length characters."""
    count = int(np.prod(shape, dtype=np.int64))
    if string_data is not None:
        values = [string_data.encode()] * count
    elif zero:
        values = [b"0" * string_length] * count
    else:
        alphabet = np.array(list((string.ascii_letters + string.digits).encode()), dtype=np.uint8)
        values = [bytes(alphabet[rng.integers(0, len(alphabet), string_length)]) for _ in range(count)]
    return np.array(values, dtype=object).reshape(shape)
