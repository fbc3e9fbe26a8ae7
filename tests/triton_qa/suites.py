"""The QA suites run_suites.py knows: which upstream test files run, how each suite's model
repository is built (as its test.sh builds it, with Python models where Triton uses its C++
identity backend or ONNX identity models), the server options, and the cases that cannot apply
on a CPU-only machine without Triton's C++ backends, each with its reason."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

UPSTREAM = Path(__file__).resolve().parent / "upstream"
STANDINS = Path(__file__).resolve().parent / "standins"
EXAMPLE_ADD_SUB = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "add_sub" / "1" / "model.py"
# Upstream files this checkout does not carry, laid out as upstream/ (L0_<suite>/, python_models/):
# fetched once from triton-inference-server/server's qa/ into this directory (see README.md).
FETCHED = Path(os.environ.get("QA_UPSTREAM_FETCHED")
               or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tritonctl-qa-upstream")


def upstream_path(relative: str) -> Path:
    """``relative`` (e.g. "L0_string_io" or "python_models/string_identity") under upstream/,
    else under FETCHED; the upstream/ path when neither has it."""
    for root in (UPSTREAM, FETCHED):
        if (root / relative).exists():
            return root / relative
    return UPSTREAM / relative


@dataclass(frozen=True)
class Phase:
    """One server start of a suite (test.sh restarts the server with other options between
    some runs); its cases are reported as '[label] Class.test'."""

    label: str = ""
    tests: tuple[str, ...] = ()  # default: the suite's
    tritonctl_args: tuple[str, ...] = ()
    triton_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    build: Callable[[Path, Path], None] | None = None  # default: the suite's
    # What test.sh does to the running server between two of its client runs: test -> an action
    # called with the server's process id before that test (of ``tests``) runs.
    before: dict[str, Callable[[int], None]] = field(default_factory=dict)
    # What test.sh POSTs with curl once the server is up, before its client run: (path, JSON
    # body), each to answer 200; and what it greps from the server's log once the server is
    # stopped: text -> the number of lines that must hold it. Reported as the phase's case
    # "test.sh.checks".
    posts: tuple[tuple[str, str], ...] = ()
    log_counts: dict[str, int] = field(default_factory=dict)
    server_log: str | None = None  # default: the suite's


@dataclass(frozen=True)
class Suite:
    name: str
    tests: tuple[str, ...]
    build: Callable[[Path, Path], None]  # (staged suite directory, repository to create)
    phases: tuple[Phase, ...] = (Phase(),)
    not_applicable: dict[str, str] = field(default_factory=dict)  # "[label] Class.test" -> reason
    env: dict[str, str] = field(default_factory=dict)
    server_log: str | None = None  # where the tests read the server's log, in the suite directory
    # Variables that the server's models read as well as the client (test.sh exports them before it
    # starts the server); "{suite_dir}" in a value becomes the staged suite directory.
    server_env: dict[str, str] = field(default_factory=dict)
    # Adjustments of the client's environment (run_suites.CLIENT_SHIMS) for test files written
    # against older helpers: "numpy_aliases" (np.object etc., removed in numpy 1.24, back as the
    # builtins they were), "shm_probe_debug_str" (ShmLeakDetector.Probe's debug_str argument,
    # which the kept common/shm_util.py no longer takes).
    client_shims: tuple[str, ...] = ()
    case_timeout_s: int = 120
    suite_timeout_s: int = 900
    start_timeout_s: float = 120


EXPLICIT_ALL = ("--model-control-mode", "explicit", "--load-model", "*")
TRITON_EXPLICIT_ALL = ("--model-control-mode=explicit", "--load-model=*")


def copy_model(source: Path, repository: Path, name: str | None = None, version: str = "1",
               config_edit: Callable[[str], str] | None = None) -> Path:
    """A model directory from ``source``: its config.pbtxt (renamed and edited as test.sh's
    sed does) and its model.py, put into version ``version`` as Triton's layout wants."""
    name = name or source.name
    target = repository / name
    (target / version).mkdir(parents=True, exist_ok=True)
    config = (source / "config.pbtxt").read_text()
    if name != source.name:
        config = config.replace(f'name: "{source.name}"', f'name: "{name}"')
    if config_edit:
        config = config_edit(config)
    (target / "config.pbtxt").write_text(config)
    model = source / "model.py" if (source / "model.py").is_file() else source / "1" / "model.py"
    shutil.copy(model, target / version / "model.py")
    return target


def python_model(name: str) -> Path:
    return upstream_path(f"python_models/{name}")


# ------------------------------------------------------------ L0_input_validation

def build_input_validation(suite_dir: Path, repository: Path) -> None:
    """test.sh serves ./models as they are; the three models share one model.py (upstream has
    three copies with the same body)."""
    model = suite_dir / "models" / "input_optional" / "1" / "model.py"
    for name in ("input_all_optional", "input_all_required", "input_optional"):
        target = repository / name
        (target / "1").mkdir(parents=True)
        shutil.copy(suite_dir / "models" / name / "config.pbtxt", target / "config.pbtxt")
        shutil.copy(model, target / "1" / "model.py")


INPUT_VALIDATION = Suite(
    name="L0_input_validation",
    tests=("input_validation_test.py",),
    build=build_input_validation,
    not_applicable={
        "InputShapeTest.test_input_shape_validation":
            "needs 'pt_identity', a libtorch (C++ PyTorch backend) model from input_shape_validation_test.py's "
            "setup; the real Triton here has only the Python backend",
    },
)



def build_as_is(models: str) -> Callable[[Path, Path], None]:
    """test.sh serves the suite's own ``models`` directory unchanged."""
    def build(suite_dir: Path, repository: Path) -> None:
        shutil.copytree(suite_dir / models, repository)
    return build


# ------------------------------------------------------------ L0_nan_inf

NAN_INF = Suite(name="L0_nan_inf", tests=("nan_inf_test.py",), build=build_as_is("models"))


# ------------------------------------------------------------ L0_parameters

def build_parameters(suite_dir: Path, repository: Path) -> None:
    """model_repository/ as test.sh makes it; its 'identity' step uses Triton's C++ identity
    backend, here the Python identity model (identity_fp32's model.py) with the same config."""
    shutil.copytree(suite_dir / "model_repository", repository)
    (repository / "ensemble" / "1").mkdir(exist_ok=True)
    identity = repository / "identity"
    (identity / "1").mkdir(exist_ok=True)
    config = identity / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "identity"', 'backend: "python"'))
    shutil.copy(python_model("identity_fp32") / "model.py", identity / "1" / "model.py")


def header_pattern(pattern: str) -> tuple[str, ...]:
    return (f"--grpc-header-forward-pattern={pattern}", f"--http-header-forward-pattern={pattern}")


PARAMETERS = Suite(
    name="L0_parameters",
    tests=("parameters_test.py",),
    build=build_parameters,
    phases=(
        Phase("params", tritonctl_args=("--exit-timeout-secs", "120"), triton_args=("--exit-timeout-secs=120",)),
        # test.sh's header run: the headers my_header_1..3 must reach the model's parameters,
        # header_1 and header_2 must not.
        Phase("headers", env={"TEST_HEADER": "1"},
              tritonctl_args=("--exit-timeout-secs", "120", *header_pattern("my_header.*")),
              triton_args=("--exit-timeout-secs=120", *header_pattern("my_header.*"))),
        # The later test.sh's test_header_forward_pattern_case_insensitive run: the same cases
        # with the pattern in upper case (the match is case-insensitive).
        Phase("headers-upper-case-pattern", env={"TEST_HEADER": "1"},
              tritonctl_args=("--exit-timeout-secs", "120", *header_pattern("MY_HEADER.*")),
              triton_args=("--exit-timeout-secs=120", *header_pattern("MY_HEADER.*"))),
    ),
)


# ------------------------------------------------------------ L0_request_cancellation

def identity_standin(repository: Path, name: str, config: str) -> None:
    """A model whose test.sh config names Triton's C++ identity backend: the same config on
    the Python backend, run by the stand-in identity model (standins/identity)."""
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(config.replace('backend: "identity"', 'backend: "python"'))
    shutil.copy(STANDINS / "identity" / "model.py", repository / name / "1" / "model.py")


def _io(data_type: str) -> str:
    return (f'input [{{ name: "INPUT0" \n data_type: {data_type} \n dims: [ -1 ] }}]\n'
            f'output [{{ name: "OUTPUT0" \n data_type: {data_type} \n dims: [ -1 ] }}]\n').replace("\\n", "\n")


def build_request_cancellation(suite_dir: Path, repository: Path) -> None:
    """The 'End-to-end scheduler tests' repository of test.sh, config for config."""
    delay = 'parameters [{ key: "execute_delay_ms" \n value: { string_value: "6000" } }]\n'
    one_instance = "instance_group [{ count: 1 \n kind: KIND_CPU }]\n"
    identity_standin(repository, "dynamic_batch", 'name: "dynamic_batch"\nbackend: "identity"\nmax_batch_size: 2\n'
                     + _io("TYPE_FP32") + one_instance
                     + "dynamic_batching { max_queue_delay_microseconds: 600000 }\n" + delay)
    identity_standin(repository, "sequence_direct", 'name: "sequence_direct"\nbackend: "identity"\nmax_batch_size: 1\n'
                     + _io("TYPE_FP32") + one_instance
                     + "sequence_batching { direct { } \n max_sequence_idle_microseconds: 6000000 }\n" + delay)
    identity_standin(repository, "sequence_oldest", 'name: "sequence_oldest"\nbackend: "identity"\nmax_batch_size: 1\n'
                     + _io("TYPE_FP32") + one_instance
                     + "sequence_batching { oldest { max_candidate_sequences: 1 } \n"
                       " max_sequence_idle_microseconds: 6000000 }\n" + delay)
    ensemble = repository / "ensemble_model"
    (ensemble / "1").mkdir(parents=True)
    (ensemble / "config.pbtxt").write_text(
        'name: "ensemble_model"\nplatform: "ensemble"\nmax_batch_size: 1\n' + _io("TYPE_FP32")
        + "ensemble_scheduling { step [\n"
        '{ model_name: "dynamic_batch" \n model_version: -1 \n input_map { key: "INPUT0" \n value: "INPUT0" } \n'
        ' output_map { key: "OUTPUT0" \n value: "out" } },\n'
        '{ model_name: "dynamic_batch" \n model_version: -1 \n input_map { key: "INPUT0" \n value: "out" } \n'
        ' output_map { key: "OUTPUT0" \n value: "OUTPUT0" } }\n'
        "] }\n")


REQUEST_CANCELLATION = Suite(
    name="L0_request_cancellation",
    tests=("scheduler_test.py",),
    build=build_request_cancellation,
    phases=(Phase(tritonctl_args=("--log-verbose", "2"), triton_args=("--log-verbose=2",)),),
    not_applicable={},
)


# ------------------------------------------------------------ L0_optional_input

def build_optional_input(suite_dir: Path, repository: Path) -> None:
    """./models as test.sh serves it; identity_2_float32 names the C++ identity backend."""
    shutil.copytree(suite_dir / "models", repository)
    for name in ("ensemble_identity_2_float32", "pipeline_identity_2_float32", "optional_connecting_tensor"):
        (repository / name / "1").mkdir(exist_ok=True)
    config = (repository / "identity_2_float32" / "config.pbtxt").read_text()
    shutil.rmtree(repository / "identity_2_float32")
    identity_standin(repository, "identity_2_float32", config)


OPTIONAL_INPUT_CASES = ("test_all_inputs", "test_optional_same_input", "test_optional_mix_inputs",
                        "test_optional_mix_inputs_2", "test_ensemble_all_inputs", "test_ensemble_optional_same_input",
                        "test_ensemble_optional_mix_inputs", "test_ensemble_optional_mix_inputs_2",
                        "test_ensemble_optional_pipeline", "test_ensemble_optional_connecting_tensor")

OPTIONAL_INPUT = Suite(
    name="L0_optional_input",
    tests=("optional_input_test.py",),
    build=build_optional_input,
    # test.sh restarts the server for every case, to start from clear statistics.
    phases=tuple(Phase(tests=(f"optional_input_test.py::OptionalInputTest::{case}",),
                       tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",))
                 for case in OPTIONAL_INPUT_CASES),
)


# ------------------------------------------------------------ L0_backend_python/response_sender

def build_response_sender(suite_dir: Path, repository: Path) -> None:
    """The first repository of test.sh: model.py or model_async.py with model_common.py, plain,
    decoupled, and with dynamic batching."""
    source = python_model("response_sender")
    for decoupled in (False, True):
        for use_async in (False, True):
            for batching in (False, True):
                name = "response_sender" + "_decoupled" * decoupled + "_async" * use_async + "_batching" * batching
                (repository / name / "1").mkdir(parents=True)
                shutil.copy(source / "model_common.py", repository / name / "1")
                shutil.copy(source / ("model_async.py" if use_async else "model.py"),
                            repository / name / "1" / "model.py")
                config = (source / "config.pbtxt").read_text()
                if decoupled:
                    config += "model_transaction_policy { decoupled: True }\n"
                if batching:
                    config += "dynamic_batching { max_queue_delay_microseconds: 500000 }\n"
                (repository / name / "config.pbtxt").write_text(config)


RESPONSE_SENDER = Suite(
    name="L0_backend_python/response_sender",
    tests=("response_sender_test.py",),
    build=build_response_sender,
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
)


# ------------------------------------------------------------ L0_backend_python/request_rescheduling

def build_request_rescheduling(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository less bls_request_rescheduling and wrong_return_type, which only its
    python_unittest.py run uses (not part of this port)."""
    for name in ("request_rescheduling_addsub", "iterative_sequence"):
        copy_model(python_model(name), repository)


REQUEST_RESCHEDULING = Suite(
    name="L0_backend_python/request_rescheduling",
    tests=("grpc_endpoint_test.py",),
    build=build_request_rescheduling,
    phases=(Phase(tritonctl_args=(*EXPLICIT_ALL, "--log-verbose", "1"),
                  triton_args=(*TRITON_EXPLICIT_ALL, "--log-verbose=1")),),
)


# ------------------------------------------------------------ L0_backend_python/model_control

def build_model_control(suite_dir: Path, repository: Path) -> None:
    copy_model(python_model("identity_fp32"), repository)
    (repository / "simple_identity_fp32" / "1").mkdir(parents=True)
    shutil.copy(python_model("simple_identity_fp32") / "config.pbtxt", repository / "simple_identity_fp32")


# shm_util's leak probe reads Triton's Python-backend shared memory through Triton's compiled
# triton_shm_monitor module; the tests skip it where TEST_JETSON=1, as on Jetson.
NO_SHM_PROBE = {"TEST_JETSON": "1"}

MODEL_CONTROL = Suite(
    name="L0_backend_python/model_control",
    tests=("model_control_test.py",),
    build=build_model_control,
    env=NO_SHM_PROBE,
    phases=(Phase(tritonctl_args=("--model-control-mode", "explicit", "--log-verbose", "1"),
                  triton_args=("--model-control-mode=explicit", "--log-verbose=1")),),
    not_applicable={
        "ExplicitModelTest.test_faulty_model_load":
            "its model auto_complete_error is not in the repository test.sh builds (identity_fp32 and "
            "simple_identity_fp32 only), so the load fails on any server for that reason",
    },
)


# ------------------------------------------------------------ L0_backend_python/lifecycle

def _sed_name(name: str) -> Callable[[str], str]:
    return lambda config: re.sub(r"(?m)^name:.*", f'name: "{name}"', config)


def build_lifecycle(suite_dir: Path, repository: Path) -> None:
    """The first repository of test.sh (the init/fini/auto-complete error runs that follow grep
    the server log of a failed start and are not ported)."""
    for name in ("error_code", "execute_cancel", "execute_return_error"):
        copy_model(python_model(name), repository)
    copy_model(python_model("execute_error"), repository, config_edit=lambda config: re.sub(
        r"(?m)^max_batch_size:.*", "max_batch_size: 8", _sed_name("execute_error")(config))
        + "dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }\n")
    copy_model(python_model("wrong_model"), repository, config_edit=lambda config: _sed_name("wrong_model")(
        config).replace("TYPE_FP32", "TYPE_UINT32"))


LIFECYCLE = Suite(
    name="L0_backend_python/lifecycle",
    tests=("lifecycle_test.py",),
    build=build_lifecycle,
    env=NO_SHM_PROBE,
    server_log="lifecycle_server.log",
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
    not_applicable={
        "LifecycleTest.test_batch_error":
            "the case expects an execute_error model that fails the first and third request of a batch; "
            "the model.py kept here (the version published with it that this port could fetch) fails every "
            "request, so it fails on any server",
    },
)


# ------------------------------------------------------------ L0_string_io

def build_string_io(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository: qa_identity_model_repository's graphdef_nobatch_zero_1_object (a
    TensorFlow identity model over one BYTES tensor of any length, here the Python identity
    stand-in with that config) and python_models/string_identity with its dims [ 1 ] made
    [ 8 ] by test.sh's sed."""
    identity_standin(repository, "graphdef_nobatch_zero_1_object",
                     'name: "graphdef_nobatch_zero_1_object"\nbackend: "identity"\nmax_batch_size: 0\n'
                     'input [{ name: "INPUT0" \n data_type: TYPE_STRING \n dims: [ -1 ] }]\n'
                     'output [{ name: "OUTPUT0" \n data_type: TYPE_STRING \n dims: [ -1 ] }]\n')
    copy_model(python_model("string_identity"), repository,
               config_edit=lambda config: config.replace("[ 1 ]", "[ 8 ]", 1))


STRING_IO = Suite(
    name="L0_string_io",
    tests=("string_client_test.py",),
    build=build_string_io,
    client_shims=("numpy_aliases",),  # the stored string_client_test.py uses np.object
)


# ------------------------------------------------------------ L0_queue_timeout

def build_queue_timeout(suite_dir: Path, repository: Path) -> None:
    """One identity model whose execution (8 s) outlasts the queue policy's 1 s timeout, one
    instance, so that the second request waits in the queue. The stored copy of Triton's qa/
    this port read has the suite's test file but not its test.sh: the config is test.sh's
    (identity backend, execute_delay_ms 8000, REJECT after 1 s, max_queue_size 8) as
    remembered, and all the case needs is an execution longer than 6 s and a timeout under 2 s."""
    identity_standin(repository, "dynamic_batch",
                     'name: "dynamic_batch"\nbackend: "identity"\nmax_batch_size: 1\n' + _io("TYPE_FP32")
                     + "instance_group [{ count: 1 \n kind: KIND_CPU }]\n"
                     + "dynamic_batching { \n preferred_batch_size: [ 1 ] \n default_queue_policy {"
                       " timeout_action: REJECT \n default_timeout_microseconds: 1000000 \n max_queue_size: 8 } }\n"
                     + 'parameters [{ key: "execute_delay_ms" \n value: { string_value: "8000" } }]\n')


QUEUE_TIMEOUT = Suite(name="L0_queue_timeout", tests=("queue_timeout_test.py",), build=build_queue_timeout)


# ------------------------------------------------------------ Triton's 'simple' model

SIMPLE_CONFIG = """name: "simple"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
"""


def build_simple(suite_dir: Path, repository: Path) -> None:
    """Triton's 'simple' model (a TensorFlow add/sub graph in its QA model repository) as a Python
    stand-in: the bundled example's add_sub code (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 -
    INPUT1) under 'simple's name, inputs, outputs and batch size."""
    (repository / "simple" / "1").mkdir(parents=True)
    (repository / "simple" / "config.pbtxt").write_text(SIMPLE_CONFIG)
    shutil.copy(EXAMPLE_ADD_SUB, repository / "simple" / "1" / "model.py")


def restricted(flag: str, *groups: str) -> dict[str, tuple[str, ...]]:
    """A Phase's arguments (tritonctl's and tritonserver's) giving ``flag`` each of ``groups``."""
    return {"tritonctl_args": tuple(arg for group in groups for arg in (flag, group)),
            "triton_args": tuple(f"{flag}={group}" for group in groups)}


# ------------------------------------------------------------ L0_http

def _identity_config(name: str, count: int, data_type: str, dims: str, max_batch_size: int = 8) -> str:
    tensors = lambda kind: ", ".join(f'{{ name: "{kind}{i}" \n data_type: {data_type} \n dims: {dims} }}'
                                     for i in range(count))
    return (f'name: "{name}"\nbackend: "identity"\nmax_batch_size: {max_batch_size}\n'
            f"input [ {tensors('INPUT')} ]\noutput [ {tensors('OUTPUT')} ]\n")


def build_http(suite_dir: Path, repository: Path) -> None:
    """test.sh's python_unit_test_models, the repository of its http_test.py run: ONNX identity
    models of qa_identity_model_repository (the identity stand-in with their configs: batching
    up to 8, variable-sized dims, FP16's two of them), onnx_zero_1_object_1_element (test.sh's
    sed makes its first -1 a 1) and onnx_zero_1_float32_queue (a queue of at most one request
    that holds it up to 1 s for a batch of 8)."""
    identity_standin(repository, "onnx_zero_1_float32", _identity_config("onnx_zero_1_float32", 1, "TYPE_FP32", "[ -1 ]"))
    identity_standin(repository, "onnx_zero_1_object", _identity_config("onnx_zero_1_object", 1, "TYPE_STRING", "[ -1 ]"))
    identity_standin(repository, "onnx_zero_1_float16",
                     _identity_config("onnx_zero_1_float16", 1, "TYPE_FP16", "[ -1, -1 ]"))
    identity_standin(repository, "onnx_zero_3_float32", _identity_config("onnx_zero_3_float32", 3, "TYPE_FP32", "[ -1 ]"))
    identity_standin(repository, "onnx_zero_1_object_1_element",
                     _identity_config("onnx_zero_1_object_1_element", 1, "TYPE_STRING", "[ -1 ]").replace("-1", "1", 1))
    identity_standin(repository, "onnx_zero_1_float32_queue",
                     _identity_config("onnx_zero_1_float32_queue", 1, "TYPE_FP32", "[ -1 ]")
                     + "dynamic_batching { \n    max_queue_delay_microseconds: 1000000\n    preferred_batch_size: [ 8 ]\n"
                       "    default_queue_policy {\n        max_queue_size: 1\n    }\n}\n")


HTTP = Suite(
    name="L0_http",
    tests=("http_test.py",),
    build=build_http,
    phases=(Phase(),
            # test.sh's restricted-API run: model-repository behind admin-key, inference and
            # metadata behind infer-key (build_simple: the 'simple' stand-in of L0_grpc's run).
            Phase("restricted_api", tests=("http_restricted_api_test.py::RestrictedAPITest",), build=build_simple,
                  **restricted("--http-restricted-api", "model-repository:admin-key=admin-value",
                               "inference,metadata:infer-key=infer-value"))),
)


# ------------------------------------------------------------ L0_backend_python/bls

def build_bls_parameters(suite_dir: Path, repository: Path) -> None:
    """test.sh's params_models: bls_parameters, which calls itself through BLS, adding request
    parameters of each type at every step (its config gives it 4 instances for the 3 steps)."""
    copy_model(python_model("bls_parameters"), repository)


BLS = Suite(
    name="L0_backend_python/bls",
    tests=("bls_parameters_test.py",),
    build=build_bls_parameters,
    # test.sh's main run (python_unittest.py over the bls models) needs ONNX, libtorch and
    # TensorRT add_sub models and CUDA tensors: not ported; its bls_parameters run is.
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
)


# ------------------------------------------------------------ L0_backend_python/decoupled

def build_decoupled(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository: the suite's own models/ (those fetched), identity_fp32 and
    execute_cancel made decoupled by test.sh's echo. Left out: dlpack_add_sub and decoupled_bls
    (torch and CUDA tensors), square_int32 and decoupled_bls_stream (square_int32 comes from the
    python_backend repository's examples, which test.sh clones), decoupled_send_after_close_error
    (its stored model.py cannot load)."""
    shutil.copytree(suite_dir / "models", repository)
    shutil.rmtree(repository / "decoupled_send_after_close_error", ignore_errors=True)
    copy_model(python_model("identity_fp32"), repository)
    copy_model(python_model("execute_cancel"), repository,
               config_edit=lambda config: config + "model_transaction_policy { decoupled: True }\n")


DECOUPLED = Suite(
    name="L0_backend_python/decoupled",
    tests=("decoupled_test.py",),
    build=build_decoupled,
    env=NO_SHM_PROBE,
    client_shims=("shm_probe_debug_str",),
    server_log="decoupled_server.log",
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
    not_applicable={
        "DecoupledTest.test_decoupled_bls":
            "its model moves torch tensors to CUDA through DLPack (a GPU) and BLS-calls dlpack_add_sub, which "
            "needs torch",
        "DecoupledTest.test_decoupled_bls_stream":
            "its square_int32 model is python_backend's examples/decoupled/square_model.py, which test.sh clones; "
            "the stored version of that file is an early draft that cannot run on any server (its thread target "
            "response_thread, and numpy and time, are undefined names)",
        "DecoupledTest.test_decoupled_send_after_close_error":
            "the stored model.py of decoupled_send_after_close_error lacks its imports (json, "
            "triton_python_backend_utils): it fails to load on any server (Triton 2.51: \"NameError: name 'json' "
            "is not defined\", and then refuses to start), so the model is left out",
    },
)


# ------------------------------------------------------------ L0_grpc

GRPC = Suite(
    name="L0_grpc",
    tests=("grpc_client_plugin_test.py",),
    build=build_as_is("client_plugin_models"),
    # test.sh's client plugin run: every header forwarded, so that the headers a client plugin
    # adds reach the model as request parameters; and its restricted-protocol run
    # (python_unit_test.py RestrictedProtocolTest, the server in the default model control
    # mode, 'simple' a Python stand-in). Its other runs drive the C++ and Python client examples
    # over Triton's 'simple' models, nginx (basic auth) and grpc-health-probe (fetched with
    # `go install`): not ported.
    phases=(Phase("client_plugin", tritonctl_args=header_pattern(".*"), triton_args=header_pattern(".*")),
            Phase("restricted_protocol", tests=("python_unit_test.py::RestrictedProtocolTest",), build=build_simple,
                  **restricted("--grpc-restricted-protocol", "model-repository:admin-key=admin-value",
                               "inference,health:infer-key=infer-value"))),
)


# ------------------------------------------------------------ L0_shared_memory

SHARED_MEMORY_CASES = ("test_invalid_create_shm", "test_valid_create_set_register", "test_unregister_before_register",
                       "test_unregister_after_register", "test_reregister_after_register",
                       "test_unregister_after_inference", "test_register_after_inference", "test_too_big_shm",
                       "test_mixed_raw_shm", "test_unregisterall", "test_infer_offset_out_of_bound",
                       "test_infer_byte_size_out_of_bound", "test_infer_integer_overflow", "test_register_out_of_bound",
                       "test_python_client_leak")
UNREGISTER_CASES = ("test_unregister_shm_during_inference_single_req",
                    "test_unregister_shm_during_inference_multiple_req", "test_unregister_shm_after_inference")


def build_execute_delayed(suite_dir: Path, repository: Path) -> None:
    """test.sh's python_models: execute_delayed_model (15 s per execution) as 'simple'."""
    copy_model(python_model("execute_delayed_model"), repository, name="simple")


def _shm_phase(test: str, client: str, build: Callable[[Path, Path], None] | None = None) -> Phase:
    return Phase(client, tests=(f"shared_memory_test.py::{test}",), env={"CLIENT_TYPE": client}, build=build,
                 tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",))


SHARED_MEMORY = Suite(
    name="L0_shared_memory",
    tests=("shared_memory_test.py",),
    build=build_simple,
    # test.sh starts a fresh server for every case and client type (CLIENT_TYPE=http, grpc):
    # SharedMemoryTest over Triton's 'simple' model (the Python stand-in), then
    # TestSharedMemoryUnregister's *_http / *_grpc cases over execute_delayed_model as 'simple'.
    phases=(*(_shm_phase(f"SharedMemoryTest::{case}", client)
              for case in SHARED_MEMORY_CASES for client in ("http", "grpc")),
            *(_shm_phase(f"TestSharedMemoryUnregister::{case}_{client}", client, build_execute_delayed)
              for case in UNREGISTER_CASES for client in ("http", "grpc"))),
)


# ------------------------------------------------------------ L0_backend_python/explicit

def build_identity_fp32(suite_dir: Path, repository: Path) -> None:
    copy_model(python_model("identity_fp32"), repository)


EXPLICIT = Suite(
    name="L0_backend_python/explicit",
    tests=("explicit_model_test.py",),
    build=build_identity_fp32,
    phases=(Phase(tritonctl_args=("--model-control-mode", "explicit", "--log-verbose", "1"),
                  triton_args=("--model-control-mode=explicit", "--log-verbose=1")),),
)


# ------------------------------------------------------------ L0_backend_python/ensemble

def build_ensemble(suite_dir: Path, repository: Path) -> None:
    """test.sh's models/: 'ensemble' over add_sub_1 and add_sub_2 (python_models/add_sub twice).
    The stored ensemble config declares dims [ 4 ] where add_sub's and the test's are [ 16 ]: the
    ensemble's are made [ 16 ] here (no stored version of the three files agrees)."""
    (repository / "ensemble" / "1").mkdir(parents=True)
    config = (python_model("ensemble") / "config.pbtxt").read_text().replace("[ 4 ]", "[ 16 ]")
    (repository / "ensemble" / "config.pbtxt").write_text(config)
    for name in ("add_sub_1", "add_sub_2"):
        copy_model(python_model("add_sub"), repository, name)


ENSEMBLE = Suite(
    name="L0_backend_python/ensemble",
    tests=("ensemble_test.py",),
    build=build_ensemble,
    env=NO_SHM_PROBE,
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
    not_applicable={
        "EnsembleTest.test_ensemble_gpu":
            "ensemble_gpu's steps include libtorch_float32_float32_float32 on KIND_GPU (a libtorch model of "
            "Triton's data directory on a GPU); test.sh leaves it out where there is no GPU",
    },
)


# ------------------------------------------------------------ L0_backend_python/model_readiness

READINESS_MODELS = (  # (name, model file under test_models/, READINESS_FN_RETURN_VALUE, READINESS_FN_DELAY_SECS)
    ("is_model_ready_fn_returns_true", "readiness_model.py", "true", "0.1"),
    ("is_model_ready_fn_returns_false", "readiness_model.py", "false", "0.1"),
    ("is_model_ready_fn_raises_error", "readiness_model.py", "exception", "0.1"),
    ("is_model_ready_fn_returns_non_boolean", "readiness_model.py", "non_boolean", "0.1"),
    ("is_model_ready_fn_timeout", "readiness_model.py", "true", "8"),
    ("is_model_ready_fn_coroutine_returns_true", "readiness_coroutine_model.py", "coroutine", "0.1"),
)


def _is_ready(model_py: str) -> str:
    """The stored test models name the method ``is_model_ready``, its name before the released
    python_backend called it ``is_ready()`` (readiness_coroutine_model.py already does)."""
    return model_py.replace("def is_model_ready(self", "def is_ready(self")


def build_model_readiness(suite_dir: Path, repository: Path) -> None:
    """The user-defined readiness run of test.sh: identity_fp32's config under each model's name
    with its two parameters, readiness_model.py or readiness_coroutine_model.py as model.py, and
    the decoupled model of test_models/."""
    models = suite_dir / "test_models"
    base = (python_model("identity_fp32") / "config.pbtxt").read_text()
    for name, source, value, delay in READINESS_MODELS:
        (repository / name / "1").mkdir(parents=True)
        config = re.sub(r"(?m)^name:.*", f'name: "{name}"', base)
        for key, text in (("READINESS_FN_RETURN_VALUE", value), ("READINESS_FN_DELAY_SECS", delay)):
            config += f'parameters: {{\n  key: "{key}"\n  value: {{ string_value: "{text}" }}\n}}\n'
        (repository / name / "config.pbtxt").write_text(config)
        (repository / name / "1" / "model.py").write_text(_is_ready((models / source).read_text()))
    decoupled = "is_model_ready_fn_returns_true_decoupled"
    (repository / decoupled / "1").mkdir(parents=True)
    shutil.copy(models / decoupled / "config.pbtxt", repository / decoupled)
    (repository / decoupled / "1" / "model.py").write_text(_is_ready((models / decoupled / "model.py").read_text()))


MODEL_READINESS = Suite(
    name="L0_backend_python/model_readiness",
    tests=("test_model_readiness.py::TestUserDefinedModelReadinessFunction",),
    build=build_model_readiness,
    # Its other run (TestModelReadiness: the stub killed with signal 11, then 9, between two cases)
    # needs the stub's process found by name and killed in between: model_ready_check below.
    phases=(Phase(tritonctl_args=("--no-strict-readiness", "--log-verbose", "1"),
                  triton_args=("--strict-readiness=false", "--log-verbose=1")),),
    case_timeout_s=300,
    suite_timeout_s=1500,
)


# ------------------------------------------------------------ L0_backend_python (python_test.py)

def _batching_uint8(config: str) -> str:
    """identity_fp32's config as test.sh's sed makes identity_uint8 of it: UINT8, batches of up to
    8, held up to 12 s for a batch of 8."""
    return (re.sub(r"(?m)^max_batch_size:.*", "max_batch_size: 8", _sed_name("identity_uint8")(config))
            .replace("TYPE_FP32", "TYPE_UINT8")
            + "dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }\n")


def build_backend_python(suite_dir: Path, repository: Path) -> None:
    """The repository of test.sh's python_test.py run: identity_fp32 under other types, batching
    and names (as test.sh's sed makes them), default_model_name (model.py as mymodel.py) and the
    models of python_models/ it copies. Left out: identity_bf16, pytorch_fp32_fp32 and
    dlpack_identity, whose model.py imports torch (not installed here; their cases are not
    applicable)."""
    identity = python_model("identity_fp32")
    copy_model(identity, repository)
    copy_model(identity, repository, "identity_uint8", config_edit=_batching_uint8)
    copy_model(identity, repository, "identity_uint8_nobatch", config_edit=lambda config: re.sub(
        r"(?m)^max_batch_size:.*", "", config).replace("TYPE_FP32", "TYPE_UINT8"))
    for name, data_type in (("identity_uint32", "TYPE_UINT32"), ("identity_bool", "TYPE_BOOL")):
        copy_model(identity, repository, name, config_edit=lambda config, t=data_type: config.replace("TYPE_FP32", t))
    default = copy_model(identity, repository, "default_model_name",
                         config_edit=lambda config: config + 'default_model_filename: "mymodel.py"\n')
    (default / "1" / "model.py").rename(default / "1" / "mymodel.py")
    for name in ("delayed_model", "init_args", "optional", "non_contiguous", "string", "string_fixed"):
        copy_model(python_model(name), repository)
    # The stored init_args/model.py (2020-2021) checks for the instance name 'init_args_0', what
    # Triton called it before instances were numbered within their group; its later versions
    # check for 'init_args_0_0', Triton 2.51's name.
    init_args = repository / "init_args" / "1" / "model.py"
    init_args.write_text(init_args.read_text().replace("'init_args_0'", "'init_args_0_0'"))


TORCH = "its model imports torch, which is not installed here (neither for tritonctl nor in the real Triton's venv)"

BACKEND_PYTHON = Suite(
    name="L0_backend_python",
    tests=("python_test.py",),
    build=build_backend_python,
    env=NO_SHM_PROBE,
    # test.sh's first run (its later server starts, for multi_file, model_env, the stub's
    # shared-memory page size and init_exit, check the server's start and log, not cases).
    phases=(Phase(tritonctl_args=("--log-verbose", "1"),
                  triton_args=("--log-verbose=1", "--backend-config=python,shm-default-byte-size=5242880")),),
    not_applicable={
        "PythonTest.test_growth_error":
            "expects the Python backend's shared-memory pool to fail to grow past the CI container's 1 GiB "
            "/dev/shm, with 1 GiB and 512 MiB requests (the client first makes 8 GiB of float64 for the "
            "first); this 23 GiB machine has a 24 GiB /dev/shm",
        "PythonTest.test_gpu_tensor_error": "registers CUDA shared memory (a GPU)",
        "PythonTest.test_dlpack_tensor_error": "registers CUDA shared memory (a GPU); dlpack_identity imports torch",
        "PythonTest.test_bf16": "identity_bf16: " + TORCH,
        "PythonTest.test_infer_pytorch": "pytorch_fp32_fp32: " + TORCH,
    },
)


# ------------------------------------------------------------ L0_backend_python/unittest

UNITTEST = Suite(
    name="L0_backend_python/unittest",
    tests=("../python_unittest.py",),
    build=build_as_is("models"),
    phases=(),  # its one case is not applicable: nothing runs
    not_applicable={
        "PythonUnittest.test_python_unittest":
            "test.sh's one model, dlpack_test, runs DLPack checks inside execute with torch and cupy on CUDA "
            "tensors over several GPUs (test.sh installs torch with CUDA and cupy-cuda12x)",
    },
)


# ------------------------------------------------------------ L0_backend_python/restart

def kill_server_children(pid: int) -> None:
    """test.sh's ``kill -9`` of every process ``pgrep --parent $SERVER_PID`` finds: the stubs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            try:
                os.kill(int(stat.parent.name), 9)
            except ProcessLookupError:
                pass


RESTART = Suite(
    name="L0_backend_python/restart",
    tests=("restart_test.py::RestartTest::test_infer", "restart_test.py::RestartTest::test_restart"),
    build=build_as_is("models"),
    env=NO_SHM_PROBE,
    # test.sh: test_infer, every child of the server killed (kill -9: the stub), test_restart
    # (the first request fails, the next is served by a new stub). Its second server start, a stub
    # killed and then the server stopped, checks shared-memory pages, not cases.
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",),
                  before={"restart_test.py::RestartTest::test_restart": kill_server_children}),),
)


# ------------------------------------------------------------ L0_backend_python/python_based_backends

ADD_SUB_PYTORCH_STANDIN = """name: "add_sub_pytorch"
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def build_python_based_backends(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository and backend: the add_sub Python-based backend (model.py) in
    ``backends/`` beside the repository (given as --backend-directory, with the real Triton's
    python backend linked in), 'add' (two versions) and 'sub' over it, python_models/add_sub in
    two versions; add_sub_pytorch, a libtorch model test.sh makes with torch, is a Python add/sub
    stand-in here, so that setUp's loads succeed."""
    backend = suite_dir / "backends" / "add_sub"
    backend.mkdir(parents=True)
    shutil.copy(python_model("python_based_backends") / "add_sub_backend" / "model.py", backend / "model.py")
    from helpers.triton_anchor import triton_home
    (suite_dir / "backends" / "python").symlink_to(triton_home() / "backends" / "python")
    for name, versions in (("add", ("1", "2")), ("sub", ("1",))):
        for version in versions:
            (repository / name / version).mkdir(parents=True)
            (repository / name / version / "model.json").write_text(f'{{ "operation": "{name}" }}\n')
        (repository / name / "config.pbtxt").write_text('backend: "add_sub"\n')
    copy_model(python_model("add_sub"), repository)
    shutil.copytree(repository / "add_sub" / "1", repository / "add_sub" / "2")
    (repository / "add_sub_pytorch" / "1").mkdir(parents=True)
    (repository / "add_sub_pytorch" / "config.pbtxt").write_text(ADD_SUB_PYTORCH_STANDIN)
    shutil.copy(EXAMPLE_ADD_SUB, repository / "add_sub_pytorch" / "1" / "model.py")


PYTHON_BASED_BACKENDS = Suite(
    name="L0_backend_python/python_based_backends",
    tests=("python_based_backends_test.py",),
    build=build_python_based_backends,
    phases=(Phase(tritonctl_args=("--model-control-mode", "explicit", "--backend-directory", "backends",
                                  "--log-verbose", "1"),
                  triton_args=("--model-control-mode=explicit", "--backend-directory=backends", "--log-verbose=1")),),
    not_applicable={
        "PythonBasedBackendsTest.test_pytorch_model":
            "add_sub_pytorch is a libtorch model (Triton's C++ PyTorch backend, absent from this Triton) made by "
            "gen_qa_pytorch_model.py with torch; a Python stand-in serves its name here",
    },
)


# ------------------------------------------------------------ L0_backend_python/io

def build_io_requested_output(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository of its requested-output cases: add_sub. Left out:
    dlpack_io_identity_decoupled, whose one case is not applicable (below)."""
    copy_model(python_model("add_sub"), repository)


def build_io_prior_crash(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository of its prior-crash case: the suite's requested_output_model as 'llm'."""
    copy_model(suite_dir / "requested_output_model", repository, name="llm")


IO_NEEDS_GPU = ("its models move tensors to the GPU with torch ('.cuda()', 'device=\"cuda\"'); test.sh "
                "installs a CUDA build of torch for them")

IO = Suite(
    name="L0_backend_python/io",
    tests=("io_test.py",),
    build=build_io_requested_output,
    env=NO_SHM_PROBE,
    # test.sh's last two server starts; its first four (ensemble_io twice, dlpack_empty_output,
    # variable_gpu_output) serve models that need a GPU.
    phases=(Phase("requested_output", tests=("io_test.py::IOTest::test_requested_output_default",),
                  tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),
            Phase("prior_crash", tests=("io_test.py::IOTest::test_requested_output_decoupled_prior_crash",),
                  build=build_io_prior_crash,
                  tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",))),
    not_applicable={
        "[default] IOTest.test_ensemble_io": IO_NEEDS_GPU,
        "[decoupled] IOTest.test_ensemble_io": IO_NEEDS_GPU,
        "IOTest.test_empty_gpu_output": IO_NEEDS_GPU,
        "IOTest.test_variable_gpu_output": IO_NEEDS_GPU,
        "IOTest.test_requested_output_decoupled":
            "dlpack_io_identity_decoupled moves its output to the GPU whenever GPU_OUTPUT[0] is true, and the "
            "case sends np.random.rand(4).astype(np.bool_), which is all true",
    },
)


# ------------------------------------------------------------ L0_backend_python/async_execute

def build_async_execute(suite_dir: Path, repository: Path) -> None:
    """test.sh's repository: async_execute_decouple (a decoupled model whose async execute
    awaits asyncio.sleep) and async_execute_decouple_bls (which calls it through async BLS). The
    config.pbtxt of async_execute_decouple could not be fetched: async_execute_decouple_bls's,
    which names no model (max_batch_size 8, WAIT_SECONDS in, DUMMY_OUT out, decoupled), stands
    in for it."""
    for name in ("async_execute_decouple", "async_execute_decouple_bls"):
        (repository / name / "1").mkdir(parents=True)
        shutil.copy(python_model(name) / "model.py", repository / name / "1")
        shutil.copy(python_model("async_execute_decouple_bls") / "config.pbtxt", repository / name)


ASYNC_EXECUTE = Suite(
    name="L0_backend_python/async_execute",
    tests=("concurrency_test.py",),
    build=build_async_execute,
    env={"SERVER_LOG": "concurrency_test.server.log"},
    server_log="concurrency_test.server.log",
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
)


# ------------------------------------------------------------ L0_backend_python/argument_validation

ARGUMENT_VALIDATION = Suite(
    name="L0_backend_python/argument_validation",
    # ../python_unittest.py asks the model for its result: the model runs its own unittest cases
    # (pb_utils.InferenceRequest, InferenceResponse and Tensor refusing bad arguments) in execute.
    tests=("../python_unittest.py",),
    build=build_as_is("models"),
    env={**NO_SHM_PROBE, "MODEL_NAME": "argument_validation"},
    server_log="arg_validation_server.log",
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
)


# ------------------------------------------------------------ L0_backend_python/custom_metrics

def build_custom_metrics(suite_dir: Path, repository: Path) -> None:
    copy_model(python_model("custom_metrics"), repository)


CUSTOM_METRICS = Suite(
    name="L0_backend_python/custom_metrics",
    # The model runs its own unittest cases in execute (pb_utils.MetricFamily and Metric: counters,
    # gauges, histograms, duplicates, refusals), reading the server's /metrics (its hardcoded
    # localhost:8002 becomes the run's metrics port); ../python_unittest.py asks it for the result.
    tests=("../python_unittest.py",),
    build=build_custom_metrics,
    env={**NO_SHM_PROBE, "MODEL_NAME": "custom_metrics"},
    server_log="custom_metrics_server.log",
    phases=(Phase(tritonctl_args=("--log-verbose", "1"), triton_args=("--log-verbose=1",)),),
)


# ------------------------------------------------------------ L0_backend_python/logging

def build_logging(suite_dir: Path, repository: Path) -> None:
    copy_model(python_model("identity_fp32_logging"), repository)


def log_counts(non_verbose: int, verbose: int) -> dict[str, int]:
    """test.sh's verify_log_counts: the lines of the server's log holding each message of the
    model (logged once in initialize, twice in execute, once in finalize)."""
    return {**{f"{kind} Msg!": non_verbose for kind in ("Specific", "Info", "Warning", "Error")},
            "Verbose Msg!": verbose}


LOGGING = Suite(
    name="L0_backend_python/logging",
    tests=("logging_test.py",),
    build=build_logging,
    env=NO_SHM_PROBE,
    server_log="logging_server.log",
    # test.sh's three server starts, with the default log settings: left so; verbose level 1 set
    # once the model is loaded (its initialize logged nothing verbose); info, warning and error
    # turned off once the model is loaded (only initialize logged).
    phases=(Phase("default", log_counts=log_counts(4, 0)),
            Phase("verbose", posts=(("/v2/logging", '{"log_verbose_level":1}'),), log_counts=log_counts(4, 3)),
            Phase("disabled", posts=tuple(("/v2/logging", f'{{"{setting}":false}}')
                                          for setting in ("log_info", "log_warning", "log_error")),
                  log_counts=log_counts(1, 0))),
)


# ------------------------------------------------------------ L0_model_update

def build_model_update(suite_dir: Path, repository: Path) -> None:
    """test.sh's setup_models: python_models/model_init_del (model.py in version 1, util.py beside
    its config) in ./models, which the test imports as a package (models.model_init_del.util) and
    rewrites between its loads: the repository is that directory."""
    target = copy_model(python_model("model_init_del"), repository)
    shutil.copy(python_model("model_init_del") / "util.py", target / "util.py")
    (suite_dir / "models").symlink_to(repository, target_is_directory=True)


MODEL_UPDATE_GPU = ("its instance groups name KIND_GPU: the real Triton here has no GPU (a Python model's KIND_GPU "
                    "instance fails to load on it), nor has this machine")


def _rate_limit_phase(mode: str, rate_limit_args: tuple[str, ...]) -> Phase:
    """One run of test.sh's loop over RATE_LIMIT_MODE, with its rate-limiter options (the server
    log is where the test reads it)."""
    return Phase(mode, env={"RATE_LIMIT_MODE": mode},
                 server_log=f"instance_update_test.rate_limit_{mode}.server.log",
                 tritonctl_args=("--model-control-mode", "explicit", *rate_limit_args, "--log-verbose", "2"),
                 triton_args=("--model-control-mode=explicit", *rate_limit_args, "--log-verbose=2"))


MODEL_UPDATE = Suite(
    name="L0_model_update",
    tests=("instance_update_test.py",),
    build=build_model_update,
    # The model counts its initialize and finalize calls in files under MODEL_LOG_DIR (test.sh's
    # directory), which the test reads.
    server_env={"MODEL_LOG_DIR": "{suite_dir}", "PYTHONDONTWRITEBYTECODE": "True"},
    phases=(_rate_limit_phase("off", ("--rate-limit=off",)),
            _rate_limit_phase("execution_count", ("--rate-limit=execution_count",)),
            _rate_limit_phase("execution_count_with_explicit_resource",
                              ("--rate-limit=execution_count", "--rate-limit-resource=R1:10"))),
    not_applicable={
        **{f"TestInstanceUpdate.{case}": MODEL_UPDATE_GPU for case in (
            "test_gpu_instance_update", "test_gpu_cpu_instance_update", "test_instance_name_update",
            "test_instance_signature", "test_direct_scheduler_update_with_ongoing_sequences",
            "test_oldest_scheduler_update_with_ongoing_sequences")},
    },
    case_timeout_s=240,
    suite_timeout_s=2400,
)


SUITES: dict[str, Suite] = {suite.name: suite for suite in (
    INPUT_VALIDATION,
    NAN_INF,
    PARAMETERS,
    REQUEST_CANCELLATION,
    OPTIONAL_INPUT,
    RESPONSE_SENDER,
    REQUEST_RESCHEDULING,
    MODEL_CONTROL,
    LIFECYCLE,
    MODEL_UPDATE,
    STRING_IO,
    QUEUE_TIMEOUT,
    HTTP,
    BLS,
    DECOUPLED,
    GRPC,
    SHARED_MEMORY,
    EXPLICIT,
    ENSEMBLE,
    MODEL_READINESS,
    BACKEND_PYTHON,
    UNITTEST,
    RESTART,
    PYTHON_BASED_BACKENDS,
    IO,
    ASYNC_EXECUTE,
    ARGUMENT_VALIDATION,
    CUSTOM_METRICS,
    LOGGING,
)}
