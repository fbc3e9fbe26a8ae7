"""Triton's normalization of a config: what the server fills in before it runs
a model (section 3 of the config rules reference)."""

from __future__ import annotations

from pathlib import Path

from tritonctl.repo_schema.repository import version_dirs
from tritonctl.repo_schema.schema import model_config_pb2

# (platform, backend, default filename) per detectable model file, in Triton's order (PB-08).
DETECTION_ORDER = [
    ("model.savedmodel", "tensorflow_savedmodel", "tensorflow"),
    ("model.graphdef", "tensorflow_graphdef", "tensorflow"),
    ("model.plan", "tensorrt_plan", "tensorrt"),
    ("model.onnx", "onnxruntime_onnx", "onnxruntime"),
    ("model.xml", "", "openvino"),
    ("model.pt", "pytorch_libtorch", "pytorch"),
    ("model.pt2", "torch_aoti", "pytorch"),
    ("model.py", "", "python"),
]
BACKEND_OF_PLATFORM = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "torch_aoti": "pytorch",
    "libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
}
DEFAULT_FILENAME = {
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "openvino": "model.xml",
    "python": "model.py",
    "dali": "model.dali",
}
PLATFORM_DEFAULT_FILENAME = {
    "torch_aoti": "model.pt2",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorflow_graphdef": "model.graphdef",
}

# Triton's kPythonFilename. A model whose runtime is "model.py" runs on the Python backend,
# which executes <backend_dir>/<backend>/model.py in place of libtriton_<backend>.so: the
# PyTorch backend's Python runtime (backend: "pytorch", runtime: "model.py") serves a
# torch.nn.Module from model.py or a TorchScript model.pt this way.
PYTHON_RUNTIME = "model.py"


def runs_python_runtime(config) -> bool:
    """Whether a backend other than python runs through its Python runtime (runtime: "model.py"),
    so that its C++ library's checks and defaults do not apply."""
    return config.runtime == PYTHON_RUNTIME and config.backend not in ("", "python")


def _first_version_dir(model_dir: Path) -> Path | None:
    # Triton looks only at the first version subdirectory in std::set (byte) order.
    numeric = sorted((v.path for v in version_dirs(model_dir) if v.version is not None), key=lambda p: p.name)
    return numeric[0] if numeric else None


def detect_backend(model_dir: Path) -> tuple[str, str, str] | None:
    """(platform, backend, filename) from the model file in the first version directory."""
    first = _first_version_dir(model_dir)
    if first is None:
        return None
    for filename, platform, backend in DETECTION_ORDER:
        if (first / filename).exists():
            return platform, backend, filename
    return None


def autocomplete_backend_fields(config, model_dir: Path, detect: bool = True) -> None:
    """Fill platform, backend and default_model_filename as Triton's core does (PB-08/PB-09).

    ``detect``: whether the model file in the first version directory may be looked at.
    """
    if config.platform == "ensemble":
        return
    if not config.platform and not config.backend and not config.default_model_filename:
        detected = detect_backend(model_dir) if detect else None
        if detected is not None:
            config.platform, config.backend, config.default_model_filename = detected
        elif "." in model_dir.name:
            backend = model_dir.name.split(".", 1)[1]
            config.backend = backend
            config.default_model_filename = f"model.{backend}"
        return
    if not config.backend:
        if config.platform in BACKEND_OF_PLATFORM:
            config.backend = BACKEND_OF_PLATFORM[config.platform]
        elif not config.platform:
            for filename, platform, backend in DETECTION_ORDER:
                if config.default_model_filename == filename:
                    config.platform, config.backend = platform, backend
                    break
    if config.backend == "pytorch" and not config.platform:
        config.platform = "pytorch_libtorch"
    if config.backend == "tensorrt" and not config.platform:
        config.platform = "tensorrt_plan"
    if config.backend == "onnxruntime" and not config.platform:
        config.platform = "onnxruntime_onnx"
    if not config.default_model_filename:
        config.default_model_filename = PLATFORM_DEFAULT_FILENAME.get(
            config.platform, DEFAULT_FILENAME.get(config.backend, ""))


def core_normalize(config, model_dir: Path, detect: bool = True):
    """A normalized copy of ``config``: Triton's ``GetNormalizedModelConfig`` (P1).

    ``detect=False`` leaves the model files alone (a config checked on its own).
    """
    result = model_config_pb2().ModelConfig()
    if config is not None:
        result.CopyFrom(config)
    if not result.name:
        result.name = model_dir.name
    autocomplete_backend_fields(result, model_dir, detect)
    if not result.HasField("version_policy"):
        result.version_policy.latest.num_versions = 1
    if result.HasField("dynamic_batching") and not result.dynamic_batching.preferred_batch_size \
            and result.max_batch_size > 0:
        result.dynamic_batching.preferred_batch_size.append(result.max_batch_size)
    if result.HasField("sequence_batching"):
        seq = result.sequence_batching
        if seq.max_sequence_idle_microseconds == 0:
            seq.max_sequence_idle_microseconds = 1_000_000
        if seq.HasField("oldest") and not seq.oldest.preferred_batch_size and result.max_batch_size > 0:
            seq.oldest.preferred_batch_size.append(result.max_batch_size)
    if result.platform != "ensemble":
        opt = result.optimization
        if not opt.HasField("input_pinned_memory"):
            opt.input_pinned_memory.enable = True
        if not opt.HasField("output_pinned_memory"):
            opt.output_pinned_memory.enable = True
    return result
