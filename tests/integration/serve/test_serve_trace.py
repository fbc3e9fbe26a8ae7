"""The trace extension through the real tritonclient (HTTP and gRPC): settings get, update,
clear and validation in Triton's words, and traced requests written to Triton's trace file
(timestamps in order, every log_frequency traces, trace_count, at stop), plus --trace-config."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.cli.app import main
from tritonctl.serve.core.trace_config import TraceConfig, TraceConfigError, parse_trace_config
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

TRANSPORTS = ["http", "grpc"]
CLEAR_ALL = {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None}
HTTP_ORDER = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
              "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "INFER_RESPONSE_COMPLETE",
              "HTTP_SEND_START", "HTTP_SEND_END"]
GRPC_ORDER = ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
              "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "INFER_RESPONSE_COMPLETE",
              "GRPC_SEND_START", "GRPC_SEND_END"]


@pytest.fixture(scope="module")
def traced(tmp_path_factory, transports):
    """A server tracing every request of every model at TIMESTAMPS level into trace.json."""
    from helpers.serve_models import serving_repository

    root = tmp_path_factory.mktemp("traced")
    repo = serving_repository(root / "repo")
    trace_file = root / "trace.json"
    server = BackgroundServer(ServeOptions(
        repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
        load_models=["add_sub", "add_sub_int", "echo_bytes"], exit_timeout_secs=5,
        trace_config=[f"triton,file={trace_file}", "level=TIMESTAMPS", "rate=1"], **transports)).start()
    server.trace_file = trace_file
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def clients(traced):
    both = {"http": httpclient.InferenceServerClient(traced.http_url),
            "grpc": grpcclient.InferenceServerClient(traced.grpc_url)}
    yield both
    both["http"].update_trace_settings("add_sub", CLEAR_ALL)  # back to the startup settings
    both["http"].update_trace_settings(settings=CLEAR_ALL)
    for client in both.values():
        client.close()


def infer(client, transport: str, model: str = "add_sub", request_id: str = "") -> None:
    module = httpclient if transport == "http" else grpcclient
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    datatype = "FP32"
    if model == "add_sub_int":
        a, datatype = a.astype(np.int32), "INT32"
    inputs = [module.InferInput("INPUT0", [1, 4], datatype), module.InferInput("INPUT1", [1, 4], datatype)]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    client.infer(model, inputs, request_id=request_id)


def settings_of(client, transport: str, model: str = "", update: dict | None = None) -> dict:
    """The settings in the HTTP JSON shape, whichever transport returned them."""
    if transport == "http":
        return client.update_trace_settings(model, update) if update is not None else client.get_trace_settings(model)
    found = client.update_trace_settings(model, update, as_json=True) if update is not None else \
        client.get_trace_settings(model, as_json=True)
    values = {key: setting.get("value", []) for key, setting in found["settings"].items()}
    return {key: value if key == "trace_level" else value[0] for key, value in values.items()}


def failure(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def indexed_files(trace_file: Path) -> list[Path]:
    return sorted(trace_file.parent.glob(trace_file.name + ".*"), key=lambda p: int(p.suffix[1:]))


def wait_for_new_file(trace_file: Path, known: int, timeout_s: float = 10) -> list[dict]:
    """The entries of the first indexed trace file written after the ``known`` ones."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        files = indexed_files(trace_file)
        if len(files) > known:
            return json.loads(files[known].read_text())
        time.sleep(0.02)
    raise AssertionError(f"no new trace file beside {trace_file} within {timeout_s} s")


def group(entries: list[dict]) -> dict[int, dict]:
    """Trace entries by id, as Triton's trace summary tool groups them: the model object and the
    timestamps in file order."""
    traces: dict[int, dict] = {}
    for entry in entries:
        trace = traces.setdefault(entry["id"], {"timestamps": []})
        trace.update({k: v for k, v in entry.items() if k in ("model_name", "model_version", "request_id")})
        trace["timestamps"] += entry.get("timestamps", [])
        if "activity" in entry:
            trace.setdefault("tensors", []).append(entry)
    return traces


# ---- settings ------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_settings_get_update_and_clear(traced, clients, transport):
    client = clients[transport]
    startup = {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1", "log_frequency": "0",
               "trace_file": str(traced.trace_file), "trace_mode": "triton"}
    assert settings_of(client, transport) == startup
    assert settings_of(client, transport, "add_sub") == startup  # a model follows the global setting
    model = settings_of(client, transport, "add_sub", {"trace_rate": "7", "trace_level": ["TIMESTAMPS", "TENSORS"]})
    assert model == {**startup, "trace_rate": "7", "trace_level": ["TIMESTAMPS", "TENSORS"]}
    assert settings_of(client, transport, update={"trace_rate": "3", "trace_count": "50"}) == \
        {**startup, "trace_rate": "3", "trace_count": "50"}
    # the model keeps the fields it set and follows the global setting for the others
    assert settings_of(client, transport, "add_sub") == {**model, "trace_count": "50"}
    assert settings_of(client, transport, "add_sub", {"trace_rate": None, "trace_level": None}) == \
        {**startup, "trace_rate": "3", "trace_count": "50"}
    assert settings_of(client, transport, update={"trace_rate": None, "trace_count": None}) == startup


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("update,http_status,grpc_code,text", [
    ({"trace_file": "elsewhere.json"}, "501", "UNIMPLEMENTED",
     "trace file location can not be updated through network protocol"),
    ({"trace_rate": "abc"}, "400", "INVALID_ARGUMENT", "Unable to parse 'trace_rate', got: abc"),
    ({"trace_rate": "99999999999"}, "400", "INVALID_ARGUMENT",
     "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999"),
    ({"trace_count": "99999999999"}, "400", "INVALID_ARGUMENT",
     "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 99999999999"),
    ({"log_frequency": "x"}, "400", "INVALID_ARGUMENT", "Unable to parse 'log_frequency', got: x"),
    ({"trace_level": ["OFF", "TIMESTAMPS"]}, "400", "INVALID_ARGUMENT",
     "Expect only one trace level 'OFF' is specified"),
    ({"trace_rate": "0"}, "400", "INVALID_ARGUMENT",
     "Attempting to set invalid trace setting :sample rate must be non-zero"),
    ({"trace_level": ["LOUD"]}, "400", "INVALID_ARGUMENT",
     "invalid trace level 'LOUD'; the levels are OFF, TIMESTAMPS and TENSORS"),
    ({"trace_speed": "1"}, "400", "INVALID_ARGUMENT", "unknown trace setting 'trace_speed'; the settings that can "
                                                      "be updated are trace_level, trace_rate, trace_count and "
                                                      "log_frequency"),
])
def test_settings_validation(clients, transport, update, http_status, grpc_code, text):
    client = clients[transport]
    before = settings_of(client, transport)
    error = failure(lambda: settings_of(client, transport, update=update))
    assert error.status() == (http_status if transport == "http" else f"StatusCode.{grpc_code}")
    assert error.message() == text
    assert settings_of(client, transport) == before  # nothing changed


def test_settings_validation_words_that_differ_by_transport(clients):
    error = failure(lambda: clients["http"].update_trace_settings(settings={"trace_count": "-5"}))
    assert error.message() == "Unable to parse 'trace_count'. Expecting value >= -1, got:-5"
    error = failure(lambda: clients["grpc"].update_trace_settings(settings={"trace_count": "-5"}))
    assert error.message() == "Unable to parse 'trace_count'. Expecting value >= -1, got: -5"
    error = failure(lambda: clients["grpc"].update_trace_settings(settings={"trace_rate": ["1", "2"]}))
    assert error.message() == "expect only 1 value for 'trace_rate'"


# Triton 2.51's answers to the same bodies: a value of the wrong JSON type gets TritonJson's words
# (with 400 where Triton says 500: a client's fault is never a 5xx here, compatibility.md
# difference 1), a body it cannot read too, and the fields are checked in its
# order (trace_file, trace_level, trace_rate, trace_count, log_frequency), whatever the order
# of the body; this server's own refusals (an unknown key or level name, a negative rate) come
# only after Triton's checks passed.
@pytest.mark.parametrize("body,status,text", [
    ({"trace_rate": 5}, 400, "attempt to access JSON non-string as string"),
    ({"trace_count": "3", "log_frequency": ["5"]}, 400, "attempt to access JSON non-string as string"),
    ({"trace_level": "TIMESTAMPS"}, 400, "attempt to access JSON non-array as array"),
    ({"trace_level": [1]}, 400, "attempt to access JSON non-string as string"),
    ({"trace_rate": 5, "trace_level": "x"}, 400, "attempt to access JSON non-array as array"),
    ({"trace_level": "x", "trace_file": "y"}, 501, "trace file location can not be updated through network protocol"),
    ({"log_frequency": "x", "trace_count": "y", "trace_rate": "z", "trace_level": ["OFF", "OFF"]}, 400,
     "Expect only one trace level 'OFF' is specified"),
    ({"log_frequency": "x", "trace_count": "y", "trace_rate": "z"}, 400, "Unable to parse 'trace_rate', got: z"),
    ({"log_frequency": "x", "trace_count": "-7"}, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-7"),
    ({"trace_level": ["BAD"], "trace_rate": "x"}, 400, "Unable to parse 'trace_rate', got: x"),
    ({"trace_speed": "1", "trace_count": "y"}, 400, "Unable to parse 'trace_count', got: y"),
])
def test_settings_checked_in_tritons_order_with_its_statuses(traced, body, status, text):
    host, port = traced.http_url.split(":")
    for path in ("/v2/trace/setting", "/v2/models/add_sub/trace/setting"):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("POST", path, json.dumps(body))
            response = connection.getresponse()
            assert (response.status, json.loads(response.read())) == (status, {"error": text})
        finally:
            connection.close()


def test_a_body_that_is_not_json_is_refused_in_tritons_words(traced):
    host, port = traced.http_url.split(":")
    for body, text in ((b"", "The document is empty. at 0"), (b"{bad", "Missing a name for object member. at 1")):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("POST", "/v2/trace/setting", body)
            response = connection.getresponse()
            assert (response.status, json.loads(response.read())) == \
                (400, {"error": f"failed to parse the request JSON buffer: {text}"})
        finally:
            connection.close()


def test_grpc_settings_checked_in_tritons_order(clients):
    client = clients["grpc"]
    for settings, code, text in (
            ({"log_frequency": "x", "trace_count": "y", "trace_rate": "z"}, "INVALID_ARGUMENT",
             "Unable to parse 'trace_rate', got: z"),
            ({"log_frequency": "x", "trace_count": "y"}, "INVALID_ARGUMENT", "Unable to parse 'trace_count', got: y"),
            ({"trace_rate": "x", "trace_file": "y"}, "UNIMPLEMENTED",
             "trace file location can not be updated through network protocol"),
            ({"log_frequency": "x", "trace_level": ["OFF", "OFF"]}, "INVALID_ARGUMENT",
             "Expect only one trace level 'OFF' is specified")):
        error = failure(lambda: client.update_trace_settings(settings=settings))
        assert (error.status(), error.message()) == (f"StatusCode.{code}", text)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_settings_of_an_unknown_model(clients, transport):
    for call in (lambda: settings_of(clients[transport], transport, "missing"),
                 lambda: settings_of(clients[transport], transport, "missing", {"trace_rate": "2"})):
        error = failure(call)
        assert error.status() == ("400" if transport == "http" else "StatusCode.INVALID_ARGUMENT")
        assert error.message() == "Request for unknown model : missing"


def test_settings_routes(traced):
    host, port = traced.http_url.split(":")

    def request(method: str, path: str) -> int:
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request(method, path)
            return connection.getresponse().status
        finally:
            connection.close()

    assert request("GET", "/v2/models/add_sub/versions/1/trace/setting") == 404
    assert request("PUT", "/v2/trace/setting") == 405
    assert request("GET", "/v2/models/add_sub/trace/setting") == 200


def test_server_metadata_lists_the_extensions(clients):
    extensions = clients["http"].get_server_metadata()["extensions"]
    assert {"system_shared_memory", "cuda_shared_memory", "trace"} <= set(extensions)
    assert extensions.index("cuda_shared_memory") < extensions.index("binary_tensor_data") < \
        extensions.index("statistics") < extensions.index("trace") < extensions.index("logging")


# ---- trace files ----------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_traced_requests_are_written_every_log_frequency_traces(traced, clients, transport):
    client = clients[transport]
    known = len(indexed_files(traced.trace_file))
    clients["http"].update_trace_settings(settings={"log_frequency": "2"})
    infer(client, transport, request_id="first")
    infer(client, transport, "add_sub_int")
    traces = group(wait_for_new_file(traced.trace_file, known))
    assert len(traces) == 2
    first, second = (traces[i] for i in sorted(traces))
    assert (first["model_name"], first["model_version"], first["request_id"]) == ("add_sub", 1, "first")
    assert (second["model_name"], "request_id" in second) == ("add_sub_int", False)
    for trace in (first, second):
        names = [t["name"] for t in trace["timestamps"]]
        assert names == (HTTP_ORDER if transport == "http" else GRPC_ORDER)
        stamps = [t["ns"] for t in trace["timestamps"]]
        assert stamps == sorted(stamps) and all(isinstance(ns, int) and ns > 0 for ns in stamps)


def test_trace_count_stops_after_n_traces(traced, clients):
    client = clients["http"]
    known = len(indexed_files(traced.trace_file))
    client.update_trace_settings(settings={"trace_count": "2"})
    for _ in range(4):
        infer(client, "http")
    traces = group(wait_for_new_file(traced.trace_file, known))
    assert len(traces) == 2  # written as soon as the count ran out, to the next indexed file
    assert client.get_trace_settings()["trace_count"] == "0"
    time.sleep(0.2)
    assert len(indexed_files(traced.trace_file)) == known + 1  # the other two requests were not traced


def test_rate_and_model_settings_choose_what_is_traced(traced, clients):
    client = clients["http"]
    known = len(indexed_files(traced.trace_file))
    client.update_trace_settings(settings={"trace_rate": "2", "log_frequency": "2"})
    client.update_trace_settings("add_sub_int", {"trace_level": ["OFF"]})  # this model is not traced
    try:
        for _ in range(3):
            infer(client, "http", "add_sub_int")
        for index in range(4):
            infer(client, "http", request_id=f"r{index}")
        traces = group(wait_for_new_file(traced.trace_file, known))
    finally:
        client.update_trace_settings("add_sub_int", CLEAR_ALL)
    assert [t["request_id"] for _, t in sorted(traces.items())] == ["r1", "r3"]  # every 2nd request


def test_tensors_level_records_inputs_and_outputs(traced, clients):
    client = clients["http"]
    known = len(indexed_files(traced.trace_file))
    client.update_trace_settings("add_sub", {"trace_level": ["TIMESTAMPS", "TENSORS"], "log_frequency": "1"})
    infer(client, "http")
    (trace,) = group(wait_for_new_file(traced.trace_file, known)).values()
    tensors = {(t["activity"], t["tensor"]["name"]): t["tensor"] for t in trace["tensors"]}
    assert tensors[("TENSOR_QUEUE_INPUT", "INPUT0")] == {"name": "INPUT0", "data": "0,1,2,3", "shape": "1,4",
                                                         "dtype": "FP32"}
    assert tensors[("TENSOR_BACKEND_OUTPUT", "OUTPUT0")]["data"] == "0,2,4,6"
    assert tensors[("TENSOR_BACKEND_OUTPUT", "OUTPUT1")]["data"] == "0,0,0,0"


def test_tensors_only_level_writes_the_tensor_records_alone(traced, clients):
    """As in Triton 2.51: without TIMESTAMPS a trace has no timestamps and no model object."""
    client = clients["grpc"]
    known = len(indexed_files(traced.trace_file))
    clients["http"].update_trace_settings("add_sub", {"trace_level": ["TENSORS"], "log_frequency": "1"})
    infer(client, "grpc", request_id="t2")
    entries = wait_for_new_file(traced.trace_file, known)
    assert [(e["activity"], e["tensor"]["name"]) for e in entries] == [
        ("TENSOR_QUEUE_INPUT", "INPUT0"), ("TENSOR_QUEUE_INPUT", "INPUT1"),
        ("TENSOR_BACKEND_OUTPUT", "OUTPUT0"), ("TENSOR_BACKEND_OUTPUT", "OUTPUT1")]
    assert {tuple(sorted(e)) for e in entries} == {("activity", "id", "tensor")}


def test_buffered_traces_are_written_at_stop(tmp_path, transports):
    """Without a log frequency, traces wait in memory and the whole file is written at stop."""
    from helpers.serve_models import serving_repository

    repo = serving_repository(tmp_path / "repo")
    trace_file = tmp_path / "stop" / "trace.json"
    trace_file.parent.mkdir()
    server = BackgroundServer(ServeOptions(
        repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit", load_models=["add_sub"],
        exit_timeout_secs=5, trace_config=[f"triton,file={trace_file}", "level=TIMESTAMPS", "rate=1"],
        **transports)).start()
    try:
        http_client = httpclient.InferenceServerClient(server.http_url)
        grpc_client = grpcclient.InferenceServerClient(server.grpc_url)
        infer(http_client, "http")
        infer(grpc_client, "grpc")
        infer(http_client, "http")
        assert not trace_file.exists()
    finally:
        server.stop()
    traces = group(json.loads(trace_file.read_text()))
    assert sorted(traces) == [1, 2, 3]
    assert all(t["model_name"] == "add_sub" and t["timestamps"][0]["name"].endswith(("RECV_START", "WAITREAD_START"))
               for t in traces.values())
    assert not indexed_files(trace_file)


def test_no_tracing_writes_nothing(tmp_path, served):
    """The shared test server runs without --trace-config: tracing is off and costs one check."""
    runtime = served.runtime
    assert runtime.server.traces.enabled is False
    client = httpclient.InferenceServerClient(served.http_url)
    assert client.get_trace_settings() == {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                                           "log_frequency": "0", "trace_file": "", "trace_mode": "triton"}
    error = failure(lambda: client.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"]}))
    assert error.message() == "Attempting to set invalid trace setting :trace file name is not given"


# ---- --trace-config ------------------------------------------------------------------------
def test_trace_config_parsing():
    assert parse_trace_config([]) == TraceConfig()
    assert parse_trace_config(["triton,file=/tmp/t.json", "level=TIMESTAMPS", "level=TENSORS", "rate=10",
                               "count=5", "triton,log-frequency=50", "mode=triton"]) == \
        TraceConfig(level=3, rate=10, count=5, log_frequency=50, file="/tmp/t.json")
    # as in Triton 2.51, levels are combined and "OFF" adds nothing: TIMESTAMPS stays on
    assert parse_trace_config(["triton,file=t.json", "level=TIMESTAMPS", "level=OFF"]).level == 1
    assert parse_trace_config(["triton,file=t.json", "level=OFF", "level=TENSORS"]).level == 2


@pytest.mark.parametrize("args,text", [
    (["level=TIMESTAMPS"], "--trace-config level=... needs a trace file: add --trace-config triton,file=PATH"),
    (["tritn,file=x"], "invalid value for trace mode option: tritn. Available options are \"triton\" and "
                       "\"opentelemetry\""),
    ([",file=x"], "No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> or "
                  "<setting>=<value>. Got ,file=x"),
    (["rate"], "--trace-config option format is '<trace mode>,<setting>=<value>'. Got rate"),
    (["rate=often"], "Bad option: \"--trace-config rate\": Invalid option value. Got often"),
    (["rate=99999999999"], "Bad option: \"--trace-config rate\": Provided option value is out of bound. "
                           "Got 99999999999"),
    (["triton,log-frequency=abc"], "Bad option: \"--trace-config triton,log-frequency\": Invalid option value. "
                                   "Got abc"),
    (["level=loud"], "Bad option: \"--trace-config level\": invalid value for trace level option: loud"),
    (["count=-2"], "Bad option: \"--trace-config count\": value must be in [ -1, 2147483647 ], got -2"),
    (["triton,url=x"], "Bad option: \"--trace-config triton,url\": unknown setting 'url'. Global settings are "
                       "level, rate, count and mode (--trace-config level=TIMESTAMPS); triton settings are file and "
                       "log-frequency (--trace-config triton,file=trace.json)"),
    (["triton,file=/no/such/dir/t.json"], "--trace-config triton,file=/no/such/dir/t.json: the directory "
                                          "/no/such/dir does not exist"),
    (["mode=opentelemetry"], "--trace-config: the opentelemetry trace mode is not supported by tritonctl serve; "
                             "use the triton mode (the default), which writes Triton's trace file"),
])
def test_trace_config_errors(args, text):
    with pytest.raises(TraceConfigError) as caught:
        parse_trace_config(args)
    assert str(caught.value) == text


def test_serve_refuses_a_bad_trace_config(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["serve", str(tmp_path), "--trace-config", "level=TIMESTAMPS"])
    assert caught.value.code == 2
    assert "error: --trace-config level=... needs a trace file: add --trace-config triton,file=PATH" in \
        capsys.readouterr().err
