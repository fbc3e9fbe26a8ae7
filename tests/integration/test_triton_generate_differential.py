"""The generate extension against the real Triton 2.51: every request of helpers/generate_cases.py
sent to a real tritonserver and to ``tritonctl serve`` (both HTTP transports) on the same
repository. Triton must still answer what the file recorded, and ``tritonctl serve`` what Triton
answers: the same status (400 where Triton reports a client's fault as its own 500), Content-Type
and body, Server-Sent Events framing included."""

from __future__ import annotations

import pytest
import requests

from helpers.generate_cases import CASES
from helpers.generate_models import generate_repository
from helpers.triton_anchor import TritonServer, unavailable_reason
from tritonctl.serve.http import native
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

UNAVAILABLE = unavailable_reason()
pytestmark = [pytest.mark.triton, pytest.mark.slow,
              pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]

MODELS = ["mock_llm", "mock_llm_nd", "types"]


def answers(base: str) -> list[tuple[int, str, str]]:
    session = requests.Session()
    out = []
    for case in CASES:
        reply = session.request(case.method, f"{base}/v2/models/{case.model}/{case.route}", data=case.body.encode(),
                                headers=dict(case.headers), timeout=60)
        out.append((reply.status_code, reply.headers.get("Content-Type"), reply.content.decode("latin-1")))
    return out


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return generate_repository(tmp_path_factory.mktemp("generate_diff") / "repo")


@pytest.fixture(scope="module")
def triton(repo, tmp_path_factory):
    with TritonServer(repo, tmp_path_factory.mktemp("triton-logs")) as server:
        for model in MODELS:
            assert server.load(model, timeout_s=120).loaded, model
        yield answers(f"http://127.0.0.1:{server.http_port}")


@pytest.mark.parametrize("http_transport", ["native", "uvicorn"])
def test_tritonctl_answers_as_triton(repo, triton, http_transport):
    if http_transport == "native" and not native.available():
        pytest.skip(f"the native HTTP transport is not built here: {native.UNAVAILABLE_REASON}")
    recorded = [(case.status, case.content_type, case.reply) for case in CASES]
    assert [f"{case.label}: {got}" for case, got, then in zip(CASES, triton, recorded) if got != then] == []
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None, control_mode="explicit",
                           load_models=MODELS, exit_timeout_secs=5, http_transport=http_transport)
    with BackgroundServer(options) as served:
        ours = answers(f"http://{served.http_url}")
    expected = [(400 if status == 500 else status, content_type, body) for status, content_type, body in triton]
    assert [f"{case.label}: triton {want}, tritonctl {got}" for case, want, got in zip(CASES, expected, ours)
            if want != got] == []
