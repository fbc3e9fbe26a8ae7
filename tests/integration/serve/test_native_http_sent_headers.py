"""The C++ HTTP transport's headers as the client sent them (``Request.sent_headers``, kept where
headers are forwarded as request parameters): evhttp trims a value's trailing spaces and tabs,
Triton's libevhtp does not, so the transport takes them back from the bytes as they arrive. Real
sockets against the transport itself: header lines split across sends, a body whose lines look
like headers, and a second request on the same connection."""

from __future__ import annotations

import select
import socket

import pytest

from tritonctl.serve.http import native

pytestmark = pytest.mark.skipif(not native.available(), reason=f"the C++ HTTP transport is not built here: "
                                                                f"{native.UNAVAILABLE_REASON}")


def next_request(server):
    """The next request the transport queued (its event fd turns readable when it does)."""
    for _ in range(100):
        for kind, request in server.take_events():
            if kind == native._native.REQUEST:
                return request
        readable, _, _ = select.select([server.fd], [], [], 30)
        assert readable, "no request reached the transport in 30 s"
    raise AssertionError("no request")


@pytest.fixture
def server():
    transport = native._native.Server("127.0.0.1", 0, 1 << 20, True)
    yield transport
    transport.shutdown(1.0)


def test_values_keep_their_trailing_whitespace_and_names_their_spelling(server):
    body = b"x: y \r\nMy_Header: b \r\n"  # lines of the body are not headers
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(b"POST /a HTTP/1.1\r\nHost: h\r\nMy_Header: ends in a space \r\nX-Tab: v\t\r\n"
                       b"My_Header: b\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        first = next_request(server)
        assert first.headers == [(b"host", b"h"), (b"my_header", b"ends in a space"), (b"x-tab", b"v"),
                                 (b"my_header", b"b"), (b"content-length", b"22")]
        assert first.sent_headers == [(b"Host", b"h"), (b"My_Header", b"ends in a space "), (b"X-Tab", b"v\t"),
                                      (b"My_Header", b"b"), (b"Content-Length", b"22")]
        assert first.take_body() == body
        first.finish(200, "OK", [], b"")
        # the next request on the connection, one of its header lines split across two sends
        client.sendall(b"GET /b HTTP/1.1\r\nHost: h\r\nSplit: ab")
        assert client.recv(1024).startswith(b"HTTP/1.1 200")
        client.sendall(b"c  \r\nAfter: 1\r\n\r\n")
        second = next_request(server)
        assert second.sent_headers == [(b"Host", b"h"), (b"Split", b"abc  "), (b"After", b"1")]
        second.finish(200, "OK", [], b"")


def test_without_keeping_them_only_the_parsed_headers_are_there():
    transport = native._native.Server("127.0.0.1", 0, 1 << 20)
    try:
        with socket.create_connection(("127.0.0.1", transport.port)) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nX: v \r\n\r\n")
            request = next_request(transport)
            assert request.headers == [(b"host", b"h"), (b"x", b"v")] and request.sent_headers == []
            request.finish(200, "OK", [], b"")
    finally:
        transport.shutdown(1.0)


def test_large_and_chunked_bodies_arrive_whole(server):
    body = bytes(range(256)) * 3072 + b"\r\nX: y \r\n\r\n"  # 768 KiB with line breaks and blank lines
    chunked = b"5\r\nab \r\n\r\n0\r\n\r\n"  # one chunk, "ab \r\n", then the last chunk
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(b"POST /a HTTP/1.1\r\nHost: h\r\nX: v \r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        first = next_request(server)
        assert first.take_body() == body and first.sent_headers[1] == (b"X", b"v ")
        first.finish(200, "OK", [], b"")
        client.sendall(b"POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX: w\t\r\n\r\n" + chunked)
        second = next_request(server)
        assert second.take_body() == b"ab \r\n"
        assert second.sent_headers == [(b"Host", b"h"), (b"Transfer-Encoding", b"chunked"), (b"X", b"w\t")]
        second.finish(200, "OK", [], b"")
