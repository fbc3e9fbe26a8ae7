"""Request data: random, zero, or perf_analyzer-style JSON, shaped from the model metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritonctl.perf.client import ModelInfo
from tritonctl.perf.options import PerfError
from tritonctl.repo_schema.datatypes import DATATYPES

# Protocol datatype -> numpy dtype name of generated data (BF16 has no numpy type to generate).
_NUMPY_TYPES = {t.wire: t.numpy for t in DATATYPES if t.wire != "BF16"}


def request_shapes(info: ModelInfo, batch_size: int, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The full shape of each input for one request; variable dims come from ``--shape``."""
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
            raise PerfError(f"input '{tensor.name}' has variable dims {list(dims)}: give them with "
                            f"--shape {tensor.name}:" + ",".join("1" if d < 0 else str(d) for d in dims))
        result[tensor.name] = ((batch_size,) if info.max_batch_size else ()) + tuple(dims)
    return result


def build_requests(info: ModelInfo, shapes: dict[str, tuple[int, ...]], source: str,
                   batch_size: int) -> list[dict[str, Any]]:
    """A list of requests (input name -> numpy array) used round-robin by the load generator."""
    import numpy as np

    if source in ("random", "zero"):
        rng = np.random.default_rng(0)
        request = {}
        for tensor in info.inputs:
            shape = shapes[tensor.name]
            request[tensor.name] = _generated(np, rng, tensor.datatype, shape, zero=source == "zero")
        return [request]
    return _from_json(np, info, shapes, Path(source), batch_size)


def _generated(np: Any, rng: Any, datatype: str, shape: tuple[int, ...], zero: bool) -> Any:
    if datatype == "BYTES":
        value = b"0" if zero else b"tritonctl"
        return np.full(shape, value, dtype=object)
    dtype = np.dtype(_NUMPY_TYPES.get(datatype, "float32"))
    if datatype not in _NUMPY_TYPES:
        raise PerfError(f"input datatype {datatype} is not supported for generated data")
    if zero:
        return np.zeros(shape, dtype=dtype)
    if dtype.kind == "f":
        return rng.random(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 64, shape).astype(dtype)


def _from_json(np: Any, info: ModelInfo, shapes: dict[str, tuple[int, ...]], path: Path,
               batch_size: int) -> list[dict[str, Any]]:
    """perf_analyzer's format: ``{"data": [{"IN": [..] | {"content": [..], "shape": [..]}}, ...]}``.
    Each entry is one batch-1 sample; it is repeated ``batch_size`` times along the batch dimension."""
    try:
        document = json.loads(path.read_text())
        entries = document["data"]
        if not isinstance(entries, list) or not entries:
            raise KeyError("data")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PerfError(f"{path}: expected JSON like {{\"data\": [{{\"INPUT0\": [...]}}]}} ({exc})") from None
    requests = []
    for index, entry in enumerate(entries):
        request = {}
        for tensor in info.inputs:
            if tensor.name not in entry:
                raise PerfError(f"{path}: entry {index} has no data for input '{tensor.name}'")
            value = entry[tensor.name]
            content = value["content"] if isinstance(value, dict) else value
            sample_shape = shapes[tensor.name][1:] if info.max_batch_size else shapes[tensor.name]
            if isinstance(value, dict) and "shape" in value:
                sample_shape = tuple(int(d) for d in value["shape"])
            dtype = np.dtype(_NUMPY_TYPES.get(tensor.datatype, "float32"))
            if tensor.datatype == "BYTES":
                content = [c.encode() if isinstance(c, str) else c for c in np.ravel(np.array(content, dtype=object))]
            try:
                array = np.array(content, dtype=dtype).reshape(sample_shape)
            except ValueError as exc:
                raise PerfError(f"{path}: entry {index}, input '{tensor.name}': {exc} "
                                f"(expected {int(np.prod(sample_shape))} values for shape {list(sample_shape)})") from None
            if info.max_batch_size:
                array = np.repeat(array[np.newaxis, ...], batch_size, axis=0)
            request[tensor.name] = array
        requests.append(request)
    return requests
