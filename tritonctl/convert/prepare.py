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


def specs_for(io: ModelIO, batch: int, shapes: list[ShapeSpec]) -> list[TensorSpec]:
    concrete = check_shapes(io.inputs, batch, shapes, DEFAULT_DIM)
    specs = []
    for tensor in io.inputs:
        dtype = accuracy.NUMPY_DTYPES.get(tensor.data_type)
        if dtype is None:
            raise BuildError(f"input '{tensor.name}' has type {tensor.source_type}, which tritonctl cannot generate "
                             "data for; pass --calibration-data or --no-check")
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
    reference = accuracy.rowwise(accuracy.onnx_runner(original))(arrays)
    try:
        result = accuracy.onnx_runner(rewritten)(arrays)
    except Exception as exc:
        raise _rewrite_failed(changes, f"onnxruntime cannot run it at batch {VERIFY_ROWS}: "
                                       f"{str(exc).strip().splitlines()[0]}") from None
    bad = [c for c in accuracy.compare(names, reference, result, 1e-5, 1e-4) if not c.passed]
    if bad:
        detail = "; ".join(f"output '{c.name}' {c.problem or f'max abs error {c.max_abs:.3g}'}" for c in bad)
        raise _rewrite_failed(changes, f"its rows differ from the original's: {detail}")


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
    return PreparedOnnx(path, read_onnx_io(path), final, changes, folded.folded, fixed)
