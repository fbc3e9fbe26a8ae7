"""A real server on free loopback ports, driven by the real tritonclient, over both transports of
both protocols: every test that starts a server takes ``transports``, so it runs once over the
C++ transports and once over the Python ones (grpc.aio, uvicorn), which users without the C++
libraries get."""

from __future__ import annotations

import pytest

from helpers.serve_models import serving_repository
from tritonctl.serve.grpc import native as grpc_native
from tritonctl.serve.http import native as http_native
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

TRANSPORTS = {"native": {"grpc_transport": "native", "http_transport": "native"},
              "python": {"grpc_transport": "aio", "http_transport": "uvicorn"}}


@pytest.fixture(scope="session", params=list(TRANSPORTS))
def transports(request) -> dict:
    """ServeOptions' transport choices: the C++ ones (skipped where not built), or the Python ones."""
    if request.param == "native":
        for protocol, module in (("gRPC", grpc_native), ("HTTP", http_native)):
            if not module.available():
                pytest.skip(f"the native {protocol} transport is not built here: {module.UNAVAILABLE_REASON}")
    return TRANSPORTS[request.param]


@pytest.fixture(scope="session")
def served(tmp_path_factory, transports):
    repo = serving_repository(tmp_path_factory.mktemp("serve") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server
