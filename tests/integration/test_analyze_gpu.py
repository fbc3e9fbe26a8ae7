"""analyze on a machine with a GPU (the `gpu` marker): a TorchScript model whose config names no
instance_group is tuned on KIND_GPU instances, every point served and measured there, and the
chosen config.pbtxt keeps them on the GPU."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.analyze_models import FAST
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.search import SearchSpace

torch = pytest.importorskip("torch")

CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 64 ] } ]
"""


@pytest.mark.gpu
def test_a_torchscript_model_is_tuned_on_the_gpu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a CUDA build of torch")
    (tmp_path / "repo" / "mlp" / "1").mkdir(parents=True)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    torch.jit.script(module).save(str(tmp_path / "repo" / "mlp" / "1" / "model.pt"))
    (tmp_path / "repo" / "mlp" / "config.pbtxt").write_text(CONFIG)
    space = SearchSpace(batch_sizes=(1, 8), queue_delays_us=(0,), instance_counts=(1, 2), concurrency=(4,))
    result = run_analyze(AnalyzeOptions(repository=tmp_path / "repo", model="mlp", output_dir=tmp_path / "out",
                                        space=space, engine="subprocess", strategy="exhaustive", **FAST))
    frame = pd.read_csv(tmp_path / "out" / "measurements.csv")
    assert result.measured > 0 and len(frame) == result.measured
    assert set(frame["instance_kind"]) == {"KIND_GPU"} and (frame["error_count"] == 0).all()
    assert (frame["throughput"] > 0).all()
    assert "kind: KIND_GPU" in (tmp_path / "out" / "config.pbtxt").read_text()
