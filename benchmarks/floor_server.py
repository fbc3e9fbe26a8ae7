"""The cost floor of a gRPC front end: a server whose ModelInfer returns a canned reply without
looking at the request (no model, no queue). bench_serve.py runs it next to `tritonctl serve`
so that what tritonctl spends beyond the protocol itself can be read off the same table. The
reply is the real response for the workload (same size).

    python benchmarks/floor_server.py HTTP_PORT GRPC_PORT REPLY_FILE [--native]

By default a grpc.aio server on uvloop (a Python front end); with --native, tritonctl's C++
transport (tritonctl.serve.grpc._native), answering on the gRPC thread that read the message
as tritonctl does for a lone ModelInfer, or from the event loop for the others.
HTTP_PORT answers only GET /v2/health/ready (for the benchmark's readiness check).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc
import uvloop


async def health(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def serve_aio(grpc_port: int, reply: bytes):
    """Starts serving; returns the server, to keep."""
    async def model_infer(_request: bytes, _context) -> bytes:
        return reply

    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    method = grpc.unary_unary_rpc_method_handler(model_infer, request_deserializer=None, response_serializer=None)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("inference.GRPCInferenceService",
                                                                          {"ModelInfer": method}),))
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    return server


async def serve_native(grpc_port: int, reply: bytes):
    """Starts serving; returns the transport, to keep."""
    from tritonctl.serve.grpc.native import INFER, STREAM, _native
    from tritonctl.serve.grpc.handlers import MAX_MESSAGE

    ok = grpc.StatusCode.OK.value[0]
    transport = _native.Server(f"127.0.0.1:{grpc_port}", MAX_MESSAGE, STREAM, INFER)

    def on_events() -> None:
        for kind, call, _payload in transport.take_events():
            if kind == _native.MESSAGE:
                call.finish(ok, "", reply)

    transport.set_inline_handler(lambda call, _payload: call.finish(ok, "", reply))
    asyncio.get_running_loop().add_reader(transport.fd, on_events)
    return transport


async def main(http_port: int, grpc_port: int, reply: bytes, native: bool) -> None:
    _server = await (serve_native if native else serve_aio)(grpc_port, reply)
    await asyncio.start_server(health, "127.0.0.1", http_port)  # ready once gRPC serves
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]).read_bytes(), "--native" in sys.argv[4:]))
