"""TensorRT optimization profiles and check-input shapes from the batch settings and --shape.

Batch dimension: min 1, opt ``--opt-batch-size`` (default: Model Navigator's rule, the
power of two 2^ceil(0.8*floor(log2 max)), capped at max), max ``--max-batch-size``.
Every other dynamic dimension needs a --shape range; fixed dimensions are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonctl.convert.errors import BuildError
from tritonctl.convert.spec import ShapeSpec
from tritonctl.repo_schema.modelfiles import TensorInfo


@dataclass(frozen=True)
class ProfileShape:
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def default_opt_batch(max_batch: int) -> int:
    if max_batch <= 1:
        return 1
    return min(max_batch, 2 ** math.ceil(0.8 * math.floor(math.log2(max_batch))))


def batch_range(max_batch: int, opt_batch: int | None) -> tuple[int, int, int]:
    opt = default_opt_batch(max_batch) if opt_batch is None else opt_batch
    if not 1 <= opt <= max(max_batch, 1):
        raise BuildError(f"--opt-batch-size {opt} must be between 1 and --max-batch-size ({max_batch})")
    return 1, opt, max_batch


def compute_profile(inputs: list[TensorInfo], max_batch: int, opt_batch: int | None,
                    shapes: list[ShapeSpec]) -> dict[str, ProfileShape]:
    """min/opt/max full shapes for every input. With max_batch > 0 the first dim of each
    input is the batch and --shape gives the dims after it; with 0 it gives full shapes."""
    by_name = _shapes_by_name(inputs, shapes)
    batch = batch_range(max_batch, opt_batch) if max_batch > 0 else None
    profile = {}
    for tensor in inputs:
        dims = tensor.dims[1:] if batch else tensor.dims
        spec = by_name.get(tensor.name)
        if spec is None:
            dynamic = [i for i, d in enumerate(dims) if d < 0]
            if dynamic:
                position = dynamic[0] + (1 if batch else 0)
                raise BuildError(f"input '{tensor.name}' has a dynamic dimension {position} (shape "
                                 f"{list(tensor.dims)}); give its range with --shape {tensor.name}:MIN,OPT,MAX, "
                                 f"dims {'after the batch dimension ' if batch else ''}joined by 'x'")
            low = opt = high = tuple(dims)
        else:
            _require_rank(tensor, spec, dims, bool(batch))
            for i, d in enumerate(dims):
                if d > 0 and not spec.min[i] == spec.opt[i] == spec.max[i] == d:
                    raise BuildError(f"--shape {tensor.name}: dimension {i + (1 if batch else 0)} is fixed to {d} "
                                     "in the model and cannot take another range")
            low, opt, high = spec.min, spec.opt, spec.max
        if batch:
            low, opt, high = (batch[0], *low), (batch[1], *opt), (batch[2], *high)
        profile[tensor.name] = ProfileShape(tuple(low), tuple(opt), tuple(high))
    return profile


def _shapes_by_name(inputs: list[TensorInfo], shapes: list[ShapeSpec]) -> dict[str, ShapeSpec]:
    by_name = {s.name: s for s in shapes}
    unknown = sorted(set(by_name) - {t.name for t in inputs})
    if unknown:
        names = ", ".join(t.name for t in inputs)
        raise BuildError(f"--shape names {', '.join(repr(u) for u in unknown)}, which the model does not take "
                         f"(its inputs: {names})")
    return by_name


def _require_rank(tensor: TensorInfo, spec: ShapeSpec, dims, batch: bool) -> None:
    if len(spec.min) != len(dims):
        raise BuildError(f"--shape {tensor.name} gives {len(spec.min)} dimension(s), but the input has "
                         f"{len(dims)} {'after the batch dimension' if batch else ''} (shape "
                         f"{list(tensor.dims)})".replace("  (", " ("))


def check_shapes(inputs: list[TensorInfo], batch: int, shapes: list[ShapeSpec],
                 default_dim: int = 8) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for check inputs: the batch, --shape's OPT, else ``default_dim``."""
    by_name = _shapes_by_name(inputs, shapes)
    result = {}
    for tensor in inputs:
        dims = list(tensor.dims[1:] if batch else tensor.dims)
        spec = by_name.get(tensor.name)
        if spec is not None:
            _require_rank(tensor, spec, dims, bool(batch))
            dims = list(spec.opt)
        dims = [d if d > 0 else default_dim for d in dims]
        result[tensor.name] = tuple([batch, *dims] if batch else dims)
    return result
