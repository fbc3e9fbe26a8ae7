"""The model half of a build: source -> prepared ONNX, and the inputs the checks feed it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.convert import accuracy, onnx_prep
from tritonctl.convert.accuracy import TensorSpec
from tritonctl.convert.errors import BuildError
from tritonctl.convert.profiles import check_shapes
from tritonctl.convert.spec import ShapeSpec
from tritonctl.repo_schema.modelfiles import ModelIO
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io

# Batch size used to verify a dynamic-batch rewrite row by row.
VERIFY_ROWS = 3
# Size of a dynamic non-batch dimension in example and check inputs without --shape.
DEFAULT_DIM = 8


@dataclass
class PreparedOnnx:
    path: Path
    io: ModelIO
    model: object  # onnx.ModelProto
    batch_rewrite: list[str] = field(default_factory=list)
    folded: int = 0
    fixed_batch_source: bool = False  # the source takes one sample at a time


def _type_name(tensor) -> str:
    """An ONNX element type by its name (FLOAT8E4M3FN, not 'type 17')."""
    prefix = "type "
    if tensor.source_type.startswith(prefix) and tensor.source_type[len(prefix):].isdigit():
        from onnx import TensorProto

        try:
            return TensorProto.DataType.Name(int(tensor.source_type[len(prefix):]))
        except ValueError:
            pass
    return tensor.source_type


def require_servable(io: ModelIO) -> None:
    """Every input and output must be a tensor of a type Triton's onnxruntime backend passes."""
    for role, tensors in (("input", io.inputs), ("output", io.outputs)):
        for tensor in tensors:
            if not tensor.data_type:
                raise BuildError(f"{role} '{tensor.name}' has type {_type_name(tensor)}, which Triton cannot pass "
                                 "to or from a model (its inputs and outputs are tensors of bool, integer, float "
                                 "or string elements); re-export the model with such a tensor in its place")


def specs_for(io: ModelIO, batch: int, shapes: list[ShapeSpec]) -> list[TensorSpec]:
    require_servable(ModelIO(inputs=io.inputs))
    concrete = check_shapes(io.inputs, batch, shapes, DEFAULT_DIM)
    specs = []
    for tensor in io.inputs:
        dtype = accuracy.NUMPY_DTYPES.get(tensor.data_type)
        if dtype is None:
            raise BuildError(f"input '{tensor.name}' has type {_type_name(tensor)}, which tritonctl cannot generate "
                             "random data for; pass --calibration-data with real inputs, or --no-check")
        specs.append(TensorSpec(tensor.name, dtype, concrete[tensor.name]))
    return specs


def batchable(io: ModelIO) -> bool:
    return all(t.dims and t.dims[0] == -1 for t in [*io.inputs, *io.outputs])


def verify_rows(original, rewritten, changes: list[str], shapes: list[ShapeSpec], seed: int) -> None:
    """The rewritten model at batch VERIFY_ROWS must give, row for row, what the original
    gives for each sample alone."""
    io = _io_of(rewritten, read_onnx_io)
    arrays = accuracy.random_inputs(specs_for(io, VERIFY_ROWS, shapes), seed)
    names = [t.name for t in io.outputs]
    # The source first: what onnxruntime cannot run at all (a model newer than it reads, say) is
    # the source's problem, not the rewrite's.
    try:
        reference = accuracy.rowwise(accuracy.onnx_runner(original))(arrays)
    except BuildError:
        raise
    except Exception as exc:
        raise _source_failed(exc) from None
    try:
        result = accuracy.onnx_runner(rewritten)(arrays)
    except Exception as exc:
        raise _rewrite_failed(changes, f"onnxruntime cannot run it at batch {VERIFY_ROWS}: "
                                       f"{str(exc).strip().splitlines()[0]}") from None
    pairs = [_without_shared_non_finite(ref, res) for ref, res in zip(reference, result)]
    reference, result = [p[0] for p in pairs], [p[1] for p in pairs]
    bad = [c for c in accuracy.compare(names, reference, result, 1e-5, 1e-4) if not c.passed]
    if bad:
        detail = "; ".join(f"output '{c.name}' {c.problem or f'max abs error {c.max_abs:.3g}'}" for c in bad)
        raise _rewrite_failed(changes, f"its rows differ from the original's: {detail}")


def _without_shared_non_finite(reference, result):
    """Both arrays with 0 where they hold the same NaN or infinity: there the rewrite
    computes what the original computes."""
    import numpy as np

    reference, result = np.asarray(reference), np.asarray(result)
    if reference.dtype.kind not in "fc" or result.shape != reference.shape:
        return reference, result
    same = (np.isnan(reference) & np.isnan(result)) | (np.isinf(reference) & (reference == result))
    if not same.any():
        return reference, result
    return np.where(same, 0, reference).astype(reference.dtype), np.where(same, 0, result).astype(result.dtype)


def _source_failed(exc: Exception) -> BuildError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return BuildError(f"the source model fails on the random inputs that verify its dynamic batch (floats in "
                      f"[-1, 1), integers in {{0, 1}}, one sample at a time): {reason}. Inputs that hold shapes, "
                      "indices or thresholds need real values: build with --max-batch-size 0 to keep batch 1, or "
                      "re-export the model with a dynamic batch axis")


def _rewrite_failed(changes: list[str], why: str) -> BuildError:
    return BuildError("the model was exported with a fixed batch of 1 and making the batch dynamic did not "
                      f"preserve its results ({why}). Changed: {'; '.join(changes)}. Re-export it with a "
                      "dynamic batch axis, or build with --max-batch-size 0 to keep batch 1")


def _io_of(model, read_onnx_io) -> ModelIO:
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        return read_onnx_io(path)


def prepare_onnx(model, path: Path, want_batch: bool, shapes: list[ShapeSpec], seed: int,
                 verify: bool = True) -> PreparedOnnx:
    """Dynamic batch when the model pins it to 1 (verified row by row), constant folding,
    then onnx's checker and shape inference on the result, saved to ``path``."""
    onnx_prep.check_ir_version(model)
    changes: list[str] = []
    fixed = want_batch and onnx_prep.has_fixed_batch_of_one(model)
    source = model
    if fixed:
        onnx_prep.check(model)  # a broken source is reported as such, not as a failed rewrite
        rewritten = onnx_prep.make_batch_dynamic(model)
        changes = rewritten.changes
        if verify:
            verify_rows(model, rewritten.model, changes, shapes, seed)
        source = rewritten.model
    folded = onnx_prep.fold_constants(source)
    final = onnx_prep.save_checked(folded.model, path)  # once, at the end, on the file
    io = read_onnx_io(path)
    require_servable(io)
    return PreparedOnnx(path, io, final, changes, folded.folded, fixed)
