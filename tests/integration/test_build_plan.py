"""ONNX -> TensorRT plan builds on a real GPU: profiles, precisions, INT8 calibration,
the timing cache, and the plan served config. Skipped (with the reason) without one."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.build_models import dynamic_add_sub, fixed_batch_reshape, sequence_model

from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import Reporter, build
from tritonctl.convert.spec import parse_shape
from tritonctl.convert.tensorrt_build import plan_unavailable
from tritonctl.repo_schema.validate import validate_paths

MISSING = plan_unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(MISSING is not None, reason=f"plan builds need: {MISSING}")]


class Recorder(Reporter):
    def __init__(self) -> None:
        super().__init__()
        self.events = []

    def engine_progress(self, event) -> None:
        self.events.append(event)


def test_fixed_batch_onnx_to_fp32_plan(tmp_path):
    source = fixed_batch_reshape(tmp_path / "fixed.onnx")
    reporter = Recorder()
    result = build(BuildOptions(str(source), tmp_path / "repo", "fixed", format="plan", max_batch_size=16), reporter)
    assert result.model_path.name == "model.plan" and result.model_path.stat().st_size > 0
    manifest = result.manifest
    assert manifest["gpu"] and manifest["versions"]["tensorrt"]
    assert manifest["profile"] == {"x": {"min": [1, 3, 4], "opt": [16, 3, 4], "max": [16, 3, 4]}}
    assert manifest["accuracy"]["passed"]
    assert any(e.kind == "start" for e in reporter.events)  # the builder reported its phases
    config = result.config_path.read_text()
    assert 'backend: "tensorrt"' in config and "max_batch_size: 16" in config and "KIND_GPU" in config
    assert validate_paths([result.model_dir]).errors == 0


def test_fp16_with_dynamic_dims_and_a_timing_cache(tmp_path):
    source = sequence_model(tmp_path / "seq.onnx")
    cache = tmp_path / "timing.cache"
    options = dict(source=str(source), format="plan", precision="fp16", shapes=[parse_shape("x:4,32,64")],
                   timing_cache=cache)
    first = build(BuildOptions(repo=tmp_path / "a", name="seq", **options))
    assert cache.is_file() and cache.stat().st_size > 0
    assert first.manifest["profile"]["x"] == {"min": [1, 4], "opt": [8, 32], "max": [8, 64]}
    reporter = Recorder()
    build(BuildOptions(repo=tmp_path / "b", name="seq", **options), reporter)
    assert any("timing cache: reusing" in note for note in reporter.notes)


def test_int8_calibration_writes_a_cache(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    data = tmp_path / "calibration.npz"
    rng = np.random.default_rng(0)
    np.savez(data, INPUT0=rng.standard_normal((32, 16)).astype(np.float32),
             INPUT1=rng.standard_normal((32, 16)).astype(np.float32))
    result = build(BuildOptions(str(source), tmp_path / "repo", "add_sub", format="plan", precision="int8",
                                calibration_data=data, atol=0.2, rtol=0.2))
    assert (result.model_path.parent / "calibration.cache").is_file()
    assert result.manifest["accuracy"]["inputs"].startswith("--calibration-data")
