"""What the sequence batcher gives a model beside a request's own inputs: the control tensors
(``CONTROL_SEQUENCE_START`` / ``_END`` / ``_READY`` / ``_CORRID``) and each sequence's implicit
state, as Triton's sequence scheduler builds them (``sequence_batch_scheduler.cc``,
``sequence_state.cc``; triton_config_rules.md 2.6-2.7).

Every tensor here has the shape one request contributes to a batch: ``[1, ...]`` when the model
batches (``max_batch_size > 0``), the bare dims otherwise. The batch is their concatenation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritonctl.repo_schema.schema import data_type_name, data_type_value, wire_datatype
from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.serve.core.errors import ServeError, invalid_arg
from tritonctl.serve.core.tensors import deserialize_bytes
from tritonctl.serve.core.types import NUMPY_DTYPE, InferRequest, InferTensor

START, READY, END, CORRID = 0, 1, 2, 3  # ModelSequenceBatching.Control.Kind
KIND_NAMES = {START: "CONTROL_SEQUENCE_START", READY: "CONTROL_SEQUENCE_READY", END: "CONTROL_SEQUENCE_END",
              CORRID: "CONTROL_SEQUENCE_CORRID"}
VALUE_LISTS = (("int32_false_true", "TYPE_INT32"), ("fp32_false_true", "TYPE_FP32"), ("bool_false_true", "TYPE_BOOL"))
CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")


@dataclass(frozen=True)
class Control:
    """One control the model receives: a flag (START, END, READY) with its false / true values,
    or the correlation id (CORRID, ``false``/``true`` unused)."""

    name: str
    kind: int
    config_type: str  # TYPE_INT32, TYPE_FP32, TYPE_BOOL; CORRID: its data_type
    false: Any = None
    true: Any = None

    @property
    def datatype(self) -> str:
        return wire_datatype(data_type_value(self.config_type))


def read_controls(config) -> list[Control]:
    """The config's control inputs. Raises BackendLoadError with Triton's texts for a control that
    ``tritonctl validate`` would have refused (reachable through a repository-API config override)."""
    controls = []
    for control_input in config.sequence_batching.control_input:
        for control in control_input.control:
            kind_name = KIND_NAMES.get(control.kind, str(control.kind))
            lists = [(name, config_type) for name, config_type in VALUE_LISTS if len(getattr(control, name))]
            if control.kind == CORRID:
                config_type = data_type_name(control.data_type)
                if lists or config_type not in CORRID_TYPES:
                    raise BackendLoadError(
                        f"sequence batching control '{control_input.name}' of model '{config.name}': "
                        f"{kind_name} takes a data_type of {', '.join(CORRID_TYPES)} and no false/true values")
                controls.append(Control(control_input.name, CORRID, config_type))
                continue
            if len(lists) != 1 or len(getattr(control, lists[0][0])) != 2:
                raise BackendLoadError(
                    f"sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                    f"'bool_false_true' with exactly 2 entries for {kind_name} for {config.name}")
            values = getattr(control, lists[0][0])
            controls.append(Control(control_input.name, control.kind, lists[0][1], values[0], values[1]))
    return controls


class SequenceControls:
    """Builds the control tensors of one request (or of an idle slot's filler)."""

    def __init__(self, config):
        self.model = config.name
        self.batching = config.max_batch_size > 0
        self.controls = read_controls(config)
        self.corrid = next((c for c in self.controls if c.kind == CORRID), None)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.controls]

    def check_id(self, sequence_id: int | str) -> None:
        """The id's type must be the CORRID control's: a string id for TYPE_STRING, an integer one
        for the numeric types (later Triton releases' refusal; Triton 2.51 filled a numeric control
        with the string's bytes, and failed a batching model's every request with a string control)."""
        corrid = self.corrid
        if corrid is None or sequence_id == 0 or sequence_id == "":
            return
        sent = "BYTES" if isinstance(sequence_id, str) else "UINT64"
        expected = corrid.datatype
        if (sent == "BYTES") != (expected == "BYTES"):
            raise invalid_arg(f"sequence batching control '{corrid.name}' data-type is '{sent}', but model "
                              f"'{self.model}' expects '{expected}'")

    def tensors(self, start: bool, end: bool, ready: bool, sequence_id: int | str | None) -> dict[str, InferTensor]:
        """The controls of one request; ``sequence_id`` None for an idle slot's filler (CORRID 0 / "")."""
        shape = (1, 1) if self.batching else (1,)
        out = {}
        for control in self.controls:
            if control.kind == CORRID:
                data = self._corrid(control, sequence_id, shape)
                out[control.name] = InferTensor(control.name, control.datatype, data)
                continue
            on = start if control.kind == START else end if control.kind == END else ready
            value = control.true if on else control.false
            out[control.name] = InferTensor(control.name, control.datatype,
                                            np.full(shape, value, NUMPY_DTYPE[control.datatype]))
        return out

    @staticmethod
    def _corrid(control: Control, sequence_id: int | str | None, shape: tuple) -> np.ndarray:
        if control.datatype == "BYTES":
            data = np.empty(shape, dtype=object)
            text = "" if sequence_id is None else str(sequence_id)
            data.reshape(-1)[0] = text.encode()
            return data
        # Triton copies the id's low bytes into the tensor: a uint64 id wraps into narrower types.
        value = sequence_id if isinstance(sequence_id, int) else 0
        return np.full(shape, value, np.uint64).astype(NUMPY_DTYPE[control.datatype])


@dataclass(frozen=True)
class StateSpec:
    """One ``sequence_batching.state`` entry and the value a sequence starts from."""

    input_name: str
    output_name: str
    datatype: str
    initial: np.ndarray


def read_states(config, model_dir: Path) -> list[StateSpec]:
    """The config's implicit states with their initial values: ``initial_state`` (``zero_data`` or
    ``<model>/initial_state/<data_file>``), else zeros with each variable dim taken as 1."""
    batch = [1] if config.max_batch_size > 0 else []
    specs = []
    for state in config.sequence_batching.state:
        datatype = wire_datatype(state.data_type)
        if state.initial_state:
            initial = state.initial_state[0]
            shape = batch + list(initial.dims)
            data = _initial_data(initial, state.input_name, datatype, shape, model_dir, config.name)
        else:
            shape = batch + [1 if d == -1 else int(d) for d in state.dims]
            data = zeros(datatype, shape)
        specs.append(StateSpec(state.input_name, state.output_name, datatype, data))
    return specs


def zeros(datatype: str, shape: list[int]) -> np.ndarray:
    """A tensor of zeros (empty strings for BYTES)."""
    if datatype == "BYTES":
        data = np.empty(shape, dtype=object)
        data.fill(b"")
        return data
    return np.zeros(shape, NUMPY_DTYPE[datatype])


def _initial_data(initial, name: str, datatype: str, shape: list[int], model_dir: Path, model: str) -> np.ndarray:
    if initial.WhichOneof("state_data") != "data_file":
        if not initial.zero_data:
            raise BackendLoadError(f"initial_state setting expects state'{name}' to have state_data set")
        return zeros(datatype, shape)
    path = model_dir / "initial_state" / initial.data_file
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BackendLoadError(f"unable to read the initial_state data file '{path}' of state '{name}' of model "
                               f"'{model}': {exc.strerror or exc}") from None
    count = int(np.prod(shape, dtype=np.int64))
    if datatype == "BYTES":
        try:
            return deserialize_bytes(raw, count, name, model).reshape(shape)
        except ServeError as exc:
            raise BackendLoadError(f"initial_state data file '{path}' of state '{name}': {exc.message}") from None
    dtype = NUMPY_DTYPE[datatype].newbyteorder("<")
    needed = count * dtype.itemsize
    if len(raw) < needed:
        raise BackendLoadError(f"initial_state setting expects {needed} bytes, but the data provided from "
                               f"{initial.data_file}only has {len(raw)} bytes.")
    return np.frombuffer(raw[:needed], dtype=dtype).astype(NUMPY_DTYPE[datatype]).reshape(shape)


class SequenceState:
    """The implicit state of one sequence: the value each state input gets on the next request,
    replaced by the matching output after every run (Triton swaps input and output state)."""

    __slots__ = ("specs", "values")

    def __init__(self, specs: list[StateSpec], values: dict[str, np.ndarray] | None = None):
        self.specs = specs
        self.values = values if values is not None else {s.input_name: s.initial for s in specs}

    def tensors(self) -> dict[str, InferTensor]:
        return {s.input_name: InferTensor(s.input_name, s.datatype, self.values[s.input_name]) for s in self.specs}

    def shapes(self) -> tuple:
        return tuple(self.values[s.input_name].shape for s in self.specs)

    @classmethod
    def blank(cls, specs: list[StateSpec], shapes: tuple) -> "SequenceState":
        """Zeros of ``shapes``: the throwaway state of an idle slot's filler (Triton's null state)."""
        return cls(specs, {s.input_name: zeros(s.datatype, list(shape)) for s, shape in zip(specs, shapes)})

    def update(self, produced: dict[str, np.ndarray]) -> None:
        for spec in self.specs:
            data = produced.get(spec.output_name)
            if data is not None:
                self.values[spec.input_name] = np.array(data, copy=True)


def keep_states(batch: list[InferRequest], produced: dict[str, np.ndarray], batching: bool) -> None:
    """After a run: each sequence's state becomes its rows of the state outputs."""
    offset = 0
    for request in batch:
        state = request.state
        if state is not None:
            rows = produced if not batching else {n: d[offset:offset + request.batch_size] for n, d in produced.items()}
            state.update(rows)
        offset += request.batch_size
