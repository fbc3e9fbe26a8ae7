"""Stale work never reaches the model, and SIGTERM drains in-flight requests."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import serving_repository


def stats_of(served, model: str) -> dict:
    client = httpclient.InferenceServerClient(served.http_url)
    try:
        return client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def one_input_pair():
    a = np.ones((1, 4), np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [1, 4], "FP32"), grpcclient.InferInput("INPUT1", [1, 4], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    return inputs


def test_grpc_deadline_drops_the_request_before_it_runs(served):
    before = stats_of(served, "delayed")
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as caught:
            client.infer("delayed", one_input_pair(), client_timeout=0.05)  # the batcher holds it 300 ms
        assert "Deadline" in caught.value.message() or "DEADLINE" in str(caught.value.status())
    finally:
        client.close()
    assert wait_for(lambda: stats_of(served, "delayed")["inference_stats"]["fail"]["count"]
                    == before["inference_stats"]["fail"]["count"] + 1)
    assert stats_of(served, "delayed")["execution_count"] == before["execution_count"]


def test_http_disconnect_drops_the_request_before_it_runs(served):
    before = stats_of(served, "delayed")
    body = (b'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},'
            b'{"name":"INPUT1","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}')
    host, port = served.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /v2/models/delayed/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.05)
    assert wait_for(lambda: stats_of(served, "delayed")["inference_stats"]["fail"]["count"]
                    == before["inference_stats"]["fail"]["count"] + 1)
    assert stats_of(served, "delayed")["execution_count"] == before["execution_count"]


CLI_TRANSPORTS = {"grpc_transport": "--grpc-transport", "http_transport": "--http-transport"}


def serve_subprocess(repo: Path, transports: dict, *flags: str) -> tuple[subprocess.Popen, int]:
    """``tritonctl serve`` in a process of its own on ports it picks itself (no port another
    process may take first), and its HTTP port, read from the line that says it is serving; its
    output is drained meanwhile."""
    from tritonctl.analyzer.engine import SERVING_LINE

    choices = [arg for key, value in transports.items() for arg in (CLI_TRANSPORTS[key], value)]
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", "0", "--grpc-port", "0",
         "--metrics-port", "0", *choices, *flags],
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3])), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            match = SERVING_LINE.search(lines.get(timeout=max(deadline - time.monotonic(), 0.01)).rstrip())
        except queue.Empty:
            break
        if match:
            return process, int(match.group(1))
    process.kill()
    process.wait()
    raise AssertionError("the server did not say it is serving within 30 s")


@pytest.mark.timeout(60)
def test_sigterm_answers_in_flight_requests_then_exits_zero(tmp_path, transports):
    repo = serving_repository(tmp_path / "repo")
    process, http_port = serve_subprocess(repo, transports, "--exit-timeout-secs", "10")
    try:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        assert wait_for(lambda: _ready(client), timeout=30), "server did not become ready"
        a = np.ones((1, 4), np.float32)
        inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        outcome: dict = {}

        def call() -> None:  # a client of its own: the HTTP client is not shared across threads
            try:
                caller_client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
                outcome["result"] = caller_client.infer("delayed", inputs).as_numpy("OUTPUT0")
            except Exception as exc:  # recorded and asserted below
                outcome["error"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(0.1)  # the request now waits in the batcher (300 ms queue delay)
        process.send_signal(signal.SIGTERM)
        caller.join(10)
        assert "error" not in outcome, outcome.get("error")
        assert np.array_equal(outcome["result"], a * 2)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _ready(client) -> bool:
    try:
        return client.is_server_ready()
    except Exception:
        return False


def test_reload_under_traffic_drops_no_request(served):
    stop = threading.Event()
    outcome = {"ok": 0, "errors": []}

    def traffic() -> None:
        client = grpcclient.InferenceServerClient(served.grpc_url)
        try:
            while not stop.is_set():
                try:
                    result = client.infer("reloadable", one_input_pair())
                    assert np.array_equal(result.as_numpy("OUTPUT0"), np.full((1, 4), 2, np.float32))
                    outcome["ok"] += 1
                except Exception as exc:  # collected and asserted below
                    outcome["errors"].append(exc)
        finally:
            client.close()

    workers = [threading.Thread(target=traffic) for _ in range(3)]
    for worker in workers:
        worker.start()
    admin = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        config = admin.get_model_config("reloadable", as_json=True)["config"]
        for delay in (100, 0, 50):
            time.sleep(0.15)
            config["dynamic_batching"] = {"max_queue_delay_microseconds": delay}
            admin.load_model("reloadable", config=json.dumps(config))
        time.sleep(0.15)
    finally:
        stop.set()
        for worker in workers:
            worker.join(10)
        admin.close()
    assert outcome["errors"] == []
    assert outcome["ok"] > 10
