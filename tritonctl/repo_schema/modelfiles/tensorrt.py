"""Read a TensorRT plan's IO tensors through the ``tensorrt`` runtime.

Deserializing an engine needs the ``tensorrt`` package and a CUDA GPU of the kind
the plan was built for; ``unavailable_reason`` says what is missing so callers can
report that the plan was not checked instead of guessing.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.optional import unavailable
from tritonctl.repo_schema.modelfiles import LFS_HINT, ModelFileError, ModelIO, TensorInfo, lfs_pointer_problem

# tensorrt.DataType member name -> Triton config type
TRT_TO_TRITON = {
    "FLOAT": "TYPE_FP32", "HALF": "TYPE_FP16", "BF16": "TYPE_BF16", "INT8": "TYPE_INT8",
    "INT32": "TYPE_INT32", "INT64": "TYPE_INT64", "BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8",
}


@dataclass
class PlanIO(ModelIO):
    shape_tensors: set[str] = field(default_factory=set)
    non_linear: set[str] = field(default_factory=set)
    # input name -> per-dimension (min, max) over optimization profile 0
    profile_ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    num_profiles: int = 0

    @property
    def max_batch(self) -> int:
        """The engine's batch limit as Triton computes it for profile 0 (kMAX of the first dim)."""
        limits = [ranges[0][1] for name, ranges in self.profile_ranges.items()
                  if ranges and name not in self.shape_tensors]
        return min(limits) if limits else 0


def _cuda_device_count() -> int:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def unavailable_reason() -> str | None:
    """None when plans can be deserialized here, else what is missing."""
    missing = unavailable("tensorrt")
    if missing is not None:
        return missing
    if _cuda_device_count() == 0:
        return "no CUDA GPU is visible"
    return None


def read_plan_io(path: Path) -> PlanIO:
    """Deserialize ``path`` and describe its IO tensors. Raises ModelFileError."""
    import tensorrt as trt

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror}") from None
    pointer = lfs_pointer_problem(path)
    if pointer:
        raise ModelFileError(f"{pointer}: {LFS_HINT}")
    runtime = trt.Runtime(trt.Logger(trt.Logger.ERROR))
    engine = runtime.deserialize_cuda_engine(data)
    if engine is None:
        raise ModelFileError(f"{path.name} cannot be deserialized by TensorRT {trt.__version__} on this GPU "
                             "(corrupt, or built with another TensorRT version or GPU)")
    io = PlanIO(num_profiles=engine.num_optimization_profiles)
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        dtype = engine.get_tensor_dtype(name).name
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        info = TensorInfo(name, TRT_TO_TRITON.get(dtype, ""), shape, dtype)
        if engine.is_shape_inference_io(name):
            io.shape_tensors.add(name)
        if engine.get_tensor_format(name) != trt.TensorFormat.LINEAR:
            io.non_linear.add(name)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            io.inputs.append(info)
            if io.num_profiles and name not in io.shape_tensors:
                low, _, high = engine.get_tensor_profile_shape(name, 0)
                io.profile_ranges[name] = [(int(a), int(b)) for a, b in zip(low, high)]
        else:
            io.outputs.append(info)
    return io
