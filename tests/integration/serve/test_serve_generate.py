"""The generate extension (``v2/models/M[/versions/V]/generate`` and ``/generate_stream``) of
``tritonctl serve``, over both HTTP transports, with real HTTP clients: every request of
helpers/generate_cases.py answered as the real Triton 2.51 answered it (status, Content-Type, the
whole body and its Server-Sent Events framing), events sent as the model makes them, a client that
leaves cancelling its request, the other endpoints' JSON errors in Triton's words, and bodies
Triton 2.51 crashed on (JSON nested 150,000 deep, a body in a million chunks) answered."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

from helpers.generate_cases import CASES, JSON, SSE
from helpers.generate_models import generate_repository
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = generate_repository(tmp_path_factory.mktemp("generate") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server


def url(served, path: str) -> str:
    return f"http://{served.http_url}{path}"


def test_every_case_is_answered_as_triton_answered_it(served):
    session = requests.Session()
    differences = []
    for case in CASES:
        reply = session.request(case.method, url(served, f"/v2/models/{case.model}/{case.route}"),
                                data=case.body.encode(), headers=dict(case.headers), timeout=60)
        got = (reply.status_code, reply.headers.get("Content-Type"), reply.content.decode("latin-1"))
        if got != (case.expected_status, case.content_type, case.reply):
            differences.append(f"{case.label}: expected {case.expected_status} {case.reply!r}, got {got}")
    assert differences == []


def test_a_versioned_route_and_an_unknown_version(served):
    body = json.dumps({"PROMPT": "a", "STREAM": False})
    reply = requests.post(url(served, "/v2/models/mock_llm/versions/1/generate"), data=body, timeout=60)
    assert (reply.status_code, reply.json()) == (200, {"TEXT": "a", "model_name": "mock_llm", "model_version": "1"})
    reply = requests.post(url(served, "/v2/models/mock_llm/versions/2/generate_stream"), data=body, timeout=60)
    assert (reply.status_code, reply.json()) == (404, {"error": "Request for unknown model: 'mock_llm' version 2 is "
                                                                "not found"})


def events(reply) -> list[tuple[float, dict]]:
    """(seconds since the request, event) of each Server-Sent Event, as it arrives."""
    start = time.monotonic()
    out, pending = [], b""
    for part in reply.iter_content(chunk_size=None):
        pending += part
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            assert event.startswith(b"data: ")
            out.append((time.monotonic() - start, json.loads(event[len(b"data: "):])))
    assert pending == b""
    return out


def test_events_go_out_as_the_model_sends_them(served):
    body = json.dumps({"PROMPT": ["hello"], "STREAM": True, "REPETITION": 3, "DELAY": 0.4})
    with requests.post(url(served, "/v2/models/mock_llm/generate_stream"), data=body, stream=True, timeout=60) as reply:
        assert reply.headers["Content-Type"] == SSE
        assert reply.headers.get("Transfer-Encoding") == "chunked"
        received = events(reply)
    assert [event for _, event in received] == [{"TEXT": "hello", "model_name": "mock_llm", "model_version": "1"}] * 3
    gaps = [later - earlier for (earlier, _), (later, _) in zip(received, received[1:])]
    assert received[0][0] < 1.0 and all(0.25 < gap < 2.0 for gap in gaps), received


def test_a_client_that_leaves_cancels_its_stream(served, tmp_path):
    marker = tmp_path / "cancelled"
    body = json.dumps({"PROMPT": ["hello"], "STREAM": True, "REPETITION": 50, "DELAY": 0.1,
                       "CANCELLED_FILE": str(marker)})
    with requests.post(url(served, "/v2/models/mock_llm/generate_stream"), data=body, stream=True, timeout=60) as reply:
        assert next(reply.iter_content(chunk_size=None)).startswith(b"data: ")
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.read_text() == "cancelled"  # the model saw is_cancelled() and stopped
    assert requests.get(url(served, "/v2/health/ready"), timeout=10).status_code == 200
    deadline = time.monotonic() + 10
    while served.runtime.server.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not served.runtime.server.in_flight


def test_many_requests_at_once(served):
    """Triton's L0_http race test: streams and single answers side by side."""
    bodies = [{"PROMPT": "hello", "STREAM": False, "param": "segfault"},
              {"PROMPT": "hello", "STREAM": True, "REPETITION": 3, "param": "segfault"}]
    results: list = []

    def send(body):
        reply = requests.post(url(served, "/v2/models/mock_llm/generate_stream"), data=json.dumps(body), timeout=60)
        results.append((reply.status_code, reply.text.count("data: ")))

    threads = [threading.Thread(target=send, args=(body,)) for _ in range(25) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [(200, 1)] * 25 + [(200, 3)] * 25


@pytest.mark.parametrize("path", ["/v2/repository/index", "/v2/logging", "/v2/models/types/trace/setting",
                                  "/v2/systemsharedmemory/region/r/register",
                                  "/v2/cudasharedmemory/region/r/register", "/v2/models/types/generate"])
def test_a_body_in_a_million_chunks_is_read_and_refused_in_tritons_words(served, path):
    """Triton's L0_http http_request_many_chunks (Triton 2.51 itself crashed on it): the answer
    ends the chunks, in Triton's words (RapidJSON's), 400 where Triton says 500."""
    host, port = served.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     .encode())
        sock.sendall(b"1\r\nA\r\n" * 1_000_000 + b"0\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body) == {"error": "failed to parse the request JSON buffer: Invalid value. at 0"}


def test_json_nested_150000_deep_is_answered(served):
    """Triton's L0_http nested_json_crash (Triton 2.51 crashed): an answer, and the server lives."""
    nested = "[" * 150_000 + "1" + "]" * 150_000
    reply = requests.post(url(served, "/v2/models/types/generate"), data=f'{{"F32": {nested}}}', timeout=60)
    assert (reply.status_code, json.loads(reply.json()["OUT"])["F32"]) == (200, [[1], "float32", [1.0]])
    reply = requests.post(url(served, "/v2/models/types/infer"), timeout=60, data=json.dumps(
        {"inputs": [{"name": "F32", "shape": [1], "datatype": "FP32", "data": "NESTED"}]}).replace('"NESTED"', nested))
    assert reply.status_code == 400 and reply.json()["error"].startswith("failed to parse the request JSON buffer: ")
    assert requests.get(url(served, "/v2/health/live"), timeout=10).status_code == 200


@pytest.mark.parametrize("body, error", [
    (b"[1,2", "Missing a comma or ']' after an array element. at 4"),
    (b'{"a" 1}', "Missing a colon after a name of object member. at 5"),
    (b'{"a":"\\u12"}', "Incorrect hex digit after \\u escape in string. at 6"),
    (b"{} x", "The document root must not be followed by other values. at 3"),
    (b"   ", "The document is empty. at 3"),
])
def test_infer_json_errors_in_tritons_words(served, body, error):
    reply = requests.post(url(served, "/v2/models/types/infer"), data=body, headers={"Content-Type": JSON},
                          timeout=60)
    assert (reply.status_code, reply.json()) == (400, {"error": f"failed to parse the request JSON buffer: {error}"})
