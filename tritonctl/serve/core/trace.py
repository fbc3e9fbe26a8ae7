"""Request tracing as Triton does it in its "triton" trace mode (serving_protocol.md A.1 row 13).

Settings live at two levels, as in Triton's TraceManager: global (the ``--trace-config``
startup values, updatable) and per model (a model's own values for some fields, the global
ones for the rest). A sampled request carries a ``Trace``; the transports and the core capture
timestamps on it (steady-clock nanoseconds, as Triton's) and the transport finishes it once the
response is sent. The file is Triton's: one JSON array of ``{"id", "model_name",
"model_version"}`` objects and one ``{"id", "timestamps": [{"name", "ns"}]}`` object per event,
so Triton's trace summary tool reads it. Traces are buffered and written every
``log_frequency`` traces (to ``FILE.0``, ``FILE.1``, ...), when ``trace_count`` runs out
(indexed too), and at stop (to ``FILE`` itself when no log frequency is set).

With tracing off a request pays one attribute check in its transport
(``TraceManager.enabled``) and ``request.trace is not None`` checks in the core.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from tritonctl.serve.core.errors import invalid_arg
from tritonctl.serve.core.trace_config import CLEAR, FIELDS, LEVEL_NAMES, OFF, TENSORS, TIMESTAMPS, TraceConfig

log = logging.getLogger("tritonctl.serve")


class TraceFile:
    """The trace file: indexed batches (``FILE.N``, each a JSON array) or one array in ``FILE``
    that is closed at stop."""

    def __init__(self, path: str):
        self.path = path
        self._index = 0
        self._handle = None
        self._closed = False
        self._lock = threading.Lock()

    def save(self, traces: list[str], indexed: bool) -> None:
        text = ",".join(traces)
        with self._lock:
            if self._closed:  # a request that ended after the stop: the file is complete already
                log.warning("dropped %d trace(s) that ended after the trace file %s was closed", len(traces),
                            self.path)
                return
            try:
                if indexed:  # written whole, then renamed: a reader never sees half a file
                    target = Path(f"{self.path}.{self._index}")
                    self._index += 1
                    partial = target.with_name(f".{target.name}.partial")
                    partial.write_text(f"[{text}]", encoding="utf-8")
                    os.replace(partial, target)
                    return
                if self._handle is None:
                    self._handle = open(self.path, "w", encoding="utf-8")
                    self._handle.write("[")
                else:
                    self._handle.write(",")
                self._handle.write(text)
                self._handle.flush()
            except OSError as exc:
                log.error("failed writing trace file %s: %s", self.path, exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._handle is not None:
                self._handle.write("]")
                self._handle.close()
                self._handle = None


class TraceSetting:
    """One level's values plus its sampling state. Replaced, never changed, on update (as in
    Triton); the replaced one flushes what it buffered."""

    def __init__(self, values: dict, file: TraceFile, specified: frozenset = frozenset()):
        self.level: int = values["level"]
        self.rate: int = values["rate"]
        self.count: int = values["count"]  # traces left to take; -1: no limit
        self.log_frequency: int = values["log_frequency"]
        self.file = file
        self.specified = specified  # the fields set at this level rather than taken from above
        self.reason = ("tracing is disabled" if self.level == OFF else "sample rate must be non-zero"
                       if self.rate == 0 else "trace file name is not given" if not file.path else "")
        self._lock = threading.Lock()
        self._sampled = self._created = self._collected = 0
        self._pending: list[str] = []
        self._retired = False

    @property
    def valid(self) -> bool:
        return not self.reason and self.count != 0

    def values(self) -> dict:
        return {field: getattr(self, field) for field in FIELDS}

    def to_json(self) -> dict:
        """Triton's trace settings response: every value a string, the level a list."""
        levels = [name for name, bit in LEVEL_NAMES if self.level & bit] or ["OFF"]
        return {"trace_level": levels, "trace_rate": str(self.rate), "trace_count": str(self.count),
                "log_frequency": str(self.log_frequency), "trace_file": self.file.path, "trace_mode": "triton"}

    def sample(self, ids) -> "Trace | None":
        with self._lock:
            if not self.valid:
                return None
            self._sampled += 1
            if self._sampled % self.rate:
                return None
            if self.count > 0:
                self.count -= 1
            self._created += 1
        return Trace(next(ids), self)

    def collect(self, trace_json: str) -> None:
        with self._lock:
            self._pending.append(trace_json)
            self._collected += 1
            ran_out = self.count == 0 and self._collected == self._created
            if not (ran_out or self._retired or (self.log_frequency and len(self._pending) >= self.log_frequency)):
                return
            batch, self._pending = self._pending, []
        self.file.save(batch, indexed=ran_out or self.log_frequency > 0)

    def retire(self) -> None:
        """Write what is buffered; traces still running under this setting are written as they end."""
        with self._lock:
            self._retired = True
            batch, self._pending = self._pending, []
        if batch:
            self.file.save(batch, indexed=self.log_frequency > 0)


class TraceManager:
    """Global and per-model trace settings, and the sampling of requests."""

    def __init__(self, config: TraceConfig | None = None):
        config = config or TraceConfig()
        self.file = TraceFile(config.file)
        defaults = {"level": config.level, "rate": config.rate, "count": config.count,
                    "log_frequency": config.log_frequency}
        self._default = TraceSetting(defaults, self.file)
        self._global = TraceSetting(defaults, self.file)
        self._models: dict[str, TraceSetting] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.enabled = self._global.valid  # the one check a request pays when tracing is off

    def setting(self, model: str = "") -> dict:
        return self._models.get(model, self._global).to_json() if model else self._global.to_json()

    def update(self, model: str, changes: dict) -> dict:
        """Apply ``changes`` (field -> value, or CLEAR to take the value from the level above)
        to ``model``'s setting or, for "", the global one (which the models' unset fields follow)."""
        with self._lock:
            retired = [self._replace(model, changes)]
            if not model:
                retired += [self._replace(name, {}) for name in list(self._models)]
            self._refresh()
        for setting in retired:
            if setting is not None:
                setting.retire()
        return self.setting(model)

    def _replace(self, model: str, changes: dict) -> TraceSetting | None:
        current = self._models.get(model) if model else self._global
        above = self._global if model else self._default
        values, specified = {}, set()
        for field in FIELDS:
            if field in changes and changes[field] is not CLEAR:
                values[field] = changes[field]
            elif field not in changes and current is not None and field in current.specified:
                values[field] = getattr(current, field)  # a count keeps what it has left, as in Triton
            else:
                values[field] = getattr(above, field)
                continue
            specified.add(field)
        if model and not specified:
            return self._models.pop(model, None)  # nothing of its own: the model follows the global setting
        setting = TraceSetting(values, self.file, frozenset(specified))
        if not setting.valid and setting.level != OFF:
            reason = setting.reason or "trace_count is 0, so no trace is left to take; set it to -1 or a positive number"
            raise invalid_arg(f"Attempting to set invalid trace setting :{reason}")
        if model:
            self._models[model] = setting
        else:
            self._global = setting
        return current

    def _refresh(self) -> None:
        self.enabled = self._global.valid or any(s.valid for s in self._models.values())

    def sample(self, model: str) -> "Trace | None":
        setting = self._models.get(model, self._global)
        trace = setting.sample(self._ids)
        if setting.count == 0:
            with self._lock:
                self._refresh()
        return trace

    def close(self) -> None:
        """Write every buffered trace and close the file (server stop)."""
        with self._lock:
            settings = [self._global, *self._models.values()]
            self.enabled = False
        for setting in settings:
            setting.retire()
        self.file.close()


class Trace:
    """The events of one sampled request, written as Triton writes them."""

    __slots__ = ("id", "setting", "model", "events", "tensors", "_timestamps", "_done")

    def __init__(self, trace_id: int, setting: TraceSetting):
        self.id = trace_id
        self.setting = setting
        self.model: dict | None = None
        self.events: list[tuple[str, int]] = []
        self.tensors: list[dict] = []
        self._timestamps = bool(setting.level & TIMESTAMPS)
        self._done = False

    def capture(self, name: str, ns: int | None = None) -> None:
        if self._timestamps:
            self.events.append((name, time.monotonic_ns() if ns is None else ns))

    def started(self, model: str, version: int, request) -> None:
        """The core accepted ``request`` for ``model`` ``version``: REQUEST_START (its arrival)."""
        self.model = {"id": self.id, "model_name": model, "model_version": version}
        if request.id:
            self.model["request_id"] = request.id
        self.capture("REQUEST_START", request.arrival_ns)
        if self.setting.level & TENSORS:
            self.record_tensors("TENSOR_QUEUE_INPUT", request.inputs.values())

    def computed(self, queue_start: int, start: int, input_end: int, output_start: int, end: int) -> None:
        for name, ns in (("QUEUE_START", queue_start), ("COMPUTE_START", start), ("COMPUTE_INPUT_END", input_end),
                         ("COMPUTE_OUTPUT_START", output_start), ("COMPUTE_END", end)):
            self.capture(name, ns)

    def record_tensors(self, activity: str, tensors) -> None:
        if self.setting.level & TENSORS:
            self.tensors.extend({"id": self.id, "activity": activity, "tensor": _tensor_json(t)} for t in tensors)

    def finish(self) -> None:
        """The request is over (response sent, or failed): hand the trace to its setting."""
        if self._done:
            return
        self._done = True
        # as in Triton, the model object comes with the timestamps: a TENSORS-only trace has none
        entries = [self.model] if self.model is not None and self._timestamps else []
        entries += [{"id": self.id, "timestamps": [{"name": name, "ns": ns}]}
                    for name, ns in sorted(self.events, key=lambda event: event[1])]
        entries += self.tensors
        self.setting.collect(",".join(json.dumps(e, separators=(",", ":")) for e in entries))


def _tensor_json(tensor) -> dict:
    """Triton's TENSORS record: the values as text, comma-separated (FP16/BF16 left empty)."""
    data = tensor.data
    if tensor.datatype in ("FP16", "BF16"):
        text = ""
    elif tensor.datatype == "BYTES":
        text = ",".join('"' + (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)) + '"'
                        for v in data.reshape(-1))
    elif data.dtype.kind == "f":
        text = ",".join(format(float(v), "g") for v in data.reshape(-1))
    else:
        text = ",".join(str(int(v)) for v in np.asarray(data).reshape(-1))
    return {"name": tensor.name, "data": text, "shape": ",".join(str(d) for d in data.shape),
            "dtype": tensor.datatype}
