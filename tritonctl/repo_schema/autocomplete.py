"""The config Triton actually runs a model with.

Triton loads a model in steps: core normalization (``normalize.core_normalize``,
reference section 3.1), instance-group normalization (3.2), then the backend's
auto-complete, which may add max_batch_size, inputs, outputs and a dynamic batcher
(3.3), then normalization again. ``effective_config`` replays those steps offline,
so ``tritonctl generate --effective``, ``validate`` and ``serve`` share one answer.

Two backends complete their configs from code: a Python model's ``auto_complete_config``
(evaluated by ``python_autocomplete`` in a child process, see ``complete_python_model``) and
DALI, which reads inputs, outputs and max_batch_size from its pipeline (not evaluated here).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from tritonctl.repo_schema.diagnostics import Diagnostic, code_info, register
from tritonctl.repo_schema.modelfiles import ModelFileError, ModelIO, TensorInfo
from tritonctl.repo_schema.normalize import core_normalize
from tritonctl.repo_schema import python_autocomplete as pyac
from tritonctl.repo_schema.examples import AUTO_COMPLETE, H, ORT_FIXED, OUT, Example
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io
from tritonctl.repo_schema.modelfiles.tensorrt import read_plan_io, unavailable_reason
from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy, PythonCompletion, complete_config
from tritonctl.repo_schema.repository import ModelSource, version_dirs
from tritonctl.repo_schema.schema import data_type_value, model_config_pb2

# Triton's onnxruntime backend config `default-max-batch-size` (core passes 4 unless told otherwise).
DEFAULT_MAX_BATCH_SIZE = 4
# Backends whose CPU instance groups default to two instances (3.2).
TWO_CPU_INSTANCE_BACKENDS = frozenset({"onnxruntime", "tensorflow"})

NOT_BATCHABLE = register(
    "AC01", "max_batch_size is set but the model cannot batch", "error",
    """
    When config.pbtxt leaves out the inputs or the outputs, Triton's ONNX Runtime backend
    reads them from the model file. It also checks whether the model can batch: every
    input and output must have at least one dimension and a variable (-1, symbolic) first
    dimension. If one of them has a fixed first dimension (or is a scalar) while
    max_batch_size is above 0, Triton refuses the model: "autofill failed for model
    '<m>': model does not support batching while non-zero max_batch_size is specified".
    Fix it by setting max_batch_size: 0 (dims are then the full tensor shapes), or by
    exporting the model with a dynamic first (batch) dimension.
    """, "BE-ORT-04",
    example=Example('backend: "onnxruntime"\nmax_batch_size: 8\n', files=("1/",), onnx=ORT_FIXED))
MODEL_FILE_UNREADABLE = register(
    "AC02", "auto-complete cannot read the model file", "error",
    """
    config.pbtxt leaves out the inputs or the outputs, so Triton must read them from the
    model file, but the file is missing or cannot be parsed. Triton fails to load the
    model in that case. Add the model file to the version directory, or list every input
    and output in config.pbtxt.
    """, "3.3")
NO_GPU_FOR_GROUP = register(
    "AC03", "instance group needs a GPU but none is available", "error",
    """
    An instance group with kind: KIND_GPU runs its instances on GPUs. On a machine
    without a usable GPU Triton refuses to load the model ("instance group <g> of model
    <m> has kind KIND_GPU but no GPUs are available"). Use kind: KIND_CPU (or leave kind
    out, which is KIND_AUTO and falls back to the CPU) to run on this machine.
    """, "IG-04")
MAX_BATCH_AUTOFILLED = register(
    "AC50", "max_batch_size filled in by auto-complete", "info",
    """
    The model can batch (every input and output has a variable first dimension) but
    config.pbtxt does not set max_batch_size, so Triton's ONNX Runtime backend sets it to
    its default-max-batch-size, 4, and enables the dynamic batcher. Triton logs: "autofilled
    max_batch_size to 4 ... Must specify max_batch_size to utilize autofill with a larger
    max batch size". Set max_batch_size yourself to allow larger batches.
    """, "3.3")
TENSORRT_SKIPPED = register(
    "AC51", "TensorRT auto-complete skipped", "info",
    """
    Triton's TensorRT backend fills missing inputs, outputs and max_batch_size from the
    engine in model.plan. Reading an engine needs the `tensorrt` package and a GPU; without
    them tritonctl shows the config without those fields. Install the extra with
    `pip install 'tritonctl[tensorrt]'` on a GPU machine, or list the inputs and outputs
    in config.pbtxt.
    """, "3.3")
PYTHON_AUTOCOMPLETE_FAILED = register(
    "AC04", "a Python model's auto_complete_config refuses its config", "error",
    """
    Triton's Python backend calls TritonPythonModel.auto_complete_config(config) once at
    load, with the config as written, and loads the model with the config it returns. The
    pb_utils.ModelConfig API refuses a change that contradicts the config ("configuration
    expects datatype TYPE_INT32 for input 'INPUT1', model provides TYPE_FP32", "configuration
    specified max_batch_size 6, but in auto-complete-config function for model 'm' specified
    max_batch_size 4", "input 'INPUT1' ... is missing 'dims' property.", ...), the function may
    raise or forget to return the config ("must return a valid pb.ModelConfig object."), or
    model.py fails to import; each fails the model. tritonctl runs auto_complete_config the
    same way, in a separate process, and quotes Triton's error. Make the config and the model
    agree, or fix model.py. `--no-exec` skips running model code.
    """, "BE-PY-02",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n' + OUT,
        files=(("1/model.py", AUTO_COMPLETE % 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", '
                '"dims": [4]})'),),
    ))
PYTHON_AUTOCOMPLETE_STUCK = register(
    "AC05", "a Python model's auto_complete_config hangs or crashes", "error",
    """
    auto_complete_config runs at load, in Triton's stub process, which the server waits on for
    stub-timeout-seconds (30 by default). A function that does not return in that time (a
    download, a lock, an endless loop) or a process that dies (a segfault in a native import,
    os._exit) fails the model. tritonctl gives the function the same time limit in its own
    process. Keep auto_complete_config to describing the model: no network, no heavy loading.
    """, "BE-PY-02")
PYTHON_AUTOCOMPLETE_NOT_RUN = register(
    "AC52", "a Python model's auto_complete_config was not evaluated", "info",
    """
    The model defines auto_complete_config, so Triton completes the config with it at load,
    but tritonctl did not run it: `--no-exec` was given, model.py imports a package that is
    not installed where tritonctl runs, or the function uses a part of pb_utils that only a
    running server has. Inputs, outputs, max_batch_size, dynamic batching and the
    transaction policy it may fill in are then not checked (a missing data_type or dims is
    not reported). Install the model's packages, or drop `--no-exec`, to check them.
    """, "BE-PY-02",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 } ]\n' + OUT,
        files=(("1/model.py", "import tensorrt_llm_runtime_helpers\n\n" + AUTO_COMPLETE % "pass"),),
    ))
DALI_AUTOCOMPLETE_NOT_EVALUATED = register(
    "AC53", "DALI fills in this config from its pipeline; not checked", "info",
    """
    Triton's DALI backend reads the pipeline (model.dali, or 1/dali.py serialized at load) and
    fills in what config.pbtxt leaves out: missing inputs and outputs, their data_type and
    dims, and max_batch_size (auto-complete is on unless tritonserver runs with
    --disable-auto-complete-config). tritonctl does not run DALI pipelines, so what the
    pipeline provides is not checked here; a data_type or dims the pipeline does not declare
    still fails at load ("Missing data_type config for ..."). List them in config.pbtxt to
    have them checked.
    """,
    example=Example('backend: "dali"\nmax_batch_size: 8\n', files=(("1/dali.py", "# @autoserialize pipeline\n"),)))


@dataclass(frozen=True)
class InstanceSpec:
    """One model instance Triton creates from an instance group."""

    name: str  # "<group>_<k>"
    group: str
    kind: str  # "KIND_CPU", "KIND_GPU" or "KIND_MODEL"
    device_id: int  # the GPU for KIND_GPU, else 0
    host_policy: str  # "cpu", "gpu_<id>", "model" unless the group names one
    passive: bool


def effective_config(model_dir: Path, config_name: str | None = None, gpus: Sequence[int] | None = None,
                     *, version: int | None = None, default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
                     model_code: ModelCodePolicy | None = None):
    """The ModelConfig Triton runs ``model_dir`` with, and what went wrong on the way.

    ``gpus`` are the GPU ids the server may use (None or empty: CPU only). ``version``
    picks the version directory whose model file backs auto-complete (default: the
    highest). ``model_code``: run a Python model's auto_complete_config under this policy
    (None: leave it to the caller, as the server does, which runs it in process). Returns
    ``(config, diagnostics)``; ``config`` is None when the config file does not parse. A
    model with ERROR diagnostics would not load.
    """
    source = ModelSource(Path(model_dir), config_name)
    diagnostics: list[Diagnostic] = list(source.parsed.diagnostics)
    if not source.parsed.ok:
        return None, diagnostics
    where = source.config_path if source.has_config else source.model_dir
    report = _Reporter(diagnostics, where, source.name)
    config = core_normalize(source.parsed.message, source.model_dir)
    if config.platform == "ensemble":
        return config, diagnostics
    available = sorted(set(gpus or ()))
    normalize_instance_groups(config, available, report)
    version_dir = model_version_dir(source.model_dir, version)
    if config.backend == "onnxruntime":
        autocomplete_onnxruntime(config, version_dir, report, default_max_batch_size)
    elif config.backend == "tensorrt":
        _autocomplete_tensorrt(config, version_dir, report)
    elif config.backend == "python" and model_code is not None:
        completion = complete_python_model(config, source.model_dir, model_code)
        problem = python_completion_problem(source.name, completion) if completion is not None else None
        if problem is not None:
            report(*problem)
        elif completion is not None and completion.config is not None:
            config = completion.config
    return core_normalize(config, source.model_dir), diagnostics


@dataclass
class _Reporter:
    diagnostics: list[Diagnostic]
    path: Path
    model: str

    def __call__(self, code: str, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, code_info(code).severity, message, self.path, None, hint,
                                           self.model))


def model_version_dir(model_dir: Path, version: int | None) -> Path | None:
    numbered = [v for v in version_dirs(model_dir) if v.version is not None]
    if version is not None:
        numbered = [v for v in numbered if v.version == version]
    return max(numbered, key=lambda v: v.version).path if numbered else None


# --- Python (auto_complete_config) ----------------------------------------------------

def python_completion_problem(model: str, completion: PythonCompletion) -> tuple[str, str, str] | None:
    """(code, message, hint) for an auto_complete_config that did not give Triton a config."""
    if completion.evaluated or completion.outcome == pyac.NOT_READ:
        return None  # NOT_READ: the "not checked without the repository" line names model files
    if completion.outcome == pyac.FAILED:
        return (PYTHON_AUTOCOMPLETE_FAILED, f"model '{model}' does not load: {completion.message}",
                "make config.pbtxt and what auto_complete_config adds agree, or fix model.py")
    if completion.outcome in (pyac.TIMED_OUT, pyac.CRASHED):
        return (PYTHON_AUTOCOMPLETE_STUCK, f"model '{model}' does not load: {completion.message}",
                "auto_complete_config should only describe the model: no downloads, no heavy loading (Triton "
                "waits stub-timeout-seconds, 30 by default)")
    return (PYTHON_AUTOCOMPLETE_NOT_RUN,  # NOT_RUN, UNAVAILABLE
            f"auto_complete_config of model '{model}' not evaluated: {completion.message}; the inputs, outputs, "
            "max_batch_size and batching it may fill in are not checked",
            "run without --no-exec, with the model's packages installed, to check them")


def complete_python_model(config, model_dir: Path, policy: ModelCodePolicy) -> PythonCompletion | None:
    """What a Python model's ``auto_complete_config`` makes of ``config`` (normalized): the
    highest version's model file runs, as in ``serve``. None when the model is not Python."""
    if config.backend != "python" or config.platform == "ensemble":
        return None
    version_dir = model_version_dir(model_dir, None)
    if version_dir is None:
        return None
    return complete_config(config, version_dir / (config.default_model_filename or "model.py"), policy)


# --- instance groups (3.2) -------------------------------------------------------------

def _preferred_kind(backend: str, gpus: Sequence[int]) -> int:
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    if backend == "python":  # prefers GPU in GPU builds; the preference is skipped without a GPU
        return kinds.Value("KIND_GPU") if gpus else kinds.Value("KIND_CPU")
    return kinds.Value("KIND_AUTO")


def normalize_instance_groups(config, gpus: Sequence[int], report=None) -> None:
    """Triton's ``NormalizeInstanceGroup``: names, kinds, counts and GPUs of every group."""
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    if not config.instance_group:
        group = config.instance_group.add()
        group.name = config.name
        group.kind = _preferred_kind(config.backend, gpus)
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == kinds.Value("KIND_AUTO"):
            usable = bool(gpus) and all(g in gpus for g in group.gpus)
            group.kind = kinds.Value("KIND_GPU") if usable else kinds.Value("KIND_CPU")
        if group.count < 1:
            cpu_default = group.kind == kinds.Value("KIND_CPU") and config.backend in TWO_CPU_INSTANCE_BACKENDS
            group.count = 2 if cpu_default else 1
        if group.kind == kinds.Value("KIND_GPU") and not group.gpus:
            group.gpus.extend(gpus)
            if not gpus and report is not None:
                report(NO_GPU_FOR_GROUP,
                       f"instance group '{group.name}' has kind KIND_GPU but no GPUs are available",
                       hint="use kind: KIND_CPU, or leave kind out to fall back to the CPU")


def instance_plan(config) -> list[InstanceSpec]:
    """The instances Triton creates for a normalized config, in creation order."""
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    plan = []
    for group in config.instance_group:
        kind = kinds.Name(group.kind)
        if kind == "KIND_GPU":
            devices = [(g, f"gpu_{g}") for g in group.gpus for _ in range(group.count)]
        else:
            policy = "model" if kind == "KIND_MODEL" else "cpu"
            devices = [(0, policy)] * group.count
        for k, (device, policy) in enumerate(devices):
            plan.append(InstanceSpec(f"{group.name}_{k}", group.name, kind, device,
                                     group.host_policy or policy, group.passive))
    return plan


# --- ONNX Runtime (3.3) ------------------------------------------------------------------

def batch_capable(io: ModelIO) -> bool:
    """Every input and output has rank >= 1 and a variable first dimension (the
    onnxruntime and tensorrt backends both test batching this way)."""
    return all(t.dims and t.dims[0] == -1 for t in [*io.inputs, *io.outputs])


def _has_scheduler(config) -> bool:
    return config.WhichOneof("scheduling_choice") is not None


def fill_tensors(entries, tensors: list[TensorInfo], batching: bool) -> None:
    for tensor in tensors:
        entry = entries.add()
        entry.name = tensor.name
        entry.data_type = data_type_value(tensor.data_type or "TYPE_INVALID")
        dims = list(tensor.dims[1:] if batching else tensor.dims)
        if dims:
            entry.dims.extend(dims)
            continue
        entry.dims.append(1)  # a scalar; with batching the model sees it through reshape {}
        if batching:
            entry.reshape.SetInParent()


def autocomplete_onnxruntime(config, version_dir: Path | None, report,
                             default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> None:
    """``ModelState::AutoCompleteConfig`` of the onnxruntime backend, in place."""
    has_inputs = bool(config.input) or bool(config.batch_input)
    if has_inputs and config.output:
        return

    filename = config.default_model_filename or "model.onnx"
    if version_dir is None:
        report(MODEL_FILE_UNREADABLE, f"no version directory holds {filename}, so its inputs and outputs "
               "cannot be read", hint=f"put the model at {config.name}/1/{filename}")
        return
    try:
        io = read_onnx_io(version_dir / filename)
    except ModelFileError as exc:
        report(MODEL_FILE_UNREADABLE, f"cannot auto-complete inputs and outputs: {exc}",
               hint="fix the model file, or list every input and output in config.pbtxt")
        return
    if batch_capable(io):
        if config.max_batch_size == 0 and default_max_batch_size > 0:
            config.max_batch_size = default_max_batch_size
            report(MAX_BATCH_AUTOFILLED, f"max_batch_size auto-filled to {default_max_batch_size} because "
                   "the model has a variable batch dimension",
                   hint="set max_batch_size in config.pbtxt to allow larger batches")
        if config.max_batch_size > 1 and not _has_scheduler(config):
            config.dynamic_batching.SetInParent()
    elif config.max_batch_size != 0:
        fixed = next(t for t in [*io.inputs, *io.outputs] if not t.dims or t.dims[0] != -1)
        shape = "a scalar" if not fixed.dims else f"shape {list(fixed.dims)}"
        report(NOT_BATCHABLE, f"autofill failed for model '{config.name}': model does not support batching "
               f"while non-zero max_batch_size is specified ('{fixed.name}' has {shape})",
               hint="set max_batch_size: 0, or export the model with a dynamic first dimension")
        return
    batching = config.max_batch_size > 0
    if not has_inputs:
        fill_tensors(config.input, io.inputs, batching)
    if not config.output:
        fill_tensors(config.output, io.outputs, batching)


# --- TensorRT (3.3) ----------------------------------------------------------------------

def _autocomplete_tensorrt(config, version_dir: Path | None, report) -> None:
    """Fill missing inputs, outputs and max_batch_size from a TensorRT engine.

    Triton runs this only when the first instance group is KIND_GPU; reading an engine
    needs the ``tensorrt`` package and a GPU.
    """
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    if config.instance_group[0].kind != kinds.Value("KIND_GPU") or (config.input and config.output):
        return
    missing = unavailable_reason()
    if missing:
        report(TENSORRT_SKIPPED, f"TensorRT auto-complete skipped: {missing}",
               hint="list the inputs, outputs and max_batch_size in config.pbtxt")
        return
    plan = version_dir / (config.default_model_filename or "model.plan") if version_dir else None
    try:
        if plan is None:
            raise ModelFileError("no version directory")
        io = read_plan_io(plan)
    except ModelFileError as exc:
        report(MODEL_FILE_UNREADABLE, f"unable to load plan file to auto complete config: {plan} ({exc})",
               hint="build the engine for this TensorRT version and GPU, or list inputs and outputs")
        return
    if config.max_batch_size == 0 and batch_capable(io):  # the same first-dimension test
        config.max_batch_size = io.max_batch
    if config.max_batch_size > 1 and not _has_scheduler(config):
        config.dynamic_batching.SetInParent()
    batching = config.max_batch_size > 0
    if not config.input:
        fill_tensors(config.input, [replace(t, name=t.name.split(" ")[0]) for t in io.inputs], batching)
    if not config.output:
        fill_tensors(config.output, [replace(t, name=t.name.split(" ")[0]) for t in io.outputs], batching)
