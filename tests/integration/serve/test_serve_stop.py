"""``tritonctl serve`` always stops (issue 20, item 4): on SIGTERM or SIGINT it stops accepting,
answers what finishes within ``--exit-timeout-secs`` (exit status 0), answers what is still stuck
then with UNAVAILABLE and names it in the log (exit status 1), and a second SIGTERM or SIGINT
exits at once. The real CLI in a process of its own, over both transports of both protocols, with Python
models that never return (one sleeping, one blocked in a system call) and clients that never read."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from helpers.serve_models import GATED_PY
from tritonctl.analyzer.engine import SERVING_LINE

# How long past its exit timeout a process may take to be gone: the stop's own steps (about 1.5 s)
# plus room for a loaded machine. The exit timeouts below are 1 s, so a stop that waits for what
# is stuck (the old behaviour: 30 s or never) fails.
MARGIN_S = 8.0

# Execute marks that it began, then blocks in read(2) on a pipe nobody writes to.
BLOCKED = '''
import os
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.read_end, self.write_end = os.pipe()

    def execute(self, requests):
        open({started!r}, "w").close()
        os.read(self.read_end, 1)
        return []
'''

# 64 MiB of output for any request: far more than socket buffers and HTTP/2 windows hold.
BIG = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        open({started!r}, "w").close()
        out = np.zeros((1, 1 << 24), np.float32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]) for _ in requests]
'''

CONFIG = '''backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
'''

CLI_TRANSPORTS = {"grpc_transport": "--grpc-transport", "http_transport": "--http-transport"}


def write_model(repo: Path, name: str, source: str, dims: str = "1") -> Path:
    """The model ``name`` from ``source`` (formatted with its marker paths); returns its marker directory."""
    marks = repo.parent / f"{name}-marks"
    marks.mkdir(parents=True, exist_ok=True)
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(
        source.format(started=str(marks / "started"), release=str(marks / "release")))
    (repo / name / "config.pbtxt").write_text(CONFIG.format(dims=dims))
    return marks


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    write_model(root, "gated", GATED_PY)
    write_model(root, "blocked", BLOCKED)
    write_model(root, "big", BIG, "1, -1")
    return root


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


class ServeProcess:
    """``tritonctl serve`` in a process of its own, on ports it picks itself; its log is collected."""

    def __init__(self, repo: Path, transports: dict, exit_timeout_s: float, *flags: str):
        choices = [arg for key, value in transports.items() for arg in (CLI_TRANSPORTS[key], value)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", "0", "--grpc-port", "0",
             "--metrics-port", "-1", "--exit-timeout-secs", str(exit_timeout_s), *choices, *flags],
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3])), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._new: queue.Queue = queue.Queue()
        self._ended = threading.Event()  # the process's output has all been read
        threading.Thread(target=self._drain, daemon=True).start()
        serving = self.wait_line(SERVING_LINE.pattern, regex=True)
        match = SERVING_LINE.search(serving)
        self.http_url = f"127.0.0.1:{match.group(1)}"
        self.grpc_url = f"127.0.0.1:{match.group(2)}"

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            self._new.put(line.rstrip())
        self._new.put(None)
        self._ended.set()

    def wait_line(self, text: str, regex: bool = False, timeout: float = 30.0) -> str:
        import re

        found = (lambda line: re.search(text, line)) if regex else (lambda line: text in line)
        deadline = time.monotonic() + timeout
        for line in list(self.lines):
            if found(line):
                return line
        while time.monotonic() < deadline:
            try:
                line = self._new.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            if found(line):
                return line
        raise AssertionError(f"no log line with {text!r}; the log:\n" + "\n".join(self.lines))

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def exit_status(self, within_s: float) -> int:
        """The exit status, once the process is gone (it must be within ``within_s``)."""
        try:
            return self.process.wait(within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {within_s} s after the signal; the log:\n"
                                 + "\n".join(self.lines)) from None

    def log(self) -> str:
        """The whole log, once the process has ended."""
        self._ended.wait(30)
        return "\n".join(self.lines)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve(repo, transports):
    started: list[ServeProcess] = []

    def start(exit_timeout_s: float, *flags: str) -> ServeProcess:
        started.append(ServeProcess(repo, transports, exit_timeout_s, *flags))
        return started[-1]

    yield start
    for process in started:
        process.close()


def infer_in_background(protocol: str, url: str, model: str) -> dict:
    """Call ``model`` with the real tritonclient on a thread of its own; the dict gets its
    ``result`` (OUTPUT0) or ``error``."""
    outcome: dict = {}
    module = httpclient if protocol == "http" else grpcclient

    def call() -> None:
        client = module.InferenceServerClient(url, **({"network_timeout": 120} if protocol == "http" else {}))
        tensor = module.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, np.float32))
        try:
            outcome["result"] = client.infer(model, [tensor]).as_numpy("OUTPUT0")
        except Exception as exc:  # InferenceServerException, or the connection closed
            outcome["error"] = exc
        finally:
            outcome["done"] = True
            client.close()

    threading.Thread(target=call, daemon=True).start()
    return outcome


def url_of(server: ServeProcess, protocol: str) -> str:
    return server.http_url if protocol == "http" else server.grpc_url


@pytest.mark.timeout(90)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_in_flight_request_answered_within_the_timeout_exits_zero(serve, repo, protocol):
    server = serve(exit_timeout_s=30)
    outcome = infer_in_background(protocol, url_of(server, protocol), "gated")
    marks = repo.parent / "gated-marks"
    assert wait_for((marks / "started").exists)
    server.signal(signal.SIGTERM)
    server.wait_line("SIGTERM: stopping")
    (marks / "release").touch()  # the model returns now, well within the 30 s
    assert server.exit_status(30) == 0
    assert wait_for(lambda: "done" in outcome, 10)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].tolist() == [7.0]
    assert "cut" not in server.log()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("protocol, model", [("http", "gated"), ("grpc", "gated"), ("http", "blocked"),
                                             ("grpc", "blocked")])
def test_stuck_model_is_cut_at_the_exit_timeout(serve, repo, protocol, model):
    server = serve(exit_timeout_s=1)
    outcome = infer_in_background(protocol, url_of(server, protocol), model)
    assert wait_for((repo.parent / f"{model}-marks" / "started").exists)
    server.signal(signal.SIGTERM)
    assert server.exit_status(1 + MARGIN_S) == 1
    assert f"exit timeout of 1 s expired: cut 1 request of model '{model}'" in server.log()
    assert wait_for(lambda: "done" in outcome, 10)
    error = outcome["error"]  # answered, not left hanging
    assert isinstance(error, InferenceServerException), error
    assert error.status() in ("503", "StatusCode.UNAVAILABLE")
    assert f"Server is stopping: the request to model '{model}' was not answered within the exit timeout (1 s)" \
        in error.message()


@pytest.mark.timeout(90)
def test_http_client_that_never_reads_does_not_hold_the_stop(serve, repo):
    server = serve(exit_timeout_s=1)
    host, port = server.http_url.split(":")
    body = (b'{"inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[1]}],'
            b'"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}')
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.sendall(b"POST /v2/models/big/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body)
        assert sock.recv(1, socket.MSG_PEEK) == b"H"  # the answer has begun; nothing of it is taken
        server.signal(signal.SIGTERM)
        status = server.exit_status(1 + MARGIN_S)  # the socket is still open, and never read
    assert status == 0, server.log()  # the server answered; the client did not take it


def answered(server: ServeProcess, model: str) -> int:
    """How many requests ``model`` has answered successfully (its statistics)."""
    with httpclient.InferenceServerClient(server.http_url) as client:
        return client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]["success"]["count"]


@pytest.mark.timeout(90)
def test_grpc_client_that_never_reads_does_not_hold_the_stop(serve, repo):
    server = serve(exit_timeout_s=1)
    # No reads: grpc reads a stream's message only when asked, and a small window without
    # bandwidth probing keeps what the server may send small.
    channel = grpc.insecure_channel(server.grpc_url, options=[("grpc.http2.lookahead_bytes", 1024),
                                                               ("grpc.http2.bdp_probe", 0)])
    stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                   request_serializer=service_pb2.ModelInferRequest.SerializeToString,
                                   response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
    request = service_pb2.ModelInferRequest(model_name="big")
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
    tensor.contents.fp32_contents.append(1.0)
    hold = threading.Event()

    def requests():
        yield request
        hold.wait()  # the stream stays open

    responses = stream(requests())
    try:
        assert wait_for(lambda: answered(server, "big") == 1)  # then its 64 MiB wait for the client
        server.signal(signal.SIGTERM)
        assert server.exit_status(1 + MARGIN_S) == 0, server.log()
    finally:
        hold.set()
        responses.cancel()
        channel.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGINT),
                                           (signal.SIGTERM, signal.SIGINT)], ids=["TERM-TERM", "INT-INT", "TERM-INT"])
def test_a_second_signal_exits_at_once(serve, repo, first, second):
    server = serve(exit_timeout_s=300)  # were the second signal ignored, the test would time out
    outcome = infer_in_background("http", server.http_url, "gated")
    assert wait_for((repo.parent / "gated-marks" / "started").exists)
    server.signal(first)
    server.wait_line(f"{signal.Signals(first).name}: stopping")
    server.signal(second)
    assert server.exit_status(MARGIN_S) == 1
    assert (f"{signal.Signals(second).name} while stopping: exiting at once, cutting 1 request of model 'gated'"
            in server.log())
    assert "done" not in outcome or "error" in outcome


@pytest.mark.timeout(90)
def test_idle_connections_and_streams_do_not_hold_the_stop(serve, repo):
    server = serve(exit_timeout_s=300)
    (repo.parent / "gated-marks" / "release").touch()
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.is_server_ready()  # a keep-alive connection, left open
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    client.async_stream_infer("gated", [tensor])
    result, error = answers.get(timeout=30)
    assert error is None and result.as_numpy("OUTPUT0").tolist() == [7.0]
    try:
        server.signal(signal.SIGTERM)  # the stream is open and idle, nothing is in flight
        assert server.exit_status(MARGIN_S) == 0, server.log()
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()
        http.close()


STUCK_INITIALIZE = '''
import time

class TritonPythonModel:
    def initialize(self, args):
        open({started!r}, "w").close()
        while True:
            time.sleep(1)
'''


@pytest.mark.timeout(90)
def test_sigterm_while_a_model_loads_for_ever_exits(tmp_path, transports):
    root = tmp_path / "repo"
    marks = write_model(root, "loading", STUCK_INITIALIZE)
    choices = [arg for key, value in transports.items() for arg in (CLI_TRANSPORTS[key], value)]
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonctl", "serve", str(root), "--http-port", "0", "--grpc-port", "0",
         "--metrics-port", "-1", "--exit-timeout-secs", "1", *choices],
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3])), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for((marks / "started").exists)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=1 + MARGIN_S)
        assert process.returncode == 1
        assert "stopped while loading models: the load of model 'loading' cut" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.timeout(90)
def test_a_load_through_the_api_that_never_ends_does_not_hold_the_stop(serve, repo):
    marks = write_model(repo, "loading", STUCK_INITIALIZE)
    server = serve(1, "--model-control-mode", "explicit", "--load-model", "gated")
    outcome: dict = {}

    def load() -> None:
        try:
            with httpclient.InferenceServerClient(server.http_url, network_timeout=120) as client:
                client.load_model("loading")
        except Exception as exc:  # the answer the stop gave it, or the connection closed
            outcome["error"] = exc

    threading.Thread(target=load, daemon=True).start()
    assert wait_for((marks / "started").exists)
    server.signal(signal.SIGTERM)
    assert server.exit_status(1 + MARGIN_S) == 1
    assert ("the load of model 'loading' still running after the exit timeout: exiting without waiting for them"
            in server.log())
    assert wait_for(lambda: "error" in outcome, 30)  # the load's client is not left waiting
