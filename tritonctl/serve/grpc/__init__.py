"""Triton's ``inference.GRPCInferenceService`` plus the standard health service, over the C++
transport (native.py) when it is built, else over grpc.aio (service.py)."""

from __future__ import annotations

import logging

log = logging.getLogger("tritonctl.serve.grpc")

TRANSPORTS = ("auto", "native", "aio")


async def start_front_end(server, address: str, transport: str = "auto"):
    """The gRPC front end of ``server``, bound to ``address`` and started. ``transport``: "native"
    (the C++ transport; an error where it is not built), "aio" (grpc.aio) or "auto" (native when
    built). The front end has ``port`` and ``async stop(grace_s)``."""
    from tritonctl.serve.grpc import native
    from tritonctl.serve.grpc.service import AioFrontEnd

    if transport not in TRANSPORTS:
        raise ValueError(f"unknown gRPC transport '{transport}': expected one of {', '.join(TRANSPORTS)}")
    if transport == "native" and not native.available():
        raise RuntimeError(f"the native gRPC transport is not built ({native.UNAVAILABLE_REASON}); install "
                           "gRPC's C++ library (Debian: libgrpc++-dev) and reinstall tritonctl, or use the aio "
                           "transport")
    if transport == "aio" or not native.available():
        if transport == "auto":
            log.info("gRPC over grpc.aio: the native transport is not built (%s)", native.UNAVAILABLE_REASON)
        front_end = AioFrontEnd(server, address)
    else:
        front_end = native.NativeGrpcFrontEnd(server, address)
    await front_end.start()
    return front_end
