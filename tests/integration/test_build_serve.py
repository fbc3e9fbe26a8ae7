"""What tritonctl build writes is served by ``tritonctl serve`` and answers correctly
through the real tritonclient (HTTP and gRPC)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.build_models import fixed_batch_reshape
from helpers.processes import free_port, started

from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import build

ort = pytest.importorskip("onnxruntime")
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")



@pytest.fixture(scope="module")
def built_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("build_serve")
    source = fixed_batch_reshape(root / "fixed.onnx")
    build(BuildOptions(str(source), root / "repo", "fixed", max_batch_size=8, max_queue_delay_us=1000))
    return root, source


@pytest.fixture(scope="module")
def server(built_repo):
    root, _ = built_repo
    http_port, grpc_port = free_port(), free_port()
    command = [sys.executable, "-m", "tritonctl", "serve", str(root / "repo"), "--http-port", str(http_port),
               "--grpc-port", str(grpc_port), "--metrics-port", "-1"]
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    with started(command, client.is_server_ready, "tritonctl serve"), client:  # the client closes first
        yield http_port, grpc_port


def _expected(source: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(source))  # the original batch-1 model, one row at a time
    return np.concatenate([session.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])


def test_http_batch_matches_the_original_model_row_by_row(server, built_repo):
    http_port, _ = server
    _, source = built_repo
    x = np.random.default_rng(7).standard_normal((5, 3, 4)).astype(np.float32)
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    try:
        assert client.is_model_ready("fixed")
        metadata = client.get_model_metadata("fixed")
        assert metadata["inputs"][0]["shape"] == [-1, 3, 4]
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer("fixed", [tensor])
    finally:
        client.close()
    np.testing.assert_allclose(result.as_numpy("y"), _expected(source, x), rtol=1e-5, atol=1e-5)


def test_grpc_single_sample(server, built_repo):
    _, grpc_port = server
    _, source = built_repo
    x = np.random.default_rng(8).standard_normal((1, 3, 4)).astype(np.float32)
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    try:
        tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer("fixed", [tensor])
        config = client.get_model_config("fixed").config
    finally:
        client.close()
    assert config.max_batch_size == 8 and config.dynamic_batching.max_queue_delay_microseconds == 1000
    np.testing.assert_allclose(result.as_numpy("y"), _expected(source, x), rtol=1e-5, atol=1e-5)
