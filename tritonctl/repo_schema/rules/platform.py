"""Platform, backend and runtime (PB-*): which backend Triton will load for a model.

Triton fills platform/backend from the model file or the directory name first
(normalize.py mirrors that), then checks the pair. Model-file existence is checked
by the layout rules.
"""

from __future__ import annotations

import posixpath
import re

from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import IO, TRT, Example
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.textproto import did_you_mean

KNOWN_PLATFORMS = ("tensorrt_plan", "onnxruntime_onnx", "pytorch_libtorch", "torch_aoti",
                   "tensorflow_graphdef", "tensorflow_savedmodel", "ensemble")
# The four backends Triton's core knows, with the platforms each one accepts (PB-03).
PLATFORMS_OF_BACKEND = {
    "tensorflow": ("tensorflow_graphdef", "tensorflow_savedmodel"),
    "tensorrt": ("tensorrt_plan",),
    "onnxruntime": ("onnxruntime_onnx",),
    "pytorch": ("pytorch_libtorch", "torch_aoti"),
}
KNOWN_BACKENDS = ("onnxruntime", "tensorrt", "pytorch", "python", "tensorflow", "openvino", "dali", "fil",
                  "identity", "repeat", "square")
# Backends NVIDIA ships only in backend-specific Triton images: backend -> image tag suffix.
CONTAINER_BACKENDS = {"vllm": "vllm-python-py3", "tensorrtllm": "trtllm-python-py3"}
# Names people write for platform that are really backends or file types.
PLATFORM_ALIASES = {"onnx": "onnxruntime_onnx", "onnxruntime": "onnxruntime_onnx", "tensorrt": "tensorrt_plan",
                    "trt": "tensorrt_plan", "pytorch": "pytorch_libtorch", "torchscript": "pytorch_libtorch"}

UNEXPECTED_PLATFORM = register(
    "PB01", "no backend for this platform", "error",
    """
    Triton needs a backend for every model except ensembles. When `backend` is empty it
    derives one from `platform` (tensorrt_plan, onnxruntime_onnx, pytorch_libtorch,
    torch_aoti, tensorflow_graphdef, tensorflow_savedmodel); any other platform leaves
    the backend empty and Triton refuses the model with "unexpected platform type
    '<platform>'". Python, OpenVINO, DALI and custom backends have no platform: write
    `backend: "python"` (etc.) instead.
    """, "PB-01",
    example=Example('platform: "onnx"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)))
ENSEMBLE_WITH_BACKEND = register(
    "PB02", "ensemble with a backend", "error",
    """
    An ensemble runs its steps inside Triton; it has no backend. Triton refuses
    `platform: "ensemble"` together with `backend` ("Ensemble model '<m>' must have
    platform type 'ensemble' and empty backend type"). Remove `backend`.
    """, "PB-02",
    example=Example(
        'platform: "ensemble"\nbackend: "python"\nmax_batch_size: 8\n'
        + IO
        + 'ensemble_scheduling { step [ { model_name: "other" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ))
PLATFORM_BACKEND_PAIR = register(
    "PB03", "platform does not belong to the backend", "error",
    """
    For the backends Triton's core knows, the platform must match: tensorrt ->
    tensorrt_plan; onnxruntime -> onnxruntime_onnx; pytorch -> pytorch_libtorch or
    torch_aoti; tensorflow -> tensorflow_graphdef or tensorflow_savedmodel. Otherwise
    Triton fails with "unexpected 'platform' and 'backend' pair, got:<platform>,
    <backend>". Fix the platform, or drop it and keep only `backend`.
    """, "PB-03",
    example=Example(
        'platform: "tensorrt_plan"\nbackend: "onnxruntime"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)
    ))
TENSORFLOW_NO_PLATFORM = register(
    "PB04", "tensorflow backend without a platform", "error",
    """
    The TensorFlow backend serves two formats, so Triton needs `platform:
    "tensorflow_savedmodel"` or `"tensorflow_graphdef"`. It can only guess it from a
    `model.savedmodel/` or `model.graphdef` in the first version directory; otherwise
    the platform stays empty and the model fails with "unexpected 'platform' and
    'backend' pair, got:, tensorflow".
    """, "PB-04",
    example=Example('backend: "tensorflow"\nmax_batch_size: 8\n' + IO, files=("1/",)))
ENSEMBLE_SCHEDULING = register(
    "PB05", "ensemble_scheduling and platform disagree", "error",
    """
    `ensemble_scheduling` and `platform: "ensemble"` go together. Triton refuses an
    ensemble without steps ("ensemble scheduling must be set for ensemble <m> whose
    platform is ensemble") and steps on any other model ("ensemble scheduling cannot
    be set for model '<m>' whose platform is not ensemble").
    """, "PB-05",
    example=Example('platform: "ensemble"\nmax_batch_size: 8\n' + IO, files=("1/",)))
RUNTIME_ESCAPES = register(
    "PB06", "runtime escapes the backend directory", "error",
    """
    `runtime` names the backend library (libtriton_<name>.so) or model.py file inside
    the backend's directory. Triton refuses names that leave it ("backend library name
    '...' escapes backend directory"): no absolute paths, no `..`. Put custom backends
    under <backend_dir>/<name>/ or next to the model.
    """, "PB-06",
    example=Example('backend: "python"\nruntime: "../../evil.so"\nmax_batch_size: 8\n' + IO))
RUNTIME_NOT_A_LIBRARY = register(
    "PB53", "runtime is not a backend library", "warning",
    """
    `runtime` names the file Triton loads for the backend: a shared library
    (libtriton_<backend>.so, found next to the model or in the backend's directory) or,
    for a Python-based backend, a .py file such as model.py. A name that is neither is
    a file Triton cannot load: "unable to find backend library '<runtime>' for model
    '<m>'". Leave runtime out to use the backend's own library.
    """, "PB-06",
    example=Example('backend: "python"\nruntime: "python_runtime"\nmax_batch_size: 8\n' + IO))
LIBTORCH_ALIAS = register(
    "PB07", "platform 'libtorch' is not a platform", "warning",
    """
    `libtorch` makes Triton pick the pytorch backend, but the platform check does not
    know it, so the model fails with "unexpected 'platform' and 'backend' pair,
    got:libtorch, pytorch". Use `platform: "pytorch_libtorch"` (or only
    `backend: "pytorch"`).
    """, "PB-07",
    example=Example('platform: "libtorch"\nmax_batch_size: 8\n' + IO, files=("1/model.pt",)))
NO_BACKEND_DETECTED = register(
    "PB08", "Triton cannot tell which backend to use", "error",
    """
    With no platform, backend or default_model_filename, Triton looks for a known model
    file (model.plan, model.onnx, model.pt, model.py, ...) in the first version
    directory, then for a directory name of the form `<name>.<backend>`. When both fail:
    "Invalid model name: Could not determine backend for model '<m>' with no backend in
    model configuration". Set `backend` (or `platform`) in config.pbtxt.
    """, "PB-08",
    example=Example("max_batch_size: 8\n" + IO, files=("1/weights.bin",)))
CUSTOM_FILENAME_NO_BACKEND = register(
    "PB09", "custom default_model_filename without a backend", "error",
    """
    Triton derives the backend from default_model_filename only for the standard names
    (model.plan, model.onnx, model.pt, model.pt2, model.py, model.xml,
    model.savedmodel, model.graphdef). With any other file name and no platform or
    backend, the backend stays empty and Triton fails with "unexpected platform type".
    Add `backend: ...`.
    """, "PB-09",
    example=Example('default_model_filename: "net.bin"\nmax_batch_size: 8\n' + IO, files=("1/net.bin",)))
CC_KEY_FORMAT = register(
    "PB50", "cc_model_filenames key never matches a GPU", "warning",
    """
    Triton picks a cc_model_filenames entry by comparing the key with the GPU's compute
    capability written "<major>.<minor>" (for example "8.6", "9.0"). Keys such as "86",
    "sm_86" or "8.60" never match, so the entry is silently ignored and the default
    model file is used.
    """, "PB-11",
    example=Example(
        TRT + IO + 'cc_model_filenames { key: "86" value: "model_sm86.plan" }\n', files=("1/model.plan",)
    ))
UNKNOWN_BACKEND = register(
    "PB51", "backend is not a known Triton backend", "warning",
    """
    Triton looks for libtriton_<backend>.so in the version directory, the model
    directory and <backend_dir>/<backend>/, or for a Python-based backend's model.py;
    failing that: "unable to find backend library for backend '<b>', try specifying
    runtime on the model configuration". tritonctl cannot see the server's backend
    directory, so it only knows the backends shipped with Triton images. Check the
    spelling; ignore this warning for custom backends installed on the server.
    """, "PB-06",
    example=Example('backend: "onnxruntme"\nmax_batch_size: 8\n' + IO, files=("1/model.onnx",)))

CONTAINER_BACKEND = register(
    "PB52", "backend shipped in a backend-specific Triton image", "info",
    """
    The vLLM and TensorRT-LLM backends are not in the default Triton image; NVIDIA ships
    them in their own images, nvcr.io/nvidia/tritonserver:<yy.mm>-vllm-python-py3 and
    nvcr.io/nvidia/tritonserver:<yy.mm>-trtllm-python-py3 (or they are installed into
    the server's backend directory). The config is fine; the server must be one of those.
    """, "PB-06",
    example=Example('backend: "vllm"\nmax_batch_size: 0\n' + IO, files=("1/model.json",)))

_RUNTIME_SUFFIXES = (".so", ".dll", ".py")
_CC_KEY = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)")


def _platform_hint(platform: str) -> str:
    suggestion = PLATFORM_ALIASES.get(platform.lower()) or did_you_mean(platform, KNOWN_PLATFORMS)
    if platform.lower() in KNOWN_BACKENDS and platform.lower() not in PLATFORM_ALIASES:
        return f'\'{platform}\' is a backend: write backend: "{platform.lower()}" and remove platform'
    if suggestion:
        return f'did you mean platform: "{suggestion}"?'
    return "use one of " + ", ".join(KNOWN_PLATFORMS[:-1]) + ", or set backend instead"


@model_rule
def check_platform_and_backend(ctx) -> None:
    config, effective = ctx.config, ctx.effective
    if effective.platform == "ensemble":
        if effective.backend:
            ctx.report(ENSEMBLE_WITH_BACKEND, f"ensemble '{ctx.name}' sets backend '{effective.backend}'",
                       ("backend",), hint="remove the backend line; ensembles have none")
        if not config.HasField("ensemble_scheduling"):
            ctx.report(ENSEMBLE_SCHEDULING, f"ensemble '{ctx.name}' has no ensemble_scheduling",
                       ("platform",), hint="add ensemble_scheduling { step [ ... ] } describing the steps")
        return
    if config.HasField("ensemble_scheduling"):
        kind = (f"platform '{effective.platform}'" if effective.platform else
                f"backend '{effective.backend}'" if effective.backend else "it sets no platform")
        ctx.report(ENSEMBLE_SCHEDULING, f"model '{ctx.name}' has ensemble_scheduling but is not an ensemble "
                   f"({kind})", ("ensemble_scheduling",),
                   part="key", hint='set platform: "ensemble" (and no backend), or remove ensemble_scheduling')
    if not effective.backend:
        _report_missing_backend(ctx)
        return
    if effective.platform == "libtorch":
        ctx.report(LIBTORCH_ALIAS, "platform 'libtorch' is accepted for backend detection but fails Triton's "
                   "platform check", ("platform",), hint='write platform: "pytorch_libtorch"')
        return
    allowed = PLATFORMS_OF_BACKEND.get(effective.backend)
    if allowed is None or effective.platform in allowed:
        return
    if effective.backend == "tensorflow" and not effective.platform:
        ctx.report(TENSORFLOW_NO_PLATFORM, "backend 'tensorflow' has no platform and none can be detected",
                   ("backend",), hint='add platform: "tensorflow_savedmodel" or "tensorflow_graphdef"')
        return
    where = ("platform",) if ctx.written(("platform",)) else ("backend",)
    ctx.report(PLATFORM_BACKEND_PAIR, f"platform '{effective.platform}' does not belong to backend "
               f"'{effective.backend}' (it accepts {', '.join(allowed)})", where,
               hint=f'use platform: "{allowed[0]}", or remove platform and keep backend: "{effective.backend}"')


def _report_missing_backend(ctx) -> None:
    config = ctx.config
    if config.platform:
        ctx.report(UNEXPECTED_PLATFORM, f"unexpected platform '{config.platform}': Triton finds no backend for it",
                   ("platform",), hint=_platform_hint(config.platform))
    elif config.default_model_filename:
        ctx.report(CUSTOM_FILENAME_NO_BACKEND, f"default_model_filename '{config.default_model_filename}' is not a "
                   "name Triton derives a backend from, and no backend is set", ("default_model_filename",),
                   hint='add backend: "..." (for example backend: "onnxruntime")')
    elif not ctx.can_check(MODEL_FILES):
        return  # Triton takes the backend from the model file, which is not here
    else:
        numeric = sorted((v.path for v in ctx.versions if v.version is not None), key=lambda p: p.name)
        if numeric:
            try:
                found = ", ".join(sorted(p.name for p in numeric[0].iterdir()))
            except OSError:
                found = ""
            where = f"version directory '{numeric[0].name}' holds {found or 'no files'}"
        else:
            where = "there is no version directory"
        ctx.report(NO_BACKEND_DETECTED, f"cannot determine the backend of model '{ctx.name}': no platform or "
                   f"backend is set and no known model file was found ({where})",
                   hint='set backend: "..." in config.pbtxt, or add the model file (model.onnx, model.plan, '
                   'model.pt, model.py, ...) to the version directory')


@model_rule
def check_runtime(ctx) -> None:
    runtime = ctx.config.runtime
    if not runtime:
        return
    inside = posixpath.normpath(posixpath.join("backend_dir", runtime.replace("\\", "/")))
    if posixpath.isabs(runtime) or not inside.startswith("backend_dir/"):
        ctx.report(RUNTIME_ESCAPES, f"runtime '{runtime}' points outside the backend directory", ("runtime",),
                   hint="give only a file name such as libtriton_mybackend.so or model.py")
    elif not runtime.endswith(_RUNTIME_SUFFIXES) and not _has_local_library(ctx, ctx.effective.backend):
        backend = ctx.effective.backend
        ctx.report(RUNTIME_NOT_A_LIBRARY, f"runtime '{runtime}' is neither a shared library (.so) nor a "
                   "Python file (.py): Triton will not find a backend library by that name", ("runtime",),
                   hint=f"remove runtime to load libtriton_{backend}.so" if backend else
                   "name a libtriton_<backend>.so or model.py, or remove runtime")


def _has_local_library(ctx, backend: str) -> bool:
    names = {f"libtriton_{backend}.so"} | ({ctx.config.runtime} if ctx.config.runtime else set())
    places = [ctx.model_dir] + [v.path for v in ctx.versions]
    return any((place / name).is_file() for place in places for name in names)


@model_rule
def check_known_backend(ctx) -> None:
    backend = ctx.effective.backend
    if not backend or ctx.is_ensemble or backend in KNOWN_BACKENDS or _has_local_library(ctx, backend):
        return
    if backend in CONTAINER_BACKENDS:
        ctx.report(CONTAINER_BACKEND, f"backend '{backend}' ships in Triton's {backend} image "
                   f"(nvcr.io/nvidia/tritonserver:<yy.mm>-{CONTAINER_BACKENDS[backend]}), not in the default one",
                   ("backend",), hint=f"serve this model with that image, or install the {backend} backend into the "
                                      "server's backend directory")
        return
    suggestion = did_you_mean(backend, KNOWN_BACKENDS)
    hint = f'did you mean backend: "{suggestion}"?' if suggestion else \
        f"make sure libtriton_{backend}.so (or {backend}/model.py) is installed in the server's backend directory"
    ctx.report(UNKNOWN_BACKEND, f"backend '{backend}' is not one of the backends shipped with Triton "
               f"({', '.join(KNOWN_BACKENDS)})", ("backend",), hint=hint)


@model_rule
def check_cc_model_filenames(ctx) -> None:
    for key in ctx.config.cc_model_filenames:
        if key and not _CC_KEY.fullmatch(key):
            ctx.report(CC_KEY_FORMAT, f"cc_model_filenames key '{key}' is not a compute capability like \"8.6\"; "
                       "Triton never selects this entry", ("cc_model_filenames", key, "key"),
                       hint=_cc_hint(key))


def _cc_hint(key: str) -> str:
    digits = re.sub(r"\D", "", key)
    if len(digits) == 2:
        return f'write key: "{digits[0]}.{digits[1]}"'
    return 'write the compute capability as "<major>.<minor>", for example "8.6"'
