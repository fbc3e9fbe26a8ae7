"""The HTTP transports at their limits and on framing they cannot read, over raw sockets: a body
over ``--http-max-input-size`` (declared, chunked, pipelined behind a valid request), a head (request
line and headers) over 64 KiB, and requests that are not HTTP. Both transports give the same
status and text: 400 with Triton's JSON text naming the declared size and the limit, or naming the
head limit, or uvicorn's "Invalid HTTP request received."; and the server serves on afterwards.
Property-based: random bytes after a valid request line (with and without chunked framing) get
well-formed HTTP answers, none a server fault, or a closed connection, never a hang."""

from __future__ import annotations

import json
import socket

import pytest
import tritonclient.http as httpclient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.serve_models import serving_repository
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

LIMIT = 1 << 20
HEAD_LIMIT = 64 * 1024
TOO_LARGE = ("Request body size of {size} bytes exceeds the maximum allowed value of 1048576 bytes. Use "
             "--http-max-input-size to increase the limit")
TOO_LARGE_CHUNKED = ("Request body exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size "
                     "to increase the limit")
HEAD_TOO_LONG = "Request header exceeds the maximum allowed size of 65536 bytes"
NOT_HTTP = "Invalid HTTP request received."


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("limits") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None, control_mode="explicit",
                           load_models=["add_sub"], exit_timeout_secs=5, http_max_input_size=LIMIT, **transports)
    with BackgroundServer(options) as server:
        yield server


def exchange(served, data: bytes, count: int | None = None, timeout_s: float = 30.0) -> list[tuple[int, str, bytes]]:
    """Send ``data`` on a connection of its own; the replies (status, content type, body) read
    until ``count`` of them are complete, or until the server closes the connection (``count``
    None: the request said ``Connection: close``, or the sending is half-closed). A server that
    stops reading (it refused the request) may cut the sending short."""
    host, port = served.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        try:
            sock.sendall(data)
            if count is None:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        received = b""
        try:
            while count is None or len(replies(received)) < count:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise AssertionError(f"no end of the answer within {timeout_s} s; got {received[:300]!r}") from None
    return replies(received)


def replies(received: bytes) -> list[tuple[int, str, bytes]]:
    """The complete replies at the start of ``received``."""
    found = []
    while b"\r\n\r\n" in received:
        head, _, rest = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            break
        found.append((int(lines[0].split()[1]), headers.get("content-type", ""), rest[:length]))
        received = rest[length:]
    return found


def refusal(served, data: bytes) -> tuple[int, str, bytes]:
    """The reply to ``data``, one request."""
    answers = exchange(served, data, count=1)
    assert len(answers) == 1, answers
    return answers[0]


def error_text(reply: tuple[int, str, bytes]) -> str:
    status, content_type, body = reply
    assert status == 400 and content_type == "application/json", reply
    return json.loads(body)["error"]


def post(path: str, headers: str, body: bytes = b"") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


def still_serving(served) -> None:
    client = httpclient.InferenceServerClient(served.http_url)
    try:
        assert client.is_server_live() and client.is_model_ready("add_sub")
    finally:
        client.close()


def test_a_declared_body_over_the_limit_gets_tritons_400_naming_both_numbers(served):
    size = LIMIT + 1
    reply = refusal(served, post("/v2/models/add_sub/infer", f"Content-Length: {size}\r\n"
                                 "Inference-Header-Content-Length: 0\r\n", b"x" * size))
    assert error_text(reply) == TOO_LARGE.format(size=size)
    still_serving(served)


def test_a_chunked_body_over_the_limit_gets_the_400_naming_the_limit(served):
    chunk = b"x" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // len(chunk) + 1)) + b"0\r\n\r\n"
    reply = refusal(served, post("/v2/models/add_sub/infer", "Transfer-Encoding: chunked\r\n", body))
    assert error_text(reply) == TOO_LARGE_CHUNKED
    still_serving(served)


def test_a_body_over_the_limit_behind_a_valid_request_on_one_connection(served):
    size = 5 * LIMIT
    answers = exchange(served, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                       + post("/v2/models/add_sub/infer", f"Content-Length: {size}\r\n", b"y" * size), count=2)
    assert [status for status, _, _ in answers] == [200, 400]
    assert error_text(answers[1]) == TOO_LARGE.format(size=size)


@pytest.mark.parametrize("size", [HEAD_LIMIT + 1000, 4 * HEAD_LIMIT])
def test_a_head_over_64_kib_gets_400_naming_the_limit(served, size):
    reply = refusal(served, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
    assert error_text(reply) == HEAD_TOO_LONG
    still_serving(served)


def test_a_head_within_the_limit_is_served(served):
    answers = exchange(served, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (HEAD_LIMIT - 1000)
                       + b"\r\n\r\n", count=1)
    assert [status for status, _, _ in answers] == [200]


def test_a_head_that_never_ends_is_cut_at_the_limit(served):
    # one endless header line, 4 MiB of it: refused once past the limit, not kept
    answers = exchange(served, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Endless: " + b"a" * (4 << 20), count=1)
    assert error_text(answers[0]) == HEAD_TOO_LONG
    still_serving(served)


@pytest.mark.parametrize("data", [
    b"GARBAGE\r\n\r\n",
    post("/v2/models/add_sub/infer", "Content-Length: abc\r\n"),
    post("/v2/models/add_sub/infer", "Content-Length: -5\r\n"),
    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nA header line without a colon\r\n\r\n",
    post("/v2/models/add_sub/infer", "Transfer-Encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"),
    # two lengths that differ: refused (RFC 9112 6.3), and nothing after it on the connection is read
    post("/v2/models/add_sub/infer", "Content-Length: 2\r\nContent-Length: 40\r\n", b"{}" + b"x" * 38),
], ids=["not-http", "length-not-a-number", "negative-length", "header-without-colon", "bad-chunk-size",
        "conflicting-lengths"])
def test_framing_that_is_not_http_gets_400_and_uvicorns_text(served, data):
    status, content_type, body = refusal(served, data)
    assert (status, content_type.split(";")[0], body.decode()) == (400, "text/plain", NOT_HTTP)
    still_serving(served)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.binary(max_size=300), chunked=st.booleans())
def test_random_bytes_after_a_request_line_get_an_http_answer_or_a_close(served, tail, chunked):
    head = b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    data = head + (b"Transfer-Encoding: chunked\r\n" if chunked else b"") + tail
    # half-closed after sending: the server answers what it could read, or closes; it never waits
    for status, _, _ in exchange(served, data):
        assert 400 <= status < 500 or status == 200, status


def test_the_server_serves_after_the_random_bytes(served):
    still_serving(served)


@pytest.fixture
def quick_idle_uvicorn(tmp_path, monkeypatch):
    """A server on the Python transport whose idle timeout is 1 s instead of 30."""
    import tritonctl.serve.http as http_front_end

    monkeypatch.setattr(http_front_end, "IDLE_TIMEOUT_S", 1)
    repo = serving_repository(tmp_path / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None, control_mode="explicit",
                           load_models=["add_sub"], exit_timeout_secs=5, http_transport="uvicorn",
                           grpc_transport="aio")
    with BackgroundServer(options) as server:
        yield server


@pytest.mark.parametrize("sent", [b"", b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"\r\n"],
                         ids=["nothing", "part-of-a-head", "an-empty-line"])
def test_a_silent_connection_is_closed_by_the_python_transport(quick_idle_uvicorn, sent):
    # the C++ transport closes after 30 s of silence (libevent's read timeout), measured by hand
    host, port = quick_idle_uvicorn.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        if sent:
            sock.sendall(sent)
        try:
            assert sock.recv(100) == b""  # closed by the server, within the socket's 20 s
        except ConnectionResetError:
            pass
    still_serving(quick_idle_uvicorn)
