"""build -> serve -> perf, end to end through the command line: one PyTorch source built with
--format torchscript and with --format onnx into one repository, served by ``tritonctl serve``,
answering like the source over HTTP and gRPC, and measured by ``tritonctl perf`` with no errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.processes import free_port, started
from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import build
from tritonctl.perf.options import PerfOptions
from tritonctl.perf.run import run_perf

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")

NETS = textwrap.dedent('''
    import torch

    class Scorer(torch.nn.Module):
        """Features [batch, 6] and a mask [batch, 3] -> scores [batch, 3] and their argmax [batch]."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

        def forward(self, features, mask):
            scores = self.net(features) * mask
            return scores, scores.argmax(1)

    def scorer():
        return Scorer()
''')
# A wide stability band: a level that is not stable ends a sweep, as perf_analyzer's does, and this
# test is about the counts, not stability.
FAST = {"measurement_interval_ms": 150, "stability_percentage": 1000, "max_trials": 5}



def _tritonctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tritonctl", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("build_serve_perf")
    (root / "nets.py").write_text(NETS)
    source = f"{root / 'nets.py'}:scorer"
    common = ["--repo", str(root / "repo"), "--input", "features:fp32:6", "--input", "mask:fp32:3",
              "--max-queue-delay-us", "500"]
    for fmt, name, outputs in (("torchscript", "scorer_pt", ["scores__0", "best__1"]),
                               ("onnx", "scorer_onnx", ["scores", "best"])):
        done = _tritonctl("build", source, "--name", name, "--format", fmt, *common,
                          *[a for o in outputs for a in ("--output", o)])
        assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def server(built):
    http_port, grpc_port = free_port(), free_port()
    command = [sys.executable, "-m", "tritonctl", "serve", str(built / "repo"), "--http-port", str(http_port),
               "--grpc-port", str(grpc_port), "--metrics-port", "-1"]
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    with started(command, lambda: client.is_server_ready() and client.is_model_ready("scorer_pt"),
                 "tritonctl serve", timeout_s=90), client:  # the client closes first
        yield f"127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"


def test_the_torchscript_entry_is_a_pytorch_model_with_its_check_recorded(built):
    config = (built / "repo" / "scorer_pt" / "config.pbtxt").read_text()
    assert 'backend: "pytorch"' in config and "max_batch_size: 8" in config and "dynamic_batching" in config
    assert (built / "repo" / "scorer_pt" / "1" / "model.pt").is_file()
    manifest = json.loads((built / "repo" / "scorer_pt" / "1" / "build.json").read_text())
    assert manifest["model"]["format"] == "torchscript" and manifest["accuracy"]["passed"] is True
    assert manifest["preparation"]["exporter"].startswith("torch.jit.trace")
    assert [o["name"] for o in manifest["accuracy"]["outputs"]] == ["scores__0", "best__1"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_both_entries_answer_like_the_source(server, built, protocol):
    sys.path.insert(0, str(built))
    try:
        import nets
    finally:
        sys.path.remove(str(built))
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server[0] if protocol == "http" else server[1])
    features = np.random.default_rng(5).standard_normal((5, 6)).astype(np.float32)
    mask = np.ones((5, 3), np.float32)
    scores, best = nets.scorer().eval()(torch.from_numpy(features), torch.from_numpy(mask))
    for model, names in (("scorer_pt", ("scores__0", "best__1")), ("scorer_onnx", ("scores", "best"))):
        tensors = [module.InferInput("features", [5, 6], "FP32"), module.InferInput("mask", [5, 3], "FP32")]
        tensors[0].set_data_from_numpy(features)
        tensors[1].set_data_from_numpy(mask)
        result = client.infer(model, tensors)
        np.testing.assert_allclose(result.as_numpy(names[0]), scores.detach().numpy(), rtol=1e-4, atol=1e-5)
        # a batch-only output is written as dims [ 1 ] with reshape { shape: [ ] }: clients see [batch, 1]
        assert np.array_equal(result.as_numpy(names[1]), best.numpy().reshape(5, 1))


@pytest.mark.parametrize("model", ["scorer_pt", "scorer_onnx"])
def test_perf_measures_each_entry_without_errors(server, model):
    result = run_perf(PerfOptions(model, url=server[1], protocol="grpc", concurrency=(1, 4), batch_size=2,
                                  warmup_requests=5, **FAST))
    assert [level.concurrency for level in result.levels] == [1, 4]
    assert result.server_total is not None and result.total_sent == result.server_total.success_count
    for level in result.levels:
        assert level.request_count > 0 and level.error_count == 0 and level.throughput > 0


def test_an_onnx_source_cannot_become_torchscript(built, tmp_path):
    onnx_model = built / "repo" / "scorer_onnx" / "1" / "model.onnx"
    with pytest.raises(BuildError, match=r"--format torchscript needs a PyTorch source: .*an ONNX model cannot be "
                                         r"turned into TorchScript"):
        build(BuildOptions(str(onnx_model), tmp_path / "repo", "again", format="torchscript"))
    assert not (tmp_path / "repo").exists()
