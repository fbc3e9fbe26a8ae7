"""A real server on free loopback ports, driven by the real tritonclient."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "unit" / "serve"))

from serve_models import serving_repository  # noqa: E402
from tritonctl.serve.runtime import BackgroundServer, ServeOptions  # noqa: E402


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("serve") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5)
    with BackgroundServer(options) as server:
        yield server
