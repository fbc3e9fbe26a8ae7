"""Overload against a model's queue limits (max_queue_size, REJECT timeouts), over both
transports of both protocols with the real tritonclient: every request of a burst is answered,
the ones refused with Triton's status and text, and nothing runs after its queue deadline or
after its client has gone. The model ("gate") logs every request it runs and holds a request
whose tag is negative until the test creates its release file, so the queue fills while the
only instance is busy, without any timing in the test."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

GATE_PY = """\
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.dir = json.loads(args["model_config"])["parameters"]["dir"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            tag = int(pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy().reshape(-1)[0])
            with open(os.path.join(self.dir, "ran"), "a") as log:
                log.write(f"{tag}\\n")
            release = os.path.join(self.dir, f"release{tag}")
            until = time.monotonic() + 60
            while tag < 0 and not os.path.exists(release) and time.monotonic() < until:
                time.sleep(0.005)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[tag]], np.int32))]))
        return responses
"""

GATE_CONFIG = """\
name: "gate"
backend: "python"
max_batch_size: 1
input [ { name: "TAG" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching {
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 120000000
                         allow_timeout_override: true max_queue_size: 2 }
}
parameters { key: "dir" value { string_value: "%s" } }
"""

QUEUE_FULL = "Exceeds maximum queue size"
EXPIRED = "Request timeout expired"
CLIENTS = {"http": httpclient, "grpc": grpcclient}


@pytest.fixture(scope="module")
def gated(tmp_path_factory, transports):
    root = tmp_path_factory.mktemp("overload")
    (root / "repo" / "gate" / "1").mkdir(parents=True)
    (root / "repo" / "gate" / "1" / "model.py").write_text(GATE_PY)
    (root / "repo" / "gate" / "config.pbtxt").write_text(GATE_CONFIG % root)
    options = ServeOptions(root / "repo", http_port=0, grpc_port=0, metrics_port=0, exit_timeout_secs=5,
                           **transports)
    with BackgroundServer(options) as server:
        server.gate_dir = root
        yield server


def ran(server) -> list[int]:
    log = Path(server.gate_dir) / "ran"
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def wait_for(condition, what: str, limit_s: float = 30.0) -> None:
    """Poll ``condition`` (server state) until it holds."""
    until = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < until, f"timed out waiting for {what}"
        time.sleep(0.01)


def metrics(server) -> dict[str, float]:
    """The gate model's counters: name (with ':REASON' for failures) -> value."""
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or 'model="gate"' not in line:
            continue
        name, labels = line.split("{", 1)
        reason = labels.split('reason="', 1)[1].split('"', 1)[0] if 'reason="' in labels else ""
        values[f"{name}:{reason}" if reason else name] = float(line.rsplit(" ", 1)[1])
    return values


def client_for(server, protocol: str):
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    return grpcclient.InferenceServerClient(server.grpc_url)


def infer(server, protocol: str, tag: int, **options):
    module = CLIENTS[protocol]
    tensor = module.InferInput("TAG", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[tag]], np.int32))
    client = client_for(server, protocol)
    try:
        return client.infer("gate", [tensor], **options)
    finally:
        client.close()


class Blocker:
    """A request holding the gate's only instance (from another thread) until ``release``."""

    def __init__(self, server, protocol: str, tag: int):
        self.server, self.tag = server, tag
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(protocol,))
        self.thread.start()
        wait_for(lambda: tag in ran(server), f"blocker {tag} to run")

    def _run(self, protocol: str) -> None:
        self.result = infer(self.server, protocol, self.tag)

    def release(self) -> None:
        (Path(self.server.gate_dir) / f"release{self.tag}").touch()
        self.thread.join(60)
        assert self.result is not None and int(self.result.as_numpy("OUT").reshape(-1)[0]) == self.tag


def refusal(server, protocol: str, tag: int, **options) -> tuple[str, str]:
    """(status, message) of a request that must be refused."""
    with pytest.raises(InferenceServerException) as caught:
        infer(server, protocol, tag, **options)
    return str(caught.value.status()), caught.value.message()


@pytest.mark.parametrize("protocol,base", [("http", 100), ("grpc", 200)])
def test_a_burst_beyond_the_queue_is_answered_with_tritons_texts_and_nothing_runs_late(gated, protocol, base):
    before = metrics(gated)
    blocker = Blocker(gated, protocol, -base)
    try:
        # each request may wait 1 s in the queue: the two admitted ones leave at that deadline,
        # answered while the blocker still holds the instance
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda tag: refusal(gated, protocol, tag, timeout=1_000_000),
                                    range(base + 1, base + 11)))
    finally:
        blocker.release()
    unavailable = "503" if protocol == "http" else "StatusCode.UNAVAILABLE"
    assert all(status == unavailable for status, _ in answers), answers
    expired = [m for _, m in answers if m == EXPIRED]
    full = [m for _, m in answers if m.endswith(QUEUE_FULL) and m.startswith("[request id: ")]
    assert len(expired) >= 2 and full and len(expired) + len(full) == 10, answers
    assert not set(ran(gated)) & set(range(base + 1, base + 11))  # none of the burst ran
    after = metrics(gated)
    # a queue timeout counts as REJECTED; a full queue's refusal counts nothing (Triton 2.51)
    assert after["nv_inference_request_failure:REJECTED"] - before["nv_inference_request_failure:REJECTED"] \
        == len(expired)
    assert after["nv_inference_request_success"] - before["nv_inference_request_success"] == 1  # the blocker
    assert after["tritonctl_inference_stale_exec_count"] == before["tritonctl_inference_stale_exec_count"] == 0


def test_a_grpc_client_whose_deadline_passes_in_the_queue_is_dropped_at_once(gated):
    before = metrics(gated)
    blocker = Blocker(gated, "grpc", -300)
    try:
        status, _ = refusal(gated, "grpc", 301, client_timeout=0.2)
        assert status == "StatusCode.DEADLINE_EXCEEDED"
        # the server drops it now, not when the instance frees up: its place in the queue is free
        wait_for(lambda: metrics(gated)["nv_inference_request_failure:CANCELED"]
                 == before["nv_inference_request_failure:CANCELED"] + 1, "the cancellation to be counted")
        assert metrics(gated)["nv_inference_pending_request_count"] == 0
    finally:
        blocker.release()
    assert 301 not in ran(gated)
    assert metrics(gated)["tritonctl_inference_stale_exec_count"] == 0


def test_an_http_client_that_disconnects_in_the_queue_is_dropped_at_once(gated):
    before = metrics(gated)
    blocker = Blocker(gated, "http", -400)
    try:
        body = json.dumps({"inputs": [{"name": "TAG", "shape": [1, 1], "datatype": "INT32", "data": [401]}]}).encode()
        host, port = gated.http_url.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /v2/models/gate/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            wait_for(lambda: metrics(gated)["nv_inference_pending_request_count"] == 1, "the request to be queued")
        wait_for(lambda: metrics(gated)["nv_inference_request_failure:CANCELED"]
                 == before["nv_inference_request_failure:CANCELED"] + 1, "the disconnect to be counted")
        assert metrics(gated)["nv_inference_pending_request_count"] == 0
    finally:
        blocker.release()
    assert 401 not in ran(gated)
    assert metrics(gated)["tritonctl_inference_stale_exec_count"] == 0
