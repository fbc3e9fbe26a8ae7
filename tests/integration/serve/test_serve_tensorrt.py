"""TensorRT plans (``platform: "tensorrt_plan"``) served and called with the real tritonclient.

On any machine: without the tensorrt extra or a GPU, a plan model fails to load with the reason
(the missing GPU, or the install command), the repository index says so, and the other models
serve. On a GPU with TensorRT (the ``gpu`` marker): `tritonctl build --format plan` output serves
unchanged over HTTP and gRPC, with dynamic batching, and a shape outside the engine's profile is
the request's fault (400 / INVALID_ARGUMENT)."""

from __future__ import annotations

import textwrap
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.build_models import dynamic_add_sub
from helpers.serve_models import write_add_sub
from tritonctl.convert.tensorrt_build import plan_unavailable
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

PLAN_CONFIG = """
    platform: "tensorrt_plan"
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    """


def _client(module, server):
    return module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)


def _inputs(module, a, b):
    inputs = [module.InferInput("INPUT0", list(a.shape), "FP32"), module.InferInput("INPUT1", list(b.shape), "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def test_a_plan_that_cannot_run_here_fails_alone_with_its_reason(tmp_path, transports):
    missing = plan_unavailable()
    if missing is None:
        pytest.skip("TensorRT and a GPU are present: the plan would load")
    repo = tmp_path / "repo"
    write_add_sub(repo)
    (repo / "plan" / "1").mkdir(parents=True)
    (repo / "plan" / "1" / "model.plan").write_bytes(b"not an engine built here")
    (repo / "plan" / "config.pbtxt").write_text(textwrap.dedent(PLAN_CONFIG))
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, strict_readiness=False, **transports)
    with BackgroundServer(options) as server:
        a, b = np.ones((2, 4), np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)
        for module in (httpclient, grpcclient):
            client = _client(module, server)
            assert not client.is_model_ready("plan")
            result = client.infer("add_sub", _inputs(module, a, b))  # the rest of the repository serves
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            with pytest.raises(InferenceServerException):
                client.infer("plan", _inputs(module, a, b))
        index = {entry["name"]: entry for entry in _client(httpclient, server).get_model_repository_index()}
        reason = index["plan"]["reason"]
        assert index["plan"]["state"] == "UNAVAILABLE"
        # Whatever is missing here is named: the package and its install, or the GPU.
        # Without a GPU the config already says so (Triton would make CPU instances of a plan);
        # with one, the backend names what is missing.
        assert "no GPU is available" in reason or "pip install 'tritonctl[tensorrt]'" in reason \
            or "needs a GPU" in reason, reason


@pytest.mark.gpu
def test_build_plan_output_serves_unchanged(tmp_path, transports):
    missing = plan_unavailable()
    if missing is not None:
        pytest.skip(f"plan builds need: {missing}")
    from tritonctl.convert.options import BuildOptions
    from tritonctl.convert.pipeline import build

    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    result = build(BuildOptions(str(source), tmp_path / "repo", "plan", format="plan", max_batch_size=8))
    options = ServeOptions(result.model_dir.parent, http_port=0, grpc_port=0, metrics_port=0, **transports)
    rng = np.random.default_rng(0)
    with BackgroundServer(options) as server:
        for module in (httpclient, grpcclient):
            client = _client(module, server)
            metadata = client.get_model_metadata("plan")
            names = [i["name"] if isinstance(i, dict) else i.name for i in
                     (metadata["inputs"] if isinstance(metadata, dict) else metadata.inputs)]
            a = rng.standard_normal((3, 4)).astype(np.float32)
            b = rng.standard_normal((3, 4)).astype(np.float32)
            inputs = [module.InferInput(n, [3, 4], "FP32") for n in names]
            for tensor, value in zip(inputs, (a, b)):
                tensor.set_data_from_numpy(value)
            answer = client.infer("plan", inputs)
            outputs = [o["name"] if isinstance(o, dict) else o.name for o in
                       (metadata["outputs"] if isinstance(metadata, dict) else metadata.outputs)]
            np.testing.assert_allclose(answer.as_numpy(outputs[0]), a + b, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(answer.as_numpy(outputs[1]), a - b, rtol=1e-5, atol=1e-5)
            too_big = [module.InferInput(n, [9, 4], "FP32") for n in names]  # beyond max_batch_size 8
            for tensor in too_big:
                tensor.set_data_from_numpy(np.zeros((9, 4), np.float32))
            with pytest.raises(InferenceServerException) as raised:
                client.infer("plan", too_big)
            assert "batch" in raised.value.message().lower()


def test_without_tensorrt_a_gpu_instance_names_the_install(tmp_path):
    """Where a GPU is present but the tensorrt extra is not, the backend itself says what to install."""
    import importlib.util

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here")
    from tritonctl.repo_schema.schema import model_config_pb2
    from tritonctl.serve.backends.tensorrt import TensorRTBackend
    from tritonctl.serve.core.backend_api import BackendLoadError, InstanceSpec

    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.plan").write_bytes(b"engine")
    config = model_config_pb2().ModelConfig(name="plan", platform="tensorrt_plan", backend="tensorrt")
    with pytest.raises(BackendLoadError) as raised:
        TensorRTBackend(config, tmp_path / "1", InstanceSpec("plan_0", "KIND_GPU", 0))
    assert str(raised.value) == ("unable to load model 'plan': model 'plan' (TensorRT backend) needs tensorrt: "
                                 "pip install 'tritonctl[tensorrt]'")
    with pytest.raises(BackendLoadError, match="unable to find '.*/2/model.plan' for model instance 'plan'"):
        TensorRTBackend(config, tmp_path / "2", InstanceSpec("plan_0", "KIND_GPU", 0))
