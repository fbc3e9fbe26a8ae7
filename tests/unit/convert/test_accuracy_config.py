"""The output comparison, calibration data, plan configs and the build cache key."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tritonctl.convert import accuracy, calibration, manifest
from tritonctl.convert.entry import build_config
from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions
from tritonctl.repo_schema.modelfiles import ModelIO, TensorInfo


def test_an_element_fails_only_outside_both_tolerances():
    reference = np.array([1.0, 100.0, 0.0], dtype=np.float32)
    # abs 0.5 but rel 0.005 at 100: passes with rtol 0.01; abs 0.5 at 1.0 fails both
    check = accuracy.compare_output("y", reference, reference + [0.5, 0.5, 0.0], atol=0.1, rtol=0.01)
    assert check.mismatched == 1 and not check.passed
    assert check.max_abs == pytest.approx(0.5) and check.max_rel == pytest.approx(0.5)
    assert accuracy.compare_output("y", reference, reference + 1e-6, atol=1e-5, rtol=1e-5).passed


def test_nan_and_inf_always_fail_even_when_both_sides_agree():
    values = np.array([1.0, np.nan, np.inf], dtype=np.float32)
    check = accuracy.compare_output("y", values, values.copy(), atol=1e9, rtol=1e9)
    assert not check.passed and check.problem == "2 NaN/Inf value(s) in the source"
    assert math.isnan(check.max_abs)


def test_shape_and_output_count_mismatches_fail():
    assert "shape [2]" in accuracy.compare_output("y", np.zeros(3), np.zeros(2), 1, 1).problem
    checks = accuracy.compare(["a", "b"], [np.zeros(1)], [np.zeros(1), np.zeros(1)], 1, 1)
    assert all("1 output(s), the result 2" in c.problem for c in checks)


def test_report_keeps_the_worst_error_over_batches():
    batches = [{"x": np.zeros(2, np.float32)}, {"x": np.ones(2, np.float32)}]
    report = accuracy.check_accuracy(["y"], lambda a: [a["x"]], lambda a: [a["x"] * 1.5], batches,
                                     atol=0.1, rtol=0.1, inputs="test")
    assert not report.passed and report.outputs[0].max_abs == pytest.approx(0.5)
    assert report.outputs[0].mismatched == 2 and report.outputs[0].total == 4
    assert accuracy.table(report) == [("y", "0.5", "0.5", "2/4", "FAIL")]


def test_random_inputs_per_dtype():
    specs = [accuracy.TensorSpec("f", "float32", (2, 3)), accuracy.TensorSpec("i", "int64", (4,)),
             accuracy.TensorSpec("b", "bool", (3,))]
    arrays = accuracy.random_inputs(specs, seed=0)
    assert arrays["f"].dtype == np.float32 and arrays["f"].min() >= -1 and arrays["f"].max() < 1
    assert set(np.unique(arrays["i"])) <= {0, 1} and arrays["b"].dtype == bool
    assert np.array_equal(accuracy.random_inputs(specs, seed=0)["f"], arrays["f"])


def test_calibration_batches_split_by_max_batch(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.arange(10, dtype=np.float64).reshape(5, 2))
    batches = calibration.load_batches(tmp_path, ["x"], max_batch=2, dtypes={"x": "float32"})
    assert [len(b["x"]) for b in batches] == [2, 2, 1] and batches[0]["x"].dtype == np.float32
    with pytest.raises(BuildError, match="no array for input"):
        calibration.load_batches(tmp_path / "a.npz", ["x", "mask"], 2, {})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BuildError, match="holds no .npz files"):
        calibration.calibration_files(empty)
    assert calibration.digest(tmp_path) == calibration.digest(tmp_path / "a.npz")


PLAN_IO = ModelIO(inputs=[TensorInfo("ids", "TYPE_INT32", (-1, -1))],
                  outputs=[TensorInfo("logits", "TYPE_FP32", (-1, 2))])


def _written_config(tmp_path: Path, options: BuildOptions, io: ModelIO, max_batch: int) -> Path:
    config = build_config(options, io, max_batch)
    model_dir = tmp_path / options.name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config.text())
    (model_dir / "1" / config.filename).write_bytes(b"engine bytes")
    return model_dir


def test_plan_config_runs_on_gpus_with_the_profile_batch(tmp_path, monkeypatch):
    from tritonctl.repo_schema.validate import validate_paths

    options = BuildOptions("bert.onnx", tmp_path, "bert", format="plan", instances=2, max_queue_delay_us=100)
    model_dir = _written_config(tmp_path, options, PLAN_IO, 16)
    text = (model_dir / "config.pbtxt").read_text()
    assert text.startswith("# Built by tritonctl build from bert.onnx\n")
    for line in ('backend: "tensorrt"', "max_batch_size: 16", "kind: KIND_GPU", "count: 2",
                 "max_queue_delay_microseconds: 100", "dims: [ -1 ]"):
        assert line in text
    monkeypatch.setenv("TRITONCTL_ASSUME_GPUS", "1")
    report = validate_paths([model_dir])
    assert report.errors == 0, [d.message for d in report.diagnostics]


def test_onnx_config_leaves_the_kind_to_triton(tmp_path):
    options = BuildOptions("m.onnx", tmp_path, "m", dynamic_batching=False)
    text = build_config(options, PLAN_IO, 4).text()
    assert 'backend: "onnxruntime"' in text and "instance_group" not in text and "dynamic_batching" not in text


def test_config_errors_become_build_errors(tmp_path):
    options = BuildOptions("m.onnx", tmp_path, "m", preferred_batch_sizes=[32])
    with pytest.raises(BuildError, match="--preferred-batch-size 32 must be between 1 and max_batch_size"):
        build_config(options, PLAN_IO, 8)


def test_cache_key_changes_with_source_options_and_versions():
    versions = manifest.tool_versions()
    base = manifest.cache_key("abc", {"max_batch_size": 8}, versions)
    assert base == manifest.cache_key("abc", {"max_batch_size": 8}, dict(versions))
    assert base != manifest.cache_key("abd", {"max_batch_size": 8}, versions)
    assert base != manifest.cache_key("abc", {"max_batch_size": 4}, versions)
    assert base != manifest.cache_key("abc", {"max_batch_size": 8}, {**versions, "onnx": "0.0"})
    assert versions["onnx"] and "tensorrt" in versions


def test_bfloat16_inputs_and_outputs_run_on_float32_arrays():
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["wide"], to=TensorProto.FLOAT),
                               helper.make_node("Add", ["wide", "wide"], ["sum"]),
                               helper.make_node("Cast", ["sum"], ["y"], to=TensorProto.BFLOAT16)], "bf16",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.array([[0.5, -1.0, 2.0]], np.float32)
    (y,) = accuracy.onnx_runner(model)({"x": x})
    assert y.dtype == np.float32 and np.array_equal(y, x * 2)


def test_random_check_inputs_of_a_model_without_batch_are_described_as_such():
    assert accuracy.describe_random([]).endswith("the model's own shapes, no batch")
    assert accuracy.describe_random([1, 8]).endswith("batch sizes 1, 8")
