"""`optimization` and `model_operations` (OPT-*): settings each backend reads.

Optimization on ensembles is the ensemble rules' finding (ENS-01).
"""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, ONNX, ORT_OK, TRT, Example
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.textproto import did_you_mean

ORT_ACCELERATOR = register(
    "OPT02", "onnxruntime execution accelerator it does not know", "error",
    """
    The onnxruntime backend knows the GPU accelerators `tensorrt` and `cuda` and the CPU
    accelerator `openvino`; any other name fails the load ("unknown Execution
    Accelerator '<n>' is requested"). The tensorrt accelerator accepts only its own
    parameter keys ("unknown parameter '<k>' is provided for TensorRT Execution
    Accelerator"), precision_mode FP32, FP16, BF16 or INT8, and booleans for its
    boolean keys; the cuda accelerator needs booleans for do_copy_in_default_stream and
    use_ep_level_unified_stream.
    """, "OPT-02",
    example=Example(
        ONNX
        + IO
        + 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt_fp16" } ] } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ))
TF_ACCELERATOR = register(
    "OPT03", "tensorflow execution accelerator misconfigured", "error",
    """
    The TensorFlow backend accepts the GPU accelerators `tensorrt` (precision_mode FP32
    or FP16), `auto_mixed_precision` and `gpu_io`. auto_mixed_precision cannot be
    combined with tensorrt, and gpu_io needs KIND_GPU instances.
    """, "OPT-03",
    example=Example(
        'platform: "tensorflow_savedmodel"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { kind: KIND_GPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" }, { name: "auto_mixed_precision" } ] } }\n',
        files=("1/model.savedmodel/",),
    ))
GRAPH_SPEC = register(
    "OPT04", "invalid CUDA graph spec", "error",
    """
    The TensorRT backend checks each optimization.cuda.graph_spec when it creates an
    instance: with max_batch_size 0 the spec's batch_size must be 0 ("graph spec
    expects 'batch_size' to be 0 if 'max_batch_size' is 0"); otherwise it must be in
    [1, max_batch_size] and the lower bound's batch_size must not exceed it. Every
    input of the lower bound must exist in the spec with the same rank, dims must be
    >= 0, and each lower-bound dim must not exceed the spec's.
    """, "OPT-04",
    example=Example(
        TRT + IO + "optimization { cuda { graphs: true graph_spec [ { batch_size: 16 } ] } }\n",
        files=("1/model.plan",),
    ))
TENSORRT_ONLY = register(
    "OPT50", "TensorRT-only optimization setting on another backend", "warning",
    """
    optimization.priority, optimization.cuda (graphs, busy_wait_events, graph_spec,
    output_copy_stream), gather_kernel_buffer_threshold and eager_batching are read only
    by the TensorRT backend. Other backends ignore them without a message.
    """, "OPT-05",
    example=Example(H + IO + "optimization { priority: PRIORITY_MAX }\n"))
GRAPH_LEVEL_IGNORED = register(
    "OPT51", "graph optimization level not used by this backend", "warning",
    """
    optimization.graph.level is read by the onnxruntime and tensorflow backends only;
    other backends ignore it. For onnxruntime: -1 is BASIC, 1 EXTENDED, 2 DISABLE_ALL,
    and any other value (0 included) ALL.
    """, "OPT-06",
    example=Example(H + IO + "optimization { graph { level: 1 } }\n"))
GRAPH_LEVEL_VALUE = register(
    "OPT52", "onnxruntime graph level treated as ALL", "warning",
    """
    The onnxruntime backend maps optimization.graph.level -1 to BASIC, 1 to EXTENDED
    and 2 to DISABLE_ALL; every other value silently means ALL. Use one of -1, 0 (the
    default, ALL), 1 or 2.
    """, "OPT-06",
    example=Example(ONNX + IO + "optimization { graph { level: 3 } }\n", files=("1/",), onnx=ORT_OK))
OP_LIBRARY = register(
    "OPT53", "model_operations that will not be loaded as intended", "warning",
    """
    model_operations.op_library_filename registers custom operator libraries, and only
    the onnxruntime backend reads it. The path is used as given, so a relative path is
    resolved against the server's working directory, not the model directory: use an
    absolute path on the server.
    """, "OPT-07",
    example=Example(H + IO + 'model_operations { op_library_filename: "libcustom.so" }\n'))

ORT_GPU_ACCELERATORS = ("tensorrt", "cuda")
ORT_CPU_ACCELERATORS = ("openvino",)
ORT_TRT_PRECISIONS = ("FP32", "FP16", "BF16", "INT8")
ORT_TRT_BOOL_KEYS = frozenset({
    "int8_use_native_calibration_table", "trt_dla_enable", "trt_engine_cache_enable", "trt_dump_subgraphs",
    "trt_force_sequential_engine_build", "trt_context_memory_sharing_enable", "trt_layer_norm_fp32_fallback",
    "trt_timing_cache_enable", "trt_force_timing_cache", "trt_detailed_build_log", "trt_build_heuristics_enable",
    "trt_sparsity_enable", "trt_cuda_graph_enable", "trt_dump_ep_context_model"})
ORT_TRT_KEYS = ORT_TRT_BOOL_KEYS | frozenset({
    "precision_mode", "max_workspace_size_bytes", "trt_max_partition_iterations", "trt_min_subgraph_size",
    "int8_calibration_table_name", "trt_dla_core", "trt_engine_cache_path", "trt_engine_cache_prefix",
    "trt_builder_optimization_level", "trt_auxiliary_streams", "trt_tactic_sources", "trt_extra_plugin_lib_paths",
    "trt_profile_min_shapes", "trt_profile_max_shapes", "trt_profile_opt_shapes", "trt_ep_context_file_path",
    "trt_ep_context_embed_mode"})
ORT_CUDA_BOOL_KEYS = ("do_copy_in_default_stream", "use_ep_level_unified_stream")
TF_GPU_ACCELERATORS = ("tensorrt", "auto_mixed_precision", "gpu_io")
TF_TRT_PRECISIONS = ("FP32", "FP16")
_BOOLS = ("true", "on", "1", "false", "off", "0")
ACCELERATORS = ("optimization", "execution_accelerators")


def _is_bool(value: str) -> bool:
    return value.lower() in _BOOLS


@model_rule
def check_ort_accelerators(ctx) -> None:
    if ctx.effective.backend != "onnxruntime":
        return
    accelerators = ctx.config.optimization.execution_accelerators
    for field, known in (("gpu_execution_accelerator", ORT_GPU_ACCELERATORS),
                         ("cpu_execution_accelerator", ORT_CPU_ACCELERATORS)):
        for i, accelerator in enumerate(getattr(accelerators, field)):
            path = ACCELERATORS + (field, i)
            if accelerator.name not in known:
                suggestion = did_you_mean(accelerator.name, known)
                ctx.report(ORT_ACCELERATOR, f"onnxruntime has no {field.split('_')[0].upper()} execution "
                           f"accelerator '{accelerator.name}' (it knows {', '.join(known)})", path + ("name",),
                           hint=f"did you mean '{suggestion}'?" if suggestion else f"use one of {', '.join(known)}")
            elif accelerator.name == "tensorrt":
                _check_ort_tensorrt_parameters(ctx, accelerator, path)
            elif accelerator.name == "cuda":
                for key in ORT_CUDA_BOOL_KEYS:
                    value = accelerator.parameters.get(key)
                    if value is not None and not _is_bool(value):
                        ctx.report(ORT_ACCELERATOR, f"cuda accelerator parameter '{key}' is {value!r}, not a "
                                   "boolean", path + ("parameters", key, "value"), hint="use true or false")


def _check_ort_tensorrt_parameters(ctx, accelerator, path: tuple) -> None:
    for key, value in accelerator.parameters.items():
        entry = path + ("parameters", key)
        if key not in ORT_TRT_KEYS:
            suggestion = did_you_mean(key, sorted(ORT_TRT_KEYS))
            ctx.report(ORT_ACCELERATOR, f"the tensorrt accelerator has no parameter '{key}'", entry + ("key",),
                       hint=f"did you mean '{suggestion}'?" if suggestion else "see the onnxruntime backend's "
                       "TensorRT accelerator documentation for the accepted keys")
        elif key == "precision_mode" and value not in ORT_TRT_PRECISIONS:
            ctx.report(ORT_ACCELERATOR, f"precision_mode {value!r} is not supported", entry + ("value",),
                       hint=f"use one of {', '.join(ORT_TRT_PRECISIONS)}")
        elif key in ORT_TRT_BOOL_KEYS and not _is_bool(value):
            ctx.report(ORT_ACCELERATOR, f"tensorrt accelerator parameter '{key}' is {value!r}, not a boolean",
                       entry + ("value",), hint="use true or false")


@model_rule
def check_tf_accelerators(ctx) -> None:
    if ctx.effective.backend != "tensorflow":
        return
    gpu = ctx.config.optimization.execution_accelerators.gpu_execution_accelerator
    names = [a.name for a in gpu]
    for i, accelerator in enumerate(gpu):
        path = ACCELERATORS + ("gpu_execution_accelerator", i)
        if accelerator.name not in TF_GPU_ACCELERATORS:
            ctx.report(TF_ACCELERATOR, f"tensorflow has no GPU execution accelerator '{accelerator.name}'",
                       path + ("name",), hint=f"use one of {', '.join(TF_GPU_ACCELERATORS)}")
        elif accelerator.name == "auto_mixed_precision" and "tensorrt" in names:
            ctx.report(TF_ACCELERATOR, "auto_mixed_precision cannot be combined with the tensorrt accelerator",
                       path + ("name",), hint="keep only one of them")
        elif accelerator.name == "tensorrt":
            precision = accelerator.parameters.get("precision_mode")
            if precision is not None and precision not in TF_TRT_PRECISIONS:
                ctx.report(TF_ACCELERATOR, f"precision_mode {precision!r} is not supported by TF-TRT",
                           path + ("parameters", "precision_mode", "value"), hint="use FP32 or FP16")
        elif accelerator.name == "gpu_io" and any(
                g.kind != model_config_pb2().ModelInstanceGroup.KIND_GPU for g in ctx.config.instance_group):
            ctx.report(TF_ACCELERATOR, "gpu_io needs every instance group to be KIND_GPU", path + ("name",),
                       hint="use kind: KIND_GPU, or remove gpu_io")


@model_rule
def check_graph_specs(ctx) -> None:
    if ctx.effective.backend != "tensorrt":
        return
    max_batch = ctx.effective.max_batch_size
    for i, spec in enumerate(ctx.config.optimization.cuda.graph_spec):
        base = ("optimization", "cuda", "graph_spec", i)
        lower = spec.graph_lower_bound if spec.HasField("graph_lower_bound") else None
        for label, batch, path in (("batch_size", spec.batch_size, base + ("batch_size",)),
                                   ("graph_lower_bound batch_size", lower.batch_size if lower else None,
                                    base + ("graph_lower_bound", "batch_size"))):
            if batch is None:
                continue
            if max_batch == 0 and batch != 0:
                ctx.report(GRAPH_SPEC, f"graph_spec {i} {label} is {batch}, but max_batch_size is 0", path,
                           hint="use batch_size: 0 for a non-batching model")
            elif max_batch > 0 and not 1 <= batch <= max_batch:
                ctx.report(GRAPH_SPEC, f"graph_spec {i} {label} is {batch}; it must be in [1, {max_batch}]", path,
                           hint=f"use a batch size between 1 and max_batch_size ({max_batch})")
        if lower is not None and lower.batch_size > spec.batch_size:
            ctx.report(GRAPH_SPEC, f"graph_spec {i} lower-bound batch_size {lower.batch_size} is above its "
                       f"batch_size {spec.batch_size}", base + ("graph_lower_bound", "batch_size"),
                       hint="the lower bound must not exceed the spec")
        _check_graph_spec_inputs(ctx, i, spec, lower, base)


def _check_graph_spec_inputs(ctx, i: int, spec, lower, base: tuple) -> None:
    for name, shape in spec.input.items():
        dims = list(shape.dim)
        if any(d < 0 for d in dims):
            ctx.report(GRAPH_SPEC, f"graph_spec {i} input '{name}' has a negative dim {dims}",
                       base + ("input", name, "value"), hint="use concrete sizes >= 0")
        if lower is None:
            continue
        bound = lower.input.get(name)
        if bound is None:
            ctx.report(GRAPH_SPEC, f"graph_spec {i} input '{name}' has no entry in graph_lower_bound",
                       base + ("input", name), part="key", hint=f"add input {{ key: \"{name}\" ... }} to "
                       "graph_lower_bound")
        elif len(bound.dim) != len(dims) or any(b > d for b, d in zip(bound.dim, dims)):
            ctx.report(GRAPH_SPEC, f"graph_spec {i} lower bound of input '{name}' {list(bound.dim)} does not fit "
                       f"its spec {dims}", base + ("graph_lower_bound", "input", name, "value"),
                       hint="use the same rank, with every dim at most the spec's")


@model_rule
def check_tensorrt_only_fields(ctx) -> None:
    backend = ctx.effective.backend
    if backend == "tensorrt" or ctx.is_ensemble or not backend:
        return
    opt = ctx.config.optimization
    fields = [name for name, is_set in (("priority", opt.priority != 0), ("cuda", opt.HasField("cuda")),
                                        ("gather_kernel_buffer_threshold", opt.gather_kernel_buffer_threshold != 0),
                                        ("eager_batching", opt.eager_batching)) if is_set]
    for name in fields:
        ctx.report(TENSORRT_ONLY, f"optimization.{name} is read only by the TensorRT backend; the {backend} "
                   "backend ignores it", ("optimization", name), part="key", hint=f"remove optimization.{name}")


@model_rule
def check_graph_level(ctx) -> None:
    opt = ctx.config.optimization
    backend = ctx.effective.backend
    if not opt.HasField("graph") or ctx.is_ensemble or not backend:
        return
    path = ("optimization", "graph", "level")
    if backend not in ("onnxruntime", "tensorflow"):
        ctx.report(GRAPH_LEVEL_IGNORED, f"the {backend} backend ignores optimization.graph", ("optimization", "graph"),
                   part="key", hint="remove optimization.graph")
    elif backend == "onnxruntime" and opt.graph.level not in (-1, 0, 1, 2):
        ctx.report(GRAPH_LEVEL_VALUE, f"graph level {opt.graph.level} means ALL for onnxruntime", path,
                   hint="use -1 (BASIC), 1 (EXTENDED), 2 (DISABLE_ALL) or 0 (ALL)")


@model_rule
def check_model_operations(ctx) -> None:
    libraries = ctx.config.model_operations.op_library_filename
    backend = ctx.effective.backend
    for i, library in enumerate(libraries):
        path = ("model_operations", "op_library_filename", i)
        if backend != "onnxruntime":
            ctx.report(OP_LIBRARY, f"the {backend or 'ensemble'} backend ignores model_operations", path,
                       hint="remove model_operations; only onnxruntime loads custom op libraries this way")
            return
        if not library.startswith("/"):
            ctx.report(OP_LIBRARY, f"op library '{library}' is a relative path, resolved against the server's "
                       "working directory", path, hint="use the library's absolute path on the server")
