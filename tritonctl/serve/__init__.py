"""The bundled batching server: KServe v2 / Triton HTTP and gRPC over a transport-free core."""
