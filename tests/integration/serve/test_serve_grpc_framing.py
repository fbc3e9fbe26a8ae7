"""The gRPC port against bytes that are not gRPC, over raw sockets, on both transports: HTTP/1.1,
garbage, HTTP/2 frames too large or with headers HPACK cannot decode, floods of SETTINGS, PING
and RST_STREAM frames, a flow-control window pushed past its maximum. Each connection is closed or
left to the transport, never a crash: a valid inference succeeds after every case."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from helpers.serve_models import serving_repository
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, WINDOW_UPDATE = 0, 1, 3, 4, 6, 8


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


SETTINGS_ACKLESS = frame(SETTINGS, 0, 0, b"")
CASES = {
    "http1": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "garbage": b"\x00" * 100 + b"\xff" * 100,
    "preface-then-garbage": PREFACE + b"\xff" * 64,
    "frame-over-max-size": PREFACE + SETTINGS_ACKLESS + frame(DATA, 0, 1, b"x" * 20000),
    "headers-hpack-cannot-decode": PREFACE + SETTINGS_ACKLESS + frame(HEADERS, 4, 1, b"\xff" * 5),
    "settings-flood": PREFACE + SETTINGS_ACKLESS * 5000,
    "ping-flood": PREFACE + SETTINGS_ACKLESS + frame(PING, 0, 0, b"12345678") * 5000,
    "window-past-its-maximum": PREFACE + SETTINGS_ACKLESS
    + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7fffffff)) * 2,
    "rst-stream-flood": PREFACE + SETTINGS_ACKLESS + b"".join(
        frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8)) for i in range(2000)),
}


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("grpc-framing") / "repo")
    options = ServeOptions(repo, http_port=None, grpc_port=0, metrics_port=None, control_mode="explicit",
                           load_models=["add_sub"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
def test_bytes_that_are_not_grpc_leave_the_server_serving(served, data):
    host, port = served.grpc_url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(1)  # the transport answers within ms; then it is quiet or closes
            while sock.recv(65536):  # whatever the transport answers (GOAWAY, SETTINGS, PING acks)
                pass
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass  # left open, or reset: the transport's choice
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        inputs = [grpcclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
        assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[2.0] * 4]
    finally:
        client.close()
