"""ONNX -> TensorRT plan with Polygraphy's loaders: pre-flight, precision flags, INT8
calibration, timing cache, a progress monitor, and a runner for the accuracy check.

``plan_unavailable`` and ``precision_flags`` are plain Python; everything that imports
tensorrt or polygraphy stays inside the functions that build or run an engine.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tritonctl.convert.errors import BuildError
from tritonctl.convert.profiles import ProfileShape
from tritonctl.optional import PROVIDERS, import_error

TENSORRT_EXTRA = PROVIDERS["tensorrt"].install
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")
# CreateConfig flags per --precision: the lower precisions keep fp16 as a fallback for layers
# without an int8/fp8 kernel (Model Navigator's "hierarchy" mode does the same).
PRECISION_FLAGS = {
    "fp32": {},
    "fp16": {"fp16": True},
    "bf16": {"bf16": True},
    "int8": {"int8": True, "fp16": True},
    "fp8": {"fp8": True, "fp16": True},
}
# Default --atol/--rtol per precision.
TOLERANCES = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2, "int8": 1e-1, "fp8": 1e-1}
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


@dataclass(frozen=True)
class ProgressEvent:
    kind: str  # "start", "step" or "finish"
    phase: str
    parent: str | None = None
    steps: int = 0  # with "start": how many steps the phase has; with "step": the step just done


def _libcuda():
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        return lib if lib.cuInit(0) == 0 else None
    return None


def gpu_names() -> list[str]:
    """Names of the CUDA devices this process sees, through the driver (no CUDA toolkit needed)."""
    lib = _libcuda()
    if lib is None:
        return []
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    names = []
    for index in range(count.value):
        device, buffer = ctypes.c_int(0), ctypes.create_string_buffer(256)
        if lib.cuDeviceGet(ctypes.byref(device), index) == 0 and lib.cuDeviceGetName(buffer, 256, device) == 0:
            names.append(buffer.value.decode(errors="replace"))
    return names


def plan_unavailable() -> str | None:
    """None when this machine can build plans, else a message naming what is missing."""
    missing = []
    error = import_error("tensorrt")
    if isinstance(error, ModuleNotFoundError):
        missing.append("the 'tensorrt' Python package")
    elif error is not None:
        missing.append(f"a working 'tensorrt' package (importing it failed: {error})")
    if import_error("polygraphy") is not None:
        missing.append("the 'polygraphy' package")
    if not gpu_names():
        missing.append("a CUDA GPU with its driver")
    if not missing:
        return None
    listed = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
    return (f"--format plan needs {listed}, which this machine lacks; install the extra with "
            f"{TENSORRT_EXTRA} on a machine with an NVIDIA GPU, or build an ONNX model with --format onnx")


def has_qdq(model) -> bool:
    """The ONNX model carries its own quantization (explicit Q/DQ nodes)."""
    return any(node.op_type in QDQ_OPS for node in model.graph.node)


def precision_flags(precision: str, explicit_quantization: bool, has_calibration: bool) -> dict:
    """CreateConfig keyword flags for ``precision``; raises BuildError when it cannot work."""
    if precision not in PRECISION_FLAGS:
        raise BuildError(f"--precision must be one of {', '.join(PRECISIONS)}")
    if precision == "int8" and not explicit_quantization and not has_calibration:
        raise BuildError("--precision int8 needs calibration data: pass --calibration-data with representative "
                         "inputs (random data would give meaningless scales), or a model quantized with Q/DQ nodes")
    if precision == "fp8" and not explicit_quantization:
        raise BuildError("--precision fp8 needs a model quantized with QuantizeLinear/DequantizeLinear nodes "
                         "(TensorRT has no FP8 calibration); quantize it first, e.g. with TensorRT Model Optimizer")
    return dict(PRECISION_FLAGS[precision])


def _progress_monitor(trt, callback: Callable[[ProgressEvent], None]):
    class Monitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name, parent_phase, num_steps):
            callback(ProgressEvent("start", phase_name, parent_phase, num_steps))

        def step_complete(self, phase_name, step):
            callback(ProgressEvent("step", phase_name, steps=step))
            return True  # False would cancel the build

        def phase_finish(self, phase_name):
            callback(ProgressEvent("finish", phase_name))

    return Monitor()


def build_engine(onnx_path: Path, plan_path: Path, profile: dict[str, ProfileShape], flags: dict,
                 calibration: list | None = None, calibration_cache: Path | None = None,
                 workspace_mib: int | None = None, timing_cache: Path | None = None,
                 on_progress: Callable[[ProgressEvent], None] | None = None) -> None:
    """Parse ``onnx_path``, build a serialized engine with one optimization profile and
    write it to ``plan_path``. The timing cache is read when present and updated after."""
    import tensorrt as trt
    from polygraphy.backend.trt import Calibrator, CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxPath, Profile
    from polygraphy.exception import PolygraphyException

    trt_profile = Profile()
    for name, shape in profile.items():
        trt_profile.add(name, shape.min, shape.opt, shape.max)
    kwargs = dict(flags)
    if calibration:
        kwargs["calibrator"] = Calibrator(calibration, cache=str(calibration_cache) if calibration_cache else None)
    if workspace_mib:
        kwargs["memory_pool_limits"] = {trt.MemoryPoolType.WORKSPACE: workspace_mib << 20}
    if timing_cache is not None and timing_cache.is_file():
        kwargs["load_timing_cache"] = str(timing_cache)
    if on_progress is not None:
        kwargs["progress_monitor"] = _progress_monitor(trt, on_progress)
    config = CreateConfig(profiles=[trt_profile], **kwargs)
    build = EngineBytesFromNetwork(NetworkFromOnnxPath(str(onnx_path)), config=config,
                                   save_timing_cache=str(timing_cache) if timing_cache else None)
    try:
        serialized = build()
    except PolygraphyException as exc:
        raise BuildError(f"TensorRT could not build the engine: {exc}") from None
    plan_path.write_bytes(bytes(serialized))


class PlanRunner:
    """Runs a plan through Polygraphy's TrtRunner; use as a context manager."""

    def __init__(self, plan_path: Path, output_names: list[str]):
        from polygraphy.backend.common import BytesFromPath
        from polygraphy.backend.trt import EngineFromBytes, TrtRunner

        self._runner = TrtRunner(EngineFromBytes(BytesFromPath(str(plan_path))))
        self._outputs = output_names

    def __enter__(self) -> "PlanRunner":
        self._runner.activate()
        return self

    def __exit__(self, *exc) -> None:
        self._runner.deactivate()

    def __call__(self, arrays: dict) -> list:
        result = self._runner.infer(arrays)
        return [result[name] for name in self._outputs]
