"""Triton's own QA test files (tests/triton_qa/upstream, third-party sources) against
``tritonctl serve``: a fast subset of what tests/triton_qa/run_suites.py runs, each suite's
repository built as its test.sh builds it and served by a fresh ``python -m tritonctl serve``,
its unittest cases run unchanged in their assertions. The full run, with the real Triton beside
it, is in docs/compatibility.md."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

QA = Path(__file__).resolve().parents[1] / "triton_qa"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, QA / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _missing_client_modules() -> str | None:
    for module in ("tritonclient.grpc", "tritonclient.http", "tritonclient.grpc.aio", "tritonclient.http.aio"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            return f"{module} is not installed (pip install 'tritonclient[all]')"
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"{module} cannot be imported: {exc}"
    return None


REASON = None if (QA / "upstream" / "common" / "test_util.py").is_file() else "tests/triton_qa/upstream is absent"
REASON = REASON or _missing_client_modules()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


TRANSPORTS = {"native": ("--grpc-transport", "native", "--http-transport", "native"),
              "python": ("--grpc-transport", "aio", "--http-transport", "uvicorn")}


@pytest.fixture(params=list(TRANSPORTS))
def serve_args(request) -> tuple[str, ...]:
    """The C++ transports (skipped where not built) and the Python ones."""
    if request.param == "native":
        from tritonctl.serve.grpc import native as grpc_native
        from tritonctl.serve.http import native as http_native
        for protocol, module in (("gRPC", grpc_native), ("HTTP", http_native)):
            if not module.available():
                pytest.skip(f"the native {protocol} transport is not built here: {module.UNAVAILABLE_REASON}")
    return TRANSPORTS[request.param]


@pytest.fixture(scope="module")
def qa():
    sys.path.insert(0, str(QA))
    try:
        suites = _load("suites")
        runner = _load("run_suites")
        yield suites, runner
    finally:
        sys.path.remove(str(QA))


def _run(qa, suite, serve_args) -> dict:
    """Every case of ``suite`` on tritonctl serve, the client being this interpreter (numpy as
    installed here; the chosen suites do not depend on numpy 1.x)."""
    _, runner = qa
    run = runner.run_suite(suite, "tritonctl", client_python=sys.executable, serve_args=serve_args)
    assert not run.problem, run.problem
    return run.cases


def test_input_validation_suite_passes(qa, serve_args):
    suites, _ = qa
    cases = _run(qa, suites.SUITES["L0_input_validation"], serve_args)
    ran = {name: case for name, case in cases.items() if case.outcome != "not_applicable"}
    assert sorted(ran) == [f"InputValTest.test_input_validation_{name}" for name in
                           ("all_optional", "optional", "optional_empty", "required_empty", "required_missing")]
    assert {name: (case.outcome, case.message) for name, case in ran.items()} == {
        name: ("passed", "") for name in ran}


def test_parameters_suite_passes(qa, serve_args):
    """L0_parameters' run without header forwarding and its run with it: parameters of every type
    over HTTP, gRPC, their asyncio clients, gRPC streams and an ensemble reach the Python model as
    Triton gives them; the reserved 'triton_' prefix is refused; with
    ``--http/grpc-header-forward-pattern my_header.*`` the headers my_header_1..3 reach the model
    too (one of their values ending in a space), header_1 and header_2 do not."""
    suites, _ = qa
    parameters = suites.SUITES["L0_parameters"]
    assert [phase.label for phase in parameters.phases[:2]] == ["params", "headers"]
    cases = _run(qa, dataclasses.replace(parameters, phases=parameters.phases[:2]), serve_args)
    assert len(cases) == 16 and sum(name.startswith("[headers] ") for name in cases) == 8
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        name: ("passed", "") for name in cases}


def test_string_io_suite_passes(qa, serve_args):
    """L0_string_io: BYTES tensors of numbers, text and non-UTF-8 bytes, as numpy object and
    bytes arrays, round-trip through the identity models over gRPC and HTTP, binary and JSON
    (non-UTF-8 bytes cannot go as JSON: the client refuses them). Its test file is fetched, not
    kept here (tests/triton_qa/README.md)."""
    suites, runner = qa
    suite = suites.SUITES["L0_string_io"]
    absent = runner._upstream_absent(suite)
    if absent:
        pytest.skip(absent)
    cases = _run(qa, suite, serve_args)
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        "ClientStringTest.test_tf_unicode_bytes": ("passed", "")}


def test_http_suite_passes(qa, serve_args):
    """L0_http's http_test.py (the version with 9 cases): raw binary requests (no JSON header)
    deduced onto a model's one input, BYTES ones of one element, the refusals Triton words for
    the others, a body sent chunked, and 503 for a request that finds the queue full; and its
    restricted-API run (http_restricted_api_test.py). Its test files are fetched, not kept here
    (tests/triton_qa/README.md)."""
    suites, runner = qa
    suite = suites.SUITES["L0_http"]
    absent = runner._upstream_absent(suite)
    if absent:
        pytest.skip(absent)
    cases = _run(qa, suite, serve_args)
    restricted = {name for name in cases if name.startswith("[restricted_api] ")}
    assert len(cases) - len(restricted) == 9
    assert restricted == {f"[restricted_api] RestrictedAPITest.test_{name}"
                          for name in ("sanity", "model_repository", "metadata", "infer")}
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        name: ("passed", "") for name in cases}


def test_bls_parameters_suite_passes(qa, serve_args):
    """L0_backend_python/bls's bls_parameters run: a model that calls itself three times through
    BLS, adding bool, int and string request parameters at every step, gets them all back. Its
    files are fetched, not kept here (tests/triton_qa/README.md)."""
    suites, runner = qa
    suite = suites.SUITES["L0_backend_python/bls"]
    absent = runner._upstream_absent(suite) or (
        None if suites.python_model("bls_parameters").is_dir() else "python_models/bls_parameters is not fetched")
    if absent:
        pytest.skip(absent)
    cases = _run(qa, suite, serve_args)
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        "TestBlsParameters.test_bls_parameters": ("passed", "")}


def test_grpc_client_plugin_suite_passes(qa, serve_args):
    """L0_grpc's client plugin run: with every header forwarded, the header a client plugin
    adds (sync and asyncio gRPC clients) reaches the model as a request parameter, and no
    longer once the plugin is unregistered; its restricted-protocol run: the restricted
    methods need their header (a stream is ended as soon as it opens without it). Its files are fetched, not kept here
    (tests/triton_qa/README.md)."""
    suites, runner = qa
    suite = suites.SUITES["L0_grpc"]
    absent = runner._upstream_absent(suite)
    if absent:
        pytest.skip(absent)
    cases = _run(qa, suite, serve_args)
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        **{f"[client_plugin] {name}.test_simple_infer": ("passed", "")
           for name in ("GRPCClientPluginTest", "GRPCClientPluginAsyncTest")},
        **{f"[restricted_protocol] RestrictedProtocolTest.test_{name}": ("passed", "")
           for name in ("sanity", "model_repository", "health", "infer", "stream_infer")}}


def test_python_based_backends_suite_passes(qa, serve_args):
    """L0_backend_python/python_based_backends: models whose config is only ``backend:
    "add_sub"``, run by a Python-based backend (``add_sub/model.py`` in the backend directory,
    which auto-completes their inputs and outputs), one of them in two versions, beside a Python
    model in two versions. Its files are fetched, not kept here (tests/triton_qa/README.md)."""
    suites, runner = qa
    suite = suites.SUITES["L0_backend_python/python_based_backends"]
    absent = runner._upstream_absent(suite) or (None if suites.python_model("python_based_backends").is_dir()
                                                else "python_models/python_based_backends is not fetched")
    if absent:
        pytest.skip(absent)
    cases = _run(qa, suite, serve_args)
    assert {name: (case.outcome, case.message) for name, case in cases.items() if case.outcome != "not_applicable"} == {
        "PythonBasedBackendsTest.test_add_sub_models": ("passed", ""),
        "PythonBasedBackendsTest.test_python_model": ("passed", "")}
    assert cases["PythonBasedBackendsTest.test_pytorch_model"].outcome == "not_applicable"  # a libtorch model


def test_backend_python_logging_and_custom_metrics_suites_pass(qa, serve_args):
    """L0_backend_python/logging: a model's Logger lines reach the server's log at each level, as
    the log settings (verbose level 1, info, warning and error off, set over HTTP) let them, and
    its finalize logs when the server stops, its stub having had the SIGTERM of the whole process
    group; L0_backend_python/custom_metrics: the model's own unittest cases of MetricFamily and
    Metric (counters, gauges, histograms, duplicates, refusals) against the server's /metrics. Their
    files are fetched, not kept here (tests/triton_qa/README.md)."""
    suites, runner = qa
    logs, metrics = suites.SUITES["L0_backend_python/logging"], suites.SUITES["L0_backend_python/custom_metrics"]
    absent = runner._upstream_absent(logs) or runner._upstream_absent(metrics) or next(
        (f"python_models/{name} is not fetched" for name in ("identity_fp32_logging", "custom_metrics")
         if not suites.python_model(name).is_dir()), None)
    if absent:
        pytest.skip(absent)
    cases = {**_run(qa, logs, serve_args), **_run(qa, metrics, serve_args)}
    assert {name: (case.outcome, case.message) for name, case in cases.items()} == {
        **{f"[{phase}] {case}": ("passed", "") for phase in ("default", "verbose", "disabled")
           for case in ("LogTest.test_log_output", "test.sh.checks")},
        "PythonUnittest.test_python_unittest": ("passed", "")}
