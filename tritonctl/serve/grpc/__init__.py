"""Triton's ``inference.GRPCInferenceService`` plus the standard health service, over the C++
transport (native.py) when it is built, else over grpc.aio (aio.py); both call handlers.py."""

from __future__ import annotations


async def start_front_end(server, address: str, transport: str = "auto", forwarding=None, restrictions=None):
    """The gRPC front end of ``server``, bound to ``address`` and started. ``transport``: "native"
    (the C++ transport; an error where it is not built), "aio" (grpc.aio) or "auto" (native when
    built); ``forwarding``: the metadata forwarded as request parameters (a HeaderForwarding, or
    None); ``restrictions``: the methods that need a header (a Restrictions, or None). The front
    end has ``port`` and ``async stop(grace_s)``."""
    from tritonctl.serve.grpc import native
    from tritonctl.serve.grpc.aio import AioFrontEnd
    from tritonctl.serve.native_front_end import use_native

    if use_native("gRPC", transport, "aio", native, "gRPC's C++ library", "libgrpc++-dev"):
        front_end = native.NativeGrpcFrontEnd(server, address, forwarding, restrictions)
    else:
        front_end = AioFrontEnd(server, address, forwarding, restrictions)
    await front_end.start()
    return front_end
