"""perf_analyzer's real input data: a JSON file (``data``, optional ``validation_data``) or a directory
holding one raw file per input, read into batch-1 samples checked against the model."""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonctl.perf.client import ModelInfo, TensorSpec
from tritonctl.perf.options import PerfError
from tritonctl.repo_schema.datatypes import DATATYPES

_NUMPY_TYPES = {t.wire: t.numpy for t in DATATYPES if t.wire not in ("BF16", "BYTES")}


def numpy_dtype(datatype: str) -> Any:
    """The numpy dtype perf holds a datatype's values in, None for BYTES (and unknown names). BF16:
    ml_dtypes' bfloat16, as tritonclient takes it (numpy has none): its values, its 2-byte words."""
    import numpy as np

    if datatype == "BF16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NUMPY_TYPES[datatype]) if datatype in _NUMPY_TYPES else None

NON_TENSOR_KEYS = {"model"}
FORMAT_HINT = ('expected {"data": [{"INPUT0": [...], "INPUT1": {"content": [...], "shape": [...]}}, ...]} '
               'as perf_analyzer reads it')


@dataclass
class Sample:
    """One batch-1 step: input arrays (no batch dimension) and the outputs expected for them."""

    inputs: dict[str, Any]
    expected: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataSet:
    """Steps in streams: a sequence model plays each stream as one sequence; other models use all
    steps of all streams in turn."""

    streams: list[list[Sample]]

    @property
    def samples(self) -> list[Sample]:
        return [sample for stream in self.streams for sample in stream]


def model_dims(info: ModelInfo, tensor: TensorSpec) -> tuple[int, ...]:
    """The tensor's dims without the batch dimension."""
    return tensor.shape[1:] if info.max_batch_size else tensor.shape


def read_data(paths: list[Path], info: ModelInfo, shapes: dict[str, tuple[int, ...]]) -> DataSet:
    """``shapes``: the batch-1 dims of each input from ``--shape`` or the model (absent where still variable).
    Several JSON files are read as perf_analyzer reads a repeated --input-data: entries are appended to
    the one stream, or streams to the streams, and every file must use the same layout."""
    if len(paths) == 1 and paths[0].is_dir():
        return _read_directory(paths[0], info, shapes)
    for path in paths:
        if path.is_dir():
            raise PerfError(f"--input-data {path}: a directory of raw files is one data set; several "
                            "--input-data take JSON files only")
    streams: list[list[Sample]] = []
    streamed_by: Path | None = None
    for path in paths:
        data, streamed = _read_json(path, info, shapes)
        if streams and streamed != (streamed_by is not None):
            first = streamed_by or paths[0]
            raise PerfError(f"--input-data {path}: its \"data\" is {'streams' if streamed else 'entries'} but "
                            f"that of {first} is {'entries' if streamed else 'streams'}; files read together "
                            "must use the same layout")
        if streamed:
            streamed_by = streamed_by or path
            streams.extend(data.streams)
        elif streams:
            streams[0].extend(data.streams[0])
        else:
            streams = data.streams
    return DataSet(streams)


def _load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerfError(f"--input-data {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfError(f"--input-data {path}: cannot read it as UTF-8 text "
                        f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise PerfError(f"--input-data {path}: nested too deeply to read; {FORMAT_HINT}") from None
    except ValueError as exc:
        raise PerfError(f"--input-data {path}: not valid JSON ({exc}); {FORMAT_HINT}") from None


def _read_json(path: Path, info: ModelInfo, shapes: dict[str, tuple[int, ...]]) -> tuple[DataSet, bool]:
    """The file's data set, and whether its ``data`` lists streams."""
    document = _load_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list) or not document["data"]:
        raise PerfError(f"--input-data {path}: no \"data\" list of entries; {FORMAT_HINT}")
    streams = _as_streams(path, document["data"], "data")
    validation = document.get("validation_data")
    expected_streams = _as_streams(path, validation, "validation_data") if validation is not None else None
    if expected_streams is not None and (isinstance(validation[0], list) != isinstance(document["data"][0], list)
                                         or [len(s) for s in expected_streams] != [len(s) for s in streams]):
        raise PerfError(f"--input-data {path}: \"validation_data\" must have one entry per entry of \"data\" "
                        f"({sum(map(len, expected_streams))} for {sum(map(len, streams))}), in the same layout")
    reader = _TensorReader(path, info)
    result = []
    for s, stream in enumerate(streams):
        samples = []
        for k, entry in enumerate(stream):
            where = _where(s, k, len(streams) > 1 or isinstance(document["data"][0], list))
            sample = Sample(reader.inputs(entry, where, shapes))
            if expected_streams is not None:
                sample.expected = reader.outputs(expected_streams[s][k], where)
            samples.append(sample)
        result.append(samples)
    return DataSet(result), isinstance(document["data"][0], list)


def _as_streams(path: Path, entries: Any, key: str) -> list[list[Any]]:
    if not isinstance(entries, list) or not entries:
        raise PerfError(f"--input-data {path}: \"{key}\" must be a non-empty list; {FORMAT_HINT}")
    if all(isinstance(e, dict) for e in entries):
        return [entries]
    if all(isinstance(e, list) and e and all(isinstance(s, dict) for s in e) for e in entries):
        return entries
    raise PerfError(f"--input-data {path}: \"{key}\" must hold either entries ({{\"INPUT0\": ...}}) or streams "
                    "of entries ([[{...}, {...}], [{...}]]) for a sequence model, not a mix or other values")


def _where(stream: int, step: int, streamed: bool) -> str:
    return f"stream {stream} entry {step}" if streamed else f"entry {step}"


class _TensorReader:
    """Decodes the tensors of one entry against the model's inputs or outputs."""

    def __init__(self, path: Path, info: ModelInfo):
        self.path, self.info = path, info

    def fail(self, where: str, message: str) -> PerfError:
        return PerfError(f"--input-data {self.path}: {where}: {message}")

    def inputs(self, entry: dict, where: str, shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
        self._check_names(entry, where, self.info.inputs, "input")
        arrays = {}
        for tensor in self.info.inputs:
            if tensor.name not in entry:
                if tensor.optional:
                    continue
                names = ", ".join(t.name for t in self.info.inputs if not t.optional)
                raise self.fail(where, f"no data for input '{tensor.name}': every entry needs the model's "
                                       f"required inputs ({names})")
            arrays[tensor.name] = self._tensor(entry[tensor.name], tensor, where, shapes.get(tensor.name))
        return arrays

    def outputs(self, entry: Any, where: str) -> dict[str, Any]:
        if not isinstance(entry, dict):
            raise self.fail(f"validation_data {where}", "expected an object of output tensors")
        self._check_names(entry, f"validation_data {where}", self.info.outputs, "output")
        return {t.name: self._tensor(entry[t.name], t, f"validation_data {where}", None, output=True)
                for t in self.info.outputs if t.name in entry}

    def _check_names(self, entry: dict, where: str, tensors: tuple[TensorSpec, ...], kind: str) -> None:
        known = {t.name for t in tensors}
        for name in entry:
            if name not in known and name not in NON_TENSOR_KEYS:
                raise self.fail(where, f"'{name}' is not an {kind} of model '{self.info.name}' "
                                       f"({kind}s: {', '.join(sorted(known))})")

    def _tensor(self, value: Any, tensor: TensorSpec, where: str, default_dims: tuple[int, ...] | None,
                output: bool = False) -> Any:
        import numpy as np

        label = f"{'output' if output else 'input'} '{tensor.name}'"
        content, dims = self._content_and_shape(value, label, where)
        dims = self._dims(tensor, dims, default_dims, label, where, output)
        if isinstance(content, dict):
            flat = self._from_b64(content, tensor, label, where)
        else:
            flat = self._from_list(content, tensor, label, where)
        if dims is None:
            return flat
        if flat.size != int(np.prod(dims, dtype=np.int64)):
            raise self.fail(where, f"{label} has {flat.size} values, but its shape {list(dims)} needs "
                                   f"{int(np.prod(dims, dtype=np.int64))} (values are listed flat, row-major, "
                                   "for one batch-1 request)")
        return flat.reshape(dims)

    def _content_and_shape(self, value: Any, label: str, where: str) -> tuple[Any, tuple[int, ...] | None]:
        if isinstance(value, list):
            return value, None
        if not isinstance(value, dict):
            raise self.fail(where, f"{label}: expected a list of values, {{\"b64\": ...}} or "
                                   f"{{\"content\": [...], \"shape\": [...]}}, got {json.dumps(value)[:40]}")
        dims = None
        if "shape" in value:
            shape = value["shape"]
            if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in shape):
                raise self.fail(where, f"{label}: \"shape\" must be a list of whole numbers >= 0, got "
                                       f"{json.dumps(shape)[:40]}")
            dims = tuple(shape)
        if "b64" in value:
            return value, dims
        if "content" not in value:
            raise self.fail(where, f"{label}: no \"content\" next to its \"shape\": give the values as "
                                   f"{{\"content\": [...], \"shape\": [...]}} or {{\"b64\": \"...\"}}")
        content = value["content"]
        if not isinstance(content, (list, dict)) or (isinstance(content, dict) and "b64" not in content):
            raise self.fail(where, f"{label}: \"content\" must be a list of values or {{\"b64\": \"...\"}}")
        return content, dims

    def _dims(self, tensor: TensorSpec, given: tuple[int, ...] | None, default: tuple[int, ...] | None,
              label: str, where: str, output: bool) -> tuple[int, ...] | None:
        model = model_dims(self.info, tensor)
        if given is None:
            if output:
                return None if any(d < 0 for d in model) else model
            if default is None:
                raise self.fail(where, f"{label} has variable dims {list(model)}: add \"shape\" to its data "
                                       f"({{\"content\": [...], \"shape\": [...]}}) or give --shape "
                                       f"{tensor.name}:" + ",".join("1" if d < 0 else str(d) for d in model))
            return default
        if len(given) != len(model) or any(m >= 0 and m != g for m, g in zip(model, given)):
            raise self.fail(where, f"{label}: shape {list(given)} does not fit the model's dims {list(model)} "
                                   "(give the shape of one batch-1 request, without the batch dimension)")
        return given

    def _from_list(self, content: list, tensor: TensorSpec, label: str, where: str) -> Any:
        import numpy as np

        values = _flatten(content)
        if tensor.datatype == "BYTES":
            if not all(isinstance(v, str) for v in values):
                raise self.fail(where, f"{label} is BYTES: its values must be JSON strings")
            return np.array([v.encode() for v in values], dtype=object)
        dtype = numpy_dtype(tensor.datatype)
        if dtype is None:
            raise self.fail(where, f"{label}: datatype {tensor.datatype} cannot be read from JSON values")
        _check_kinds(values, dtype, lambda message: self.fail(where, f"{label} is {tensor.datatype}: {message}"))
        try:
            with np.errstate(over="raise"):
                return np.array(values, dtype=dtype)
        except (OverflowError, ValueError, FloatingPointError):
            raise self.fail(where, f"{label} is {tensor.datatype}: a value is out of its range") from None

    def _from_b64(self, content: dict, tensor: TensorSpec, label: str, where: str) -> Any:
        import numpy as np

        encoded = content["b64"]
        if not isinstance(encoded, str):
            raise self.fail(where, f"{label}: the value of \"b64\" must be a base64 string")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise self.fail(where, f"{label}: \"b64\" is not valid base64 ({exc})") from None
        if tensor.datatype == "BYTES":
            return _unpack_strings(raw, lambda message: self.fail(where, f"{label}: {message}"))
        dtype = numpy_dtype(tensor.datatype)
        if dtype is None:
            raise self.fail(where, f"{label}: datatype {tensor.datatype} cannot be read from base64 data")
        dtype = dtype.newbyteorder("<")
        if len(raw) % dtype.itemsize:
            raise self.fail(where, f"{label}: \"b64\" decodes to {len(raw)} bytes, not a whole number of "
                                   f"{tensor.datatype} values ({dtype.itemsize} bytes each)")
        return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))


def _flatten(values: list) -> list:
    """Nested lists, row-major, as one flat list (without recursion: a file may nest deeply)."""
    flat: list = []
    stack = [iter(values)]
    while stack:
        for value in stack[-1]:
            if isinstance(value, list):
                stack.append(iter(value))
                break
            flat.append(value)
        else:
            stack.pop()
    return flat


def _check_kinds(values: list, dtype: Any, fail) -> None:
    if dtype.kind == "b":
        if not all(isinstance(v, bool) for v in values):
            raise fail("its values must be JSON true/false")
        return
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(f"{json.dumps(value)[:40]} is not a number")
        if dtype.kind in "iu" and isinstance(value, float) and not value.is_integer():
            raise fail(f"{value} is not a whole number")


def _unpack_strings(raw: bytes, fail) -> Any:
    """BYTES in perf_analyzer's binary form: each element a 4-byte little-endian length, then its bytes."""
    import numpy as np

    items, offset = [], 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise fail("BYTES data must be elements of a 4-byte little-endian length followed by that many bytes")
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise fail(f"a BYTES element claims {length} bytes, but only {len(raw) - offset} are left; each "
                       "element is a 4-byte little-endian length followed by that many bytes")
        items.append(raw[offset:offset + length])
        offset += length
    return np.array(items, dtype=object)


def _read_directory(path: Path, info: ModelInfo, shapes: dict[str, tuple[int, ...]]) -> DataSet:
    """One file per input, named after it: raw little-endian values, or one string per line for BYTES."""
    known = {t.name for t in info.inputs} | {t.name for t in info.outputs}
    for item in sorted(path.iterdir()):
        if item.name not in known:
            raise PerfError(f"--input-data {path}: file '{item.name}' is not an input or output of model "
                            f"'{info.name}' (inputs: {', '.join(t.name for t in info.inputs)})")
    inputs = {}
    for tensor in info.inputs:
        file = path / tensor.name
        if not file.is_file():
            if tensor.optional:
                continue
            raise PerfError(f"--input-data {path}: no file '{tensor.name}' for input '{tensor.name}' (the "
                            "directory holds one file per input, named after it)")
        inputs[tensor.name] = _read_file(file, info, tensor, shapes.get(tensor.name))
    expected = {t.name: _read_file(path / t.name, info, t, None)
                for t in info.outputs if (path / t.name).is_file()}
    return DataSet([[Sample(inputs, expected)]])


def _read_file(file: Path, info: ModelInfo, tensor: TensorSpec, dims: tuple[int, ...] | None) -> Any:
    import numpy as np

    model = model_dims(info, tensor)
    if dims is None:
        if any(d < 0 for d in model):
            if tensor in info.inputs:
                raise PerfError(f"--input-data {file.parent}: input '{tensor.name}' has variable dims "
                                f"{list(model)}: give them with --shape {tensor.name}:"
                                + ",".join("1" if d < 0 else str(d) for d in model))
            dims = None
        else:
            dims = model
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise PerfError(f"--input-data {file}: cannot read it ({exc.strerror or exc})") from None
    if not raw:
        raise PerfError(f"--input-data {file}: the file is empty; it holds the data of one batch-1 request")
    if tensor.datatype == "BYTES":
        array = np.array(raw.splitlines(), dtype=object)
    else:
        dtype = numpy_dtype(tensor.datatype)
        if dtype is None:
            raise PerfError(f"--input-data {file}: datatype {tensor.datatype} is not supported")
        dtype = dtype.newbyteorder("<")
        expected = None if dims is None else int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        if len(raw) % dtype.itemsize or (expected is not None and len(raw) != expected):
            raise PerfError(f"--input-data {file}: {len(raw)} bytes, but '{tensor.name}' ({tensor.datatype}, "
                            f"shape {list(dims or model)}) needs {expected} for one batch-1 request")
        array = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
    if dims is not None and array.size != int(np.prod(dims, dtype=np.int64)):
        raise PerfError(f"--input-data {file}: {array.size} strings, but '{tensor.name}' (shape {list(dims)}) "
                        f"needs {int(np.prod(dims, dtype=np.int64))}, one per line")
    return array if dims is None else array.reshape(dims)
