"""ONNX Runtime backend: one InferenceSession per model instance, configured from the model's
``parameters`` and ``optimization`` the way Triton's onnxruntime backend reads them."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from tritonctl.optional import ONNXRUNTIME_GPU
from tritonctl.repo_schema.datatypes import BY_CONFIG, BY_ORT
from tritonctl.repo_schema.modelfiles.onnx import explain_onnxruntime_error
from tritonctl.serve.backends.params import parse_bool, parse_int
from tritonctl.serve.core.backend_api import Backend, BackendLoadError, InstanceSpec, ModelExecutionError

BF16 = BY_CONFIG["TYPE_BF16"]
GRAPH_LEVELS = {-1: "ORT_ENABLE_BASIC", 1: "ORT_ENABLE_EXTENDED", 2: "ORT_DISABLE_ALL"}  # OPT-06


def session_options(config):
    """SessionOptions from ``parameters`` (PAR-02) and ``optimization.graph.level`` (OPT-06)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    params = {key: p.string_value for key, p in config.parameters.items()}
    if "intra_op_thread_count" in params:
        options.intra_op_num_threads = parse_int(params["intra_op_thread_count"], "intra_op_thread_count")
    if "inter_op_thread_count" in params:
        options.inter_op_num_threads = parse_int(params["inter_op_thread_count"], "inter_op_thread_count")
    if "execution_mode" in params:
        mode = parse_int(params["execution_mode"], "execution_mode")
        if mode not in (0, 1):
            raise BackendLoadError(
                "Invalid configuration value provided. Expected values for execution_mode are 0 or 1")
        options.execution_mode = ort.ExecutionMode.ORT_PARALLEL if mode else ort.ExecutionMode.ORT_SEQUENTIAL
    if "enable_mem_arena" in params:
        options.enable_cpu_mem_arena = parse_bool(params["enable_mem_arena"], "enable_mem_arena")
    if "enable_mem_pattern" in params:
        options.enable_mem_pattern = parse_bool(params["enable_mem_pattern"], "enable_mem_pattern")
    for key in ("session.use_device_allocator_for_initializers", "memory.enable_memory_arena_shrinkage"):
        if key in params:
            options.add_session_config_entry(key, params[key])
    # onnxruntime's intra-op threads spin after each run by default; here they would take CPU from
    # the front end and the other instances, so they sleep unless the model's parameters say so.
    spinning = params.get("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    level = config.optimization.graph.level if config.HasField("optimization") else 0
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, GRAPH_LEVELS.get(level, "ORT_ENABLE_ALL"))
    return options


# The tensorrt accelerator's parameters that onnxruntime's TensorRT provider names otherwise; the
# other keys (trt_*) are the provider's own. precision_mode sets one switch.
TRT_OPTION_NAMES = {"max_workspace_size_bytes": "trt_max_workspace_size",
                    "int8_calibration_table_name": "trt_int8_calibration_table_name",
                    "int8_use_native_calibration_table": "trt_int8_use_native_calibration_table"}
TRT_PRECISION_SWITCHES = {"FP16": "trt_fp16_enable", "BF16": "trt_bf16_enable", "INT8": "trt_int8_enable"}
# Model parameters Triton still reads as CUDA provider options of the same names (from before the
# cuda accelerator had parameters): name -> None (the value as it is) or the numbered values' names.
CUDA_MODEL_PARAMETERS = {
    "cudnn_conv_algo_search": {"0": "EXHAUSTIVE", "1": "HEURISTIC", "2": "DEFAULT"},
    "arena_extend_strategy": {"0": "kNextPowerOfTwo", "1": "kSameAsRequested"},
    "gpu_mem_limit": None, "do_copy_in_default_stream": None}


def providers(config, instance: InstanceSpec, available: list[str] | None = None) -> list:
    """CPU by default; for KIND_GPU instances, onnxruntime's TensorRT provider where the
    ``tensorrt`` accelerator asks for it, then CUDA (with the ``cuda`` accelerator's parameters and
    the CUDA model parameters), then the CPU, on the instance's device, as Triton's onnxruntime
    backend sets them up. ``available``: onnxruntime's providers (asked when not given)."""
    if instance.kind != "KIND_GPU":
        return ["CPUExecutionProvider"]
    if available is None:
        import onnxruntime as ort

        available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise BackendLoadError(
            f"instance group '{instance.name}' of model '{config.name}' has kind KIND_GPU but no CUDA device is "
            "usable here (onnxruntime has no CUDAExecutionProvider); use KIND_CPU, or run on a machine with a GPU "
            f"and onnxruntime's CUDA build ({ONNXRUNTIME_GPU.install})")
    device = str(max(instance.device_id, 0))
    chosen: list = []
    cuda_options: dict[str, str] = {}
    for accelerator in config.optimization.execution_accelerators.gpu_execution_accelerator:
        if accelerator.name == "tensorrt":
            if "TensorrtExecutionProvider" not in available:
                raise BackendLoadError(
                    "unknown Execution Accelerator 'tensorrt' is requested: this onnxruntime has no "
                    f"TensorrtExecutionProvider (it has {', '.join(available)}); install an onnxruntime build "
                    "with TensorRT, or remove the tensorrt accelerator to run on CUDA")
            chosen.append(("TensorrtExecutionProvider", {**_tensorrt_options(accelerator.parameters),
                                                         "device_id": device}))
        elif accelerator.name == "cuda":
            cuda_options.update(accelerator.parameters)
        else:
            raise BackendLoadError(f"unknown Execution Accelerator '{accelerator.name}' is requested")
    cuda_options.update(_cuda_model_parameters(config))
    chosen.append(("CUDAExecutionProvider", {**cuda_options, "device_id": device}))
    chosen.append("CPUExecutionProvider")
    return chosen


def _tensorrt_options(parameters) -> dict[str, str]:
    options = {}
    for key, value in parameters.items():
        if key == "precision_mode":
            if value not in ("FP32", *TRT_PRECISION_SWITCHES):
                raise BackendLoadError(f"unsupported precision mode '{value}' is requested")
            if value in TRT_PRECISION_SWITCHES:
                options[TRT_PRECISION_SWITCHES[value]] = "1"
        elif value:
            options[TRT_OPTION_NAMES.get(key, key)] = value
    return options


def _cuda_model_parameters(config) -> dict[str, str]:
    options = {}
    for key, values in CUDA_MODEL_PARAMETERS.items():
        if key not in config.parameters:
            continue
        value = config.parameters[key].string_value
        if values is not None and value.strip() not in values:
            raise BackendLoadError(f"unsupported {key} value '{value}' is requested")
        options[key] = value if values is None else values[value.strip()]
    return options


class OnnxRuntimeBackend(Backend):
    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        super().__init__(config, version_dir, instance)
        import onnxruntime as ort

        path = version_dir / (config.default_model_filename or "model.onnx")
        if path.is_dir():
            path = path / "model.onnx"
        if not path.is_file():
            raise BackendLoadError(f"unable to find '{path}' for model '{config.name}'")
        try:
            self.session = ort.InferenceSession(str(path), sess_options=session_options(config),
                                                providers=providers(config, instance))
        except BackendLoadError:
            raise
        except Exception as exc:
            raise BackendLoadError(f"onnxruntime could not load '{path.name}' for model '{config.name}': "
                                   f"{explain_onnxruntime_error(str(exc), ort.__version__)}") from None
        self._check_io()

    def _check_io(self) -> None:
        from tritonctl.repo_schema.schema import data_type_name

        config = self.config
        for kind, declared, actual in (("input", config.input, self.session.get_inputs()),
                                       ("output", config.output, self.session.get_outputs())):
            by_name = {t.name: t for t in actual}
            for tensor in declared:
                found = by_name.get(tensor.name)
                if found is None:
                    raise BackendLoadError(
                        f"unable to load model '{config.name}', configuration expects {kind} '{tensor.name}' "
                        f"but the model provides {sorted(by_name)}")
                expected = data_type_name(tensor.data_type)
                provided = _config_type(found.type)
                if provided != expected:
                    raise BackendLoadError(
                        f"unable to load model '{config.name}', configuration expects datatype {expected} for "
                        f"{kind} '{tensor.name}', model provides {provided}")
        self._string_outputs = {o.name for o in self.session.get_outputs() if o.type == "tensor(string)"}
        self._string_inputs = {i.name for i in self.session.get_inputs() if i.type == "tensor(string)"}
        self._bf16 = {t.name for t in (*self.session.get_inputs(), *self.session.get_outputs())
                      if t.type == BF16.ort}
        if config.HasField("sequence_batching"):
            self._check_sequence_io()

    def _check_sequence_io(self) -> None:
        """Sequence controls and implicit states are model inputs (and outputs) the server fills,
        checked as Triton's onnxruntime backend does."""
        from tritonctl.repo_schema.schema import data_type_name
        from tritonctl.serve.core.sequence_state import read_controls

        config = self.config
        inputs = {t.name: t for t in self.session.get_inputs()}
        outputs = {t.name: t for t in self.session.get_outputs()}
        for control in read_controls(config):
            found = inputs.get(control.name)
            if found is None:
                raise BackendLoadError(f"configuration specified sequence control '{control.name}', but model does "
                                       "not provide that input")
            dims = [d if isinstance(d, int) else -1 for d in found.shape[1 if config.max_batch_size > 0 else 0:]]
            if dims != [1]:
                raise BackendLoadError(f"unable to load model '{config.name}', sequence control '{control.name}' in "
                                       f"model has dims [{','.join(map(str, dims))}] but dims [1] is expected")
            provided = _config_type(found.type)
            if provided != control.config_type:
                raise BackendLoadError(f"unable to load model '{config.name}', sequence control '{control.name}', "
                                       f"the model expects data-type {provided} but the model configuration "
                                       f"specifies data-type {control.config_type}")
        for state in config.sequence_batching.state:
            for kind, name, tensors in (("input", state.input_name, inputs), ("output", state.output_name, outputs)):
                found = tensors.get(name)
                if found is None:
                    raise BackendLoadError(f"unable to load model '{config.name}', configuration specified state "
                                           f"{kind} '{name}', but the model provides {kind}s {sorted(tensors)}")
                provided = _config_type(found.type)
                if provided != data_type_name(state.data_type):
                    raise BackendLoadError(f"unable to load model '{config.name}', state {kind} '{name}': the model "
                                           f"expects data-type {provided} but the model configuration specifies "
                                           f"data-type {data_type_name(state.data_type)}")

    def text_inputs(self) -> frozenset[str]:
        return frozenset(self._string_inputs)

    def execute(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        for name in self._string_inputs.intersection(inputs):
            inputs[name] = _to_text(inputs[name], name, self.config.name)
        try:
            results = self._run_bf16(inputs, outputs) if self._bf16 else self.session.run(outputs, inputs)
        except Exception as exc:
            raise ModelExecutionError(f"onnxruntime execution failure in model '{self.config.name}': {exc}") from None
        produced = dict(zip(outputs, results))
        for name in self._string_outputs.intersection(produced):
            produced[name] = _to_bytes(produced[name])
        return produced

    def _run_bf16(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
        """A run of a model with bfloat16 tensors, which numpy has no type for: their 2-byte words
        (uint16, as the server holds BF16 data) go in as OrtValues, and come out of OrtValues when
        a BF16 output is asked for (then every input is one: onnxruntime makes none of strings)."""
        import onnxruntime as ort

        feeds = {name: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(array), BF16.onnx)
                 if name in self._bf16 else array for name, array in inputs.items()}
        if self._bf16.isdisjoint(outputs):
            return self.session.run(outputs, feeds)
        feeds = {name: value if isinstance(value, ort.OrtValue) else
                 ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value)) for name, value in feeds.items()}
        results = self.session.run_with_ort_values(outputs, feeds)
        return [_bf16_words(value) if name in self._bf16 else value.numpy() for name, value in zip(outputs, results)]

    def close(self) -> None:
        self.session = None


def _bf16_words(value) -> np.ndarray:
    """A bfloat16 OrtValue's elements, copied out as uint16 words."""
    shape = tuple(value.shape())
    words = np.empty(shape, np.uint16)
    if words.size:
        ctypes.memmove(words.ctypes.data, value.data_ptr(), words.nbytes)
    return words


def _to_text(array: np.ndarray, name: str, model: str) -> np.ndarray:
    """BYTES elements as the str objects onnxruntime's string tensors take."""
    out = np.empty(array.shape, dtype=object)
    flat_in, flat_out = array.reshape(-1), out.reshape(-1)
    try:
        for i, item in enumerate(flat_in):
            flat_out[i] = item.decode("utf-8") if isinstance(item, (bytes, bytearray)) else str(item)
    except UnicodeDecodeError:
        raise ModelExecutionError(f"input '{name}' for model '{model}' holds bytes that are not UTF-8; "
                                  "onnxruntime string tensors need UTF-8 text") from None
    return out


def _to_bytes(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    flat_in, flat_out = array.reshape(-1), out.reshape(-1)
    for i, item in enumerate(flat_in):
        flat_out[i] = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    return out


def _config_type(ort_type: str) -> str:
    """The config's name of an onnxruntime type ("tensor(float)" -> "TYPE_FP32"), or the type itself."""
    datatype = BY_ORT.get(ort_type)
    return datatype.config if datatype else ort_type
