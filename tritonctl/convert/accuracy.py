"""Accuracy: run the source and the result on the same inputs and compare every output.

The comparison is Polygraphy's default ``elemwise`` check: an element fails only where
its absolute error exceeds ``atol`` and its relative error (against the source) exceeds
``rtol``. NaN or Inf in any output always fails, whatever the tolerances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from tritonctl.convert.errors import BuildError
from tritonctl.optional import require
from tritonctl.repo_schema.datatypes import DATATYPES
from tritonctl.repo_schema.modelfiles.onnx import explain_onnxruntime_error

Arrays = dict  # input or output name -> numpy array
Runner = Callable[[Arrays], list]  # inputs -> outputs in the model's output order

# Triton config data type -> numpy dtype name of the data a check generates for it: a BF16 input
# gets float32 data (numpy has no bfloat16); strings get none.
NUMPY_DTYPES = {t.config: "float32" if t.config == "TYPE_BF16" else t.numpy for t in DATATYPES if t.size}
# numpy dtype name (torch's for bfloat16) -> Triton config data type.
TRITON_DTYPES = {**{v: k for k, v in NUMPY_DTYPES.items() if k != "TYPE_BF16"}, "bfloat16": "TYPE_BF16"}
# Smallest |reference| used as the denominator of the relative error.
REL_EPSILON = 1e-12


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # numpy dtype name
    shape: tuple[int, ...]  # concrete shape to generate


@dataclass
class OutputCheck:
    name: str
    max_abs: float
    max_rel: float
    mismatched: int  # elements outside both tolerances
    total: int
    problem: str = ""  # NaN/Inf, shape or count mismatch
    source_not_finite: bool = False  # the source itself gave NaN/Inf: its inputs, not the build, are at fault

    @property
    def passed(self) -> bool:
        return not self.problem and self.mismatched == 0

    def as_dict(self) -> dict:
        return {"name": self.name, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel,
                "mismatched": self.mismatched, "elements": self.total, "passed": self.passed,
                **({"problem": self.problem} if self.problem else {})}


@dataclass
class AccuracyReport:
    atol: float
    rtol: float
    outputs: list[OutputCheck] = field(default_factory=list)
    inputs: str = ""  # where the inputs came from, for the manifest

    @property
    def passed(self) -> bool:
        return bool(self.outputs) and all(o.passed for o in self.outputs)

    def failures(self) -> list[OutputCheck]:
        return [o for o in self.outputs if not o.passed]

    def as_dict(self) -> dict:
        return {"passed": self.passed, "atol": self.atol, "rtol": self.rtol, "inputs": self.inputs,
                "outputs": [o.as_dict() for o in self.outputs]}


def random_inputs(specs: Sequence[TensorSpec], seed: int = 0) -> Arrays:
    """Floats uniform in [-1, 1), integers in {0, 1} (safe as indices and masks), random booleans."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in specs:
        dtype = np.dtype("float32" if spec.dtype == "bfloat16" else spec.dtype)
        if dtype.kind == "f":
            arrays[spec.name] = rng.uniform(-1.0, 1.0, spec.shape).astype(dtype)
        elif dtype.kind == "b":
            arrays[spec.name] = rng.integers(0, 2, spec.shape).astype(bool)
        elif dtype.kind in "iu":
            arrays[spec.name] = rng.integers(0, 2, spec.shape).astype(dtype)
        else:
            raise BuildError(f"cannot make random data for input '{spec.name}' of type {spec.dtype}; "
                             "pass --calibration-data with real samples")
    return arrays


def describe_random(batch_sizes) -> str:
    """How random check inputs were made, for messages and build.json."""
    shapes = ("batch sizes " + ", ".join(map(str, batch_sizes))) if batch_sizes else "the model's own shapes, no batch"
    return f"random: floats in [-1, 1), integers in {{0, 1}}; {shapes}"


def _finite(array) -> bool:
    import numpy as np

    return array.dtype.kind not in "fc" or bool(np.isfinite(array).all())


def compare_output(name: str, reference, result, atol: float, rtol: float) -> OutputCheck:
    import numpy as np

    reference, result = np.asarray(reference), np.asarray(result)
    total = int(result.size)
    for role, array in (("source", reference), ("result", result)):
        if not _finite(array):
            bad = int(np.size(array) - np.isfinite(array).sum())
            return OutputCheck(name, float("nan"), float("nan"), bad, total, f"{bad} NaN/Inf value(s) in the {role}",
                               source_not_finite=role == "source")
    if reference.shape != result.shape:
        return OutputCheck(name, float("nan"), float("nan"), total, total,
                           f"shape {list(result.shape)} differs from the source's {list(reference.shape)}")
    if total == 0:
        return OutputCheck(name, 0.0, 0.0, 0, 0)
    ref, res = reference.astype(np.float64), result.astype(np.float64)
    abs_err = np.abs(res - ref)
    rel_err = abs_err / np.maximum(np.abs(ref), REL_EPSILON)
    mismatched = int(np.count_nonzero((abs_err > atol) & (rel_err > rtol)))
    return OutputCheck(name, float(abs_err.max()), float(rel_err.max()), mismatched, total)


def compare(names: Sequence[str], reference: list, result: list, atol: float, rtol: float) -> list[OutputCheck]:
    if len(reference) != len(result):
        return [OutputCheck(name, float("nan"), float("nan"), 0, 0,
                            f"the source gave {len(reference)} output(s), the result {len(result)}")
                for name in names]
    return [compare_output(name, a, b, atol, rtol) for name, a, b in zip(names, reference, result)]


def check_accuracy(names: Sequence[str], source: Runner, result: Runner, batches: Sequence[Arrays],
                   atol: float, rtol: float, inputs: str) -> AccuracyReport:
    """Compare over every batch; per output, the worst errors over all batches."""
    report = AccuracyReport(atol, rtol, inputs=inputs)
    merged: dict[str, OutputCheck] = {}
    for arrays in batches:
        for check in compare(names, _run(source, "source", arrays, inputs), _run(result, "result", arrays, inputs),
                             atol, rtol):
            old = merged.get(check.name)
            if old is None:
                merged[check.name] = check
                continue
            merged[check.name] = OutputCheck(check.name, max(old.max_abs, check.max_abs),
                                             max(old.max_rel, check.max_rel), old.mismatched + check.mismatched,
                                             old.total + check.total, old.problem or check.problem,
                                             old.source_not_finite or check.source_not_finite)
    report.outputs = [merged[name] for name in names if name in merged]
    return report


def _run(runner: Runner, which: str, arrays: Arrays, inputs: str) -> list:
    """The runner's outputs; a model that fails on the check's inputs is a BuildError saying so."""
    try:
        return runner(arrays)
    except BuildError:
        raise
    except Exception as exc:  # the runtime's own error types (onnxruntime, TensorRT, torch)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BuildError(
            f"the {which} model fails on the accuracy check's inputs ({inputs}): {reason}. Inputs that hold "
            "shapes, indices or sizes need real values: pass --calibration-data with an .npz of real inputs, "
            "or --no-check to skip the comparison") from None


def onnx_runner(model) -> Runner:
    """An onnxruntime CPU session over an ONNX ModelProto or path. BF16 inputs take float32
    data and BF16 outputs come back as float32 (numpy has no bfloat16)."""
    viewed = _float32_view(model)
    if viewed is None:
        session = ort_session(model)
        return lambda arrays: session.run(None, arrays)
    view, renamed = viewed
    session = ort_session(view)
    return lambda arrays: session.run(None, {renamed.get(k, k): v for k, v in arrays.items()})


BF16_SUFFIX = "__float32"


def _float32_view(model):
    """``model`` with a Cast after each BF16 graph input and before each BF16 graph output, and
    the renamed inputs; None when it has neither."""
    import onnx
    from onnx import TensorProto, helper

    if hasattr(model, "is_file") or isinstance(model, str):
        if not _has_bf16_io(onnx.load(str(model), load_external_data=False)):
            return None
        model = onnx.load(str(model))
    elif not _has_bf16_io(model):
        return None
    view = onnx.ModelProto()
    view.CopyFrom(model)
    graph = view.graph
    initializers = {t.name for t in graph.initializer}
    renamed, casts = {}, []
    for value in graph.input:
        if value.name not in initializers and _is_bf16(value):
            renamed[value.name] = value.name + BF16_SUFFIX
            casts.append(helper.make_node("Cast", [renamed[value.name]], [value.name], to=TensorProto.BFLOAT16))
            value.name = renamed[value.name]
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    for value in graph.output:
        if _is_bf16(value):
            graph.node.append(helper.make_node("Cast", [value.name], [value.name + BF16_SUFFIX], to=TensorProto.FLOAT))
            value.name += BF16_SUFFIX
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return view, renamed


def _is_bf16(value) -> bool:
    from onnx import TensorProto

    return value.type.HasField("tensor_type") and value.type.tensor_type.elem_type == TensorProto.BFLOAT16


def _has_bf16_io(model) -> bool:
    initializers = {t.name for t in model.graph.initializer}
    return any(_is_bf16(v) for v in model.graph.input if v.name not in initializers) or any(
        _is_bf16(v) for v in model.graph.output)


def rowwise(runner: Runner) -> Runner:
    """Run a model that takes one sample at a time on each row, and stack the rows."""
    import numpy as np

    def run(arrays: Arrays) -> list:
        rows = len(next(iter(arrays.values())))
        per_row = [runner({k: v[i:i + 1] for k, v in arrays.items()}) for i in range(rows)]
        return [np.concatenate([r[j] for r in per_row]) for j in range(len(per_row[0]))]

    return run


def ort_session(model):
    ort = require("onnxruntime", "running an ONNX model")
    options = ort.SessionOptions()
    options.log_severity_level = 4  # errors come back as exceptions, reported once
    source = model if isinstance(model, (str, bytes)) else (
        str(model) if hasattr(model, "is_file") else model.SerializeToString())
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        reason = explain_onnxruntime_error(str(exc).strip().splitlines()[0], ort.__version__)
        raise BuildError(f"onnxruntime cannot load the model: {reason}") from None


def table(report: AccuracyReport) -> list[tuple[str, str, str, str, str]]:
    """Rows of (output, max abs error, max rel error, mismatched, verdict) for display."""
    rows = []
    for check in report.outputs:
        verdict = "ok" if check.passed else (check.problem or "FAIL")
        rows.append((check.name, f"{check.max_abs:.3g}", f"{check.max_rel:.3g}",
                     f"{check.mismatched}/{check.total}", verdict))
    return rows
