"""`parameters` (PAR-*): the string key/values each backend reads.

Backends parse the values they know and fail the load on bad ones; keys they do not
know are silently ignored, which hides typos.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, ONNX, ORT_OK, Example
from tritonctl.repo_schema.normalize import runs_python_runtime
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.textproto import did_you_mean

ENV_PATH = register(
    "PAR01", "EXECUTION_ENV_PATH archive missing", "error",
    """
    EXECUTION_ENV_PATH points a Python model at a conda-pack archive (.tar.gz) that the
    stub unpacks before it starts, or at an environment directory it uses as it is
    (as Triton's Python backend does). `$$TRITON_MODEL_DIRECTORY` stands for the model's
    directory, so such a path can be checked offline: when the archive is not there,
    the model fails to load. Ship the archive inside the model directory, or use an
    absolute path that exists on the server.
    """, "PAR-01",
    example=Example(
        H
        + IO
        + 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }\n'
    ))
BAD_VALUE = register(
    "PAR02", "parameter value the backend rejects", "error",
    """
    Backends parse the parameters they know and refuse the model when a value does not
    parse. Booleans accept true/false, on/off, 1/0 (any case); integers must be
    decimal numbers; some keys take a fixed set of values (onnxruntime execution_mode
    0 or 1; FORCE_CPU_ONLY_INPUT_TENSORS yes or no; TensorRT
    execution_context_allocation_strategy STATIC or ON_PROFILE_CHANGE). Typical
    errors: "failed to convert '<v>' to boolean", "Invalid configuration value
    provided. Expected values for execution_mode are 0 or 1".
    """, "PAR-02",
    example=Example(
        ONNX + IO + 'parameters { key: "execution_mode" value { string_value: "2" } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ))
UNKNOWN_KEY = register(
    "PAR50", "parameter key the backend does not read", "warning",
    """
    Backends read only the parameter keys they know and silently ignore the rest, so a
    misspelled key (enable_mem_arna, Execution_Mode) has no effect and no error.
    Python models may read their own keys from args["model_config"]; tritonctl only
    warns about those when the key looks like a typo of a known one and model.py does
    not mention it.
    """, "NC-05",
    example=Example(
        ONNX + IO + 'parameters { key: "intra_op_threads" value { string_value: "4" } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ))

_INT = re.compile(r"[ \t\n\r\f\v]*[+-]?\d+")


def _int_value(value: str) -> int | None:
    """Like std::stoi: leading digits count, the rest is ignored; None when it throws."""
    match = _INT.match(value)
    if match is None:
        return None
    number = int(match.group())
    return number if -(2**31) <= number < 2**31 else None


@dataclass(frozen=True)
class Check:
    """A value check: returns an error description, or None when the value is fine."""

    describe: str
    test: Callable[[str], bool]

    def problem(self, value: str) -> str | None:
        return None if self.test(value) else self.describe


def _is_int(value: str) -> bool:
    return _int_value(value) is not None


def _is_bool(value: str) -> bool:
    return value.lower() in ("true", "on", "1", "false", "off", "0")


def _int_in(*allowed: int) -> Callable[[str], bool]:
    return lambda value: _int_value(value) in allowed


def _one_of(*allowed: str) -> Callable[[str], bool]:
    return lambda value: value in allowed


def _gpu_list(value: str) -> bool:
    ids = [part.strip() for part in value.split(",")]
    return len(ids) >= 2 and all(part.isdigit() for part in ids)


ANY = Check("", lambda value: True)
INT = Check("an integer", _is_int)
BOOL = Check("a boolean (true/false, on/off, 1/0)", _is_bool)

COMMON_KEYS = {"TRITON_BATCH_STRATEGY_PATH": ANY}
BACKEND_KEYS: dict[str, dict[str, Check]] = {
    "onnxruntime": {
        "execution_mode": Check("0 (sequential) or 1 (parallel)", _int_in(0, 1)),
        "intra_op_thread_count": INT,
        "inter_op_thread_count": INT,
        "enable_mem_arena": BOOL,
        "enable_mem_pattern": BOOL,
        "session.use_device_allocator_for_initializers": ANY,
        "memory.enable_memory_arena_shrinkage": ANY,
        "cudnn_conv_algo_search": Check("0 (EXHAUSTIVE), 1 (HEURISTIC) or 2 (DEFAULT)", _int_in(0, 1, 2)),
        "gpu_mem_limit": ANY,
        "arena_extend_strategy": Check("0 (kNextPowerOfTwo) or 1 (kSameAsRequested)", _int_in(0, 1)),
        "do_copy_in_default_stream": ANY,
    },
    "tensorrt": {
        "execution_context_allocation_strategy": Check("STATIC or ON_PROFILE_CHANGE",
                                                       _one_of("STATIC", "ON_PROFILE_CHANGE")),
        "enable_multi_device": BOOL,
        "multi_device_gpus": Check("a comma-separated list of at least two GPU ids", _gpu_list),
        "multi_device_per_rank_engines": BOOL,
    },
    "pytorch": {
        **{key: BOOL for key in ("DISABLE_OPTIMIZED_EXECUTION", "ENABLE_CACHE_CLEANING", "INFERENCE_MODE",
                                 "DISABLE_CUDNN", "ENABLE_TENSOR_FUSER", "ENABLE_WEIGHT_SHARING",
                                 "ENABLE_JIT_PROFILING", "ENABLE_JIT_EXECUTOR")},
        "INTRA_OP_THREAD_COUNT": INT,
        "INTER_OP_THREAD_COUNT": INT,
    },
    "python": {
        "EXECUTION_ENV_PATH": ANY,
        "FORCE_CPU_ONLY_INPUT_TENSORS": Check("yes or no", _one_of("yes", "no")),
    },
}


def _is_python_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _is_compile_arguments(value: str) -> bool:
    try:
        arguments = json.loads(value)
    except ValueError:
        return False
    return isinstance(arguments, dict) and "model" not in arguments


# The keys of a backend's Python runtime (runtime: "model.py"): the Python backend's own and
# those the runtime's model.py reads. PyTorch's (python_backend's platform_handlers/pytorch)
# parses the thread counts with int() and the torch.compile() arguments with json.loads().
PYTHON_RUNTIME_KEYS: dict[str, dict[str, Check]] = {
    "pytorch": {
        **BACKEND_KEYS["python"],
        "NUM_THREADS": Check("a whole number", _is_python_int),
        "NUM_INTEROP_THREADS": Check("a whole number", _is_python_int),
        "TORCH_COMPILE_OPTIONAL_PARAMETERS": Check("a JSON object of torch.compile() arguments other than 'model'",
                                                   _is_compile_arguments),
    },
}
MODEL_DIR_VARIABLE = "$$TRITON_MODEL_DIRECTORY"


def known_keys(backend: str, python_runtime: bool = False) -> dict[str, Check] | None:
    """The keys ``backend`` reads (through its Python runtime, with ``python_runtime``), or None
    when tritonctl does not know them."""
    keys = (PYTHON_RUNTIME_KEYS if python_runtime else BACKEND_KEYS).get(backend)
    return None if keys is None else {**COMMON_KEYS, **keys}


def _model_code(ctx) -> str:
    texts = []
    for vdir in ctx.versions:
        try:
            texts.append((vdir.path / (ctx.effective.default_model_filename or "model.py")).read_text(errors="ignore"))
        except OSError:
            continue
    return "\n".join(texts)


# The words Triton's backends fail a load with, for a value that does not parse.
PARSE_FAILURES = {"a boolean (true/false, on/off, 1/0)": "boolean", "an integer": "integral number"}


def _bad_value_text(key: str, value: str, reader: str, check: Check) -> str:
    text = f"parameter '{key}' is {value!r}; the {reader} expects {check.describe}"
    target = PARSE_FAILURES.get(check.describe)
    return f"failed to convert '{value}' to {target} ({text})" if target else text


@model_rule
def check_parameters(ctx) -> None:
    if ctx.is_ensemble or not ctx.config.parameters:
        return
    backend = ctx.effective.backend
    python_runtime = runs_python_runtime(ctx.effective)
    keys = known_keys(backend, python_runtime)
    if keys is None:
        return
    reader = f"{backend} backend's Python runtime" if python_runtime else f"{backend} backend"
    model_code = None
    for key, param in ctx.config.parameters.items():
        value_path = ("parameters", key, "value", "string_value")
        check = keys.get(key)
        if check is not None:
            problem = check.problem(param.string_value)
            if problem:
                ctx.report(BAD_VALUE, _bad_value_text(key, param.string_value, reader, check), value_path,
                           hint=f"set string_value to {problem}")
            continue
        suggestion = did_you_mean(key, keys)
        if backend == "python":
            if suggestion is None or not ctx.can_check(MODEL_FILES):
                continue  # model.py may read any key it likes
            model_code = _model_code(ctx) if model_code is None else model_code
            if key in model_code:
                continue
        message = f"the {reader} does not read parameter '{key}', so it has no effect"
        hint = f"did you mean '{suggestion}'?" if suggestion else \
            f"keys the {reader} reads: {', '.join(sorted(keys))}"
        ctx.report(UNKNOWN_KEY, message, ("parameters", key, "key"), hint=hint)


@model_rule
def check_execution_env_path(ctx) -> None:
    param = ctx.config.parameters.get("EXECUTION_ENV_PATH")
    if param is None or not param.string_value.startswith(MODEL_DIR_VARIABLE):
        return
    relative = param.string_value[len(MODEL_DIR_VARIABLE):].lstrip("/")
    if not ctx.can_check(MODEL_FILES):
        return
    if not (ctx.model_dir / relative).exists():  # an archive, or an environment directory
        ctx.report(ENV_PATH, f"EXECUTION_ENV_PATH points to {relative!r} in model '{ctx.name}', which does not exist",
                   ("parameters", "EXECUTION_ENV_PATH", "value", "string_value"),
                   hint=f"put the conda-pack archive at {ctx.name}/{relative}")
