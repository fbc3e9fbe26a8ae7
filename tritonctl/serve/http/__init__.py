"""KServe v2 HTTP/REST with Triton's extensions, as a plain ASGI application."""
