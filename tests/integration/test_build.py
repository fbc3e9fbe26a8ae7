"""tritonctl build on ONNX sources, through the real command line: repository entries,
the dynamic-batch rewrite, accuracy failures, the cache, and the plan pre-flight."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

from helpers.build_models import dynamic_add_sub, fixed_batch_concat, fixed_batch_reshape, log_model, sequence_model

from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import Reporter, build
from tritonctl.convert.spec import parse_shape
from tritonctl.repo_schema.validate import validate_paths

ort = pytest.importorskip("onnxruntime")


def tritonctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tritonctl", *args], capture_output=True, text=True, timeout=300)


def test_fixed_batch_onnx_becomes_a_batching_entry(tmp_path):
    source = fixed_batch_reshape(tmp_path / "fixed.onnx")
    repo = tmp_path / "repo"
    done = tritonctl("build", str(source), "--repo", str(repo), "--name", "fixed", "--max-batch-size", "16")
    assert done.returncode == 0, done.stderr
    for text in ("Reshape 'flatten': target [1, 12] -> [-1, 12]", "verified row by row", "max abs error",
                 "tritonctl validate", "no errors"):
        assert text in done.stderr
    model = repo / "fixed" / "1" / "model.onnx"
    config = (repo / "fixed" / "config.pbtxt").read_text()
    assert "max_batch_size: 16" in config and "dims: [ 3, 4 ]" in config and "dynamic_batching { }" in config
    assert validate_paths([repo]).errors == 0
    x = np.random.default_rng(3).standard_normal((16, 3, 4)).astype(np.float32)
    batched = ort.InferenceSession(str(model)).run(None, {"x": x})[0]
    original = ort.InferenceSession(str(source))
    rows = np.concatenate([original.run(None, {"x": x[i:i + 1]})[0] for i in range(16)])
    np.testing.assert_allclose(batched, rows, rtol=1e-5, atol=1e-5)
    manifest = json.loads((repo / "fixed" / "1" / "build.json").read_text())
    assert manifest["source"]["kind"] == "onnx" and manifest["max_batch_size"] == 16
    assert manifest["preparation"]["folded_nodes"] == 1 and len(manifest["preparation"]["batch_rewrite"]) == 3
    assert manifest["accuracy"]["passed"] and manifest["accuracy"]["outputs"][0]["name"] == "y"
    assert manifest["versions"]["onnxruntime"] == ort.__version__
    assert manifest["model"]["sha256"] and manifest["gpu"] is None
    assert set(manifest["stages_s"]) == {"load source", "prepare ONNX", "check accuracy"}


def test_unrewritable_fixed_batch_stops_before_writing(tmp_path):
    source = fixed_batch_concat(tmp_path / "concat.onnx")
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "concat")
    assert done.returncode == 1
    assert "making the batch dynamic did not preserve its results" in done.stderr
    assert not (tmp_path / "repo").exists()
    kept = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "concat",
                     "--max-batch-size", "0")
    assert kept.returncode == 0, kept.stderr
    assert "max_batch_size" not in (tmp_path / "repo" / "concat" / "config.pbtxt").read_text()


def test_nan_outputs_fail_the_check_unless_no_check(tmp_path):
    source = log_model(tmp_path / "log.onnx")
    failed = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "log")
    assert failed.returncode == 1
    assert "accuracy check failed for output(s) 'y'" in failed.stderr and "NaN/Inf" in failed.stderr
    # Tolerances cannot help when the source itself gives NaN: the advice is about its inputs.
    assert "Loosen" not in failed.stderr and "--calibration-data" in failed.stderr
    assert not (tmp_path / "repo" / "log").exists()
    real = tmp_path / "positive.npz"
    np.savez(real, x=np.linspace(0.5, 4.0, 16, dtype=np.float32).reshape(4, 4))
    checked = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "log",
                        "--calibration-data", str(real))
    assert checked.returncode == 0, checked.stderr
    shutil.rmtree(tmp_path / "repo" / "log")
    skipped = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "log", "--no-check")
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads((tmp_path / "repo" / "log" / "1" / "build.json").read_text())["accuracy"] == {"skipped": True}


def test_rerun_reuses_and_changed_options_rebuild(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    options = dict(source=str(source), repo=tmp_path / "repo", name="add_sub")
    first = build(BuildOptions(**options))
    model_mtime = first.model_path.stat().st_mtime_ns
    reporter = Reporter()
    again = build(BuildOptions(**options), reporter)
    assert again.reused and reporter.stages == ["load source"] and "up to date" in reporter.notes[0]
    assert again.model_path.stat().st_mtime_ns == model_mtime
    changed = build(BuildOptions(**options, max_batch_size=4, instances=2))
    assert not changed.reused and "max_batch_size: 4" in changed.config_path.read_text()
    assert not list((tmp_path / "repo" / "add_sub").rglob("*.bak"))  # its own earlier output is replaced
    changed.config_path.write_text(changed.config_path.read_text() + "# edited by hand\n")
    with pytest.raises(Exception, match="not written by this tool's last build; pass --force"):
        build(BuildOptions(**options, max_batch_size=2))
    forced = build(BuildOptions(**options, max_batch_size=2, force=True))
    assert (forced.model_dir / "config.pbtxt.bak").is_file()


def test_dynamic_dims_use_the_shape_opt_for_check_inputs(tmp_path):
    source = sequence_model(tmp_path / "seq.onnx")
    result = build(BuildOptions(str(source), tmp_path / "repo", "seq", shapes=[parse_shape("x:4,32,64")]))
    assert result.manifest["accuracy"]["outputs"][0]["elements"] == 1 * 32 + 8 * 32


def test_plan_without_tensorrt_fails_before_any_work(tmp_path):
    from tritonctl.convert.tensorrt_build import plan_unavailable

    if plan_unavailable() is None:
        pytest.skip("this machine can build plans")
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "m", "--format", "plan")
    assert done.returncode == 1
    assert "pip install 'tritonctl[tensorrt]'" in done.stderr and "--format plan needs" in done.stderr
    assert "load source" not in done.stderr and not (tmp_path / "repo").exists()


def test_usage_errors(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    bad_shape = tritonctl("build", str(source), "--repo", str(tmp_path), "--name", "m", "--shape", "INPUT0:4,2,8")
    assert bad_shape.returncode == 2 and "MIN <= OPT <= MAX" in bad_shape.stderr
    fp16 = tritonctl("build", str(source), "--repo", str(tmp_path), "--name", "m", "--precision", "fp16")
    assert fp16.returncode == 1 and "add --format plan" in fp16.stderr
    torch_flags = tritonctl("build", str(source), "--repo", str(tmp_path), "--name", "m", "--input", "x:fp32:4")
    assert torch_flags.returncode == 1 and "describe PyTorch sources" in torch_flags.stderr
    assert onnx.load(str(source))  # the source is never modified


def test_onnx_sequence_values_are_not_folded_into_initializers(tmp_path):
    # SequenceEmpty has no inputs, so it looks constant; its value is a list no initializer holds.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("SequenceEmpty", [], ["empty"], dtype=onnx.TensorProto.FLOAT),
         onnx.helper.make_node("SequenceInsert", ["empty", "x"], ["seq"]),
         onnx.helper.make_node("SequenceAt", ["seq", "zero"], ["y"])], "seq_ops",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])],
        [onnx.numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")])
    source = tmp_path / "seq.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=7), source)
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "seq")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "repo" / "seq" / "1" / "model.onnx").is_file()


def test_a_model_failing_on_generated_inputs_says_what_to_pass(tmp_path):
    # Expand takes its target shape as an input: random integers are no valid shape.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Expand", ["x", "shape"], ["y"])], "expand",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 1]),
         onnx.helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["a", "b", "c"])])
    source = tmp_path / "expand.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=7), source)
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "expand")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the source model fails on the accuracy check's inputs (random: ")
    assert "invalid expand shape" in last and "--calibration-data" in last and "--no-check" in last
    assert "Traceback" not in done.stderr and "[E:onnxruntime" not in done.stderr
    assert not (tmp_path / "repo" / "expand").exists()


def test_an_opset_onnxruntime_no_longer_runs_is_upgraded(tmp_path):
    # Opset 6's Add (with its broadcast attribute) has no onnxruntime kernel any more.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "b"], ["y"], broadcast=1)], "old_add",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
         onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.numpy_helper.from_array(np.arange(3, dtype=np.float32), "b")])
    source = tmp_path / "old.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 6)], ir_version=3), source)
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "old")
    assert done.returncode == 0, done.stderr
    assert "opset: 6 -> 13 (onnxruntime runs opset 7 and newer)" in done.stderr
    built = onnx.load(str(tmp_path / "repo" / "old" / "1" / "model.onnx"))
    assert [o.version for o in built.opset_import if o.domain in ("", "ai.onnx")] == [13]
    x = np.ones((2, 3), dtype=np.float32)
    out = ort.InferenceSession(built.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(out[0], x + np.arange(3, dtype=np.float32))


def test_an_upgraded_ir3_model_lists_the_initializers_the_converter_adds(tmp_path):
    # Pad's pads become an initializer input from opset 11; IR version 3 lists initializers as inputs.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 1], mode="constant", value=0.0)], "old_pad",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 5])])
    source = tmp_path / "pad.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 6)], ir_version=3), source)
    done = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "pad")
    assert done.returncode == 0, done.stderr
    built = onnx.load(str(tmp_path / "repo" / "pad" / "1" / "model.onnx"))
    assert built.ir_version == 3
    x = np.ones((2, 3), dtype=np.float32)
    out = ort.InferenceSession(built.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(out[0], np.pad(x, ((0, 0), (1, 1))))


def test_files_it_did_not_write_in_the_version_directory_need_force(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    version_dir = tmp_path / "repo" / "m" / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "notes.txt").write_text("kept by hand\n")
    refused = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "m")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "holds notes.txt, which this build did not write" in refused.stderr and "--force" in refused.stderr
    assert sorted(p.name for p in version_dir.iterdir()) == ["notes.txt"]
    assert not (tmp_path / "repo" / "m" / "config.pbtxt").exists()
    forced = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "m", "--force")
    assert forced.returncode == 0, forced.stderr
    assert sorted(p.name for p in version_dir.iterdir()) == ["build.json", "model.onnx", "notes.txt"]


def test_a_repository_path_through_a_file_is_refused_before_any_work(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    (tmp_path / "taken").write_text("a file\n")
    for repo in (tmp_path / "taken", tmp_path / "taken" / "repo"):
        done = tritonctl("build", str(source), "--repo", str(repo), "--name", "m")
        assert done.returncode == 1 and "Traceback" not in done.stderr and "NotADirectoryError" not in done.stderr
        assert "is a file" in done.stderr and "prepare ONNX" not in done.stderr


def test_truncated_onnx_and_unknown_shape_names_are_one_line_errors(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(source.read_bytes()[:40])
    cut = tritonctl("build", str(truncated), "--repo", str(tmp_path / "repo"), "--name", "m")
    assert cut.returncode == 1 and "cut short or is not ONNX" in cut.stderr
    unknown = tritonctl("build", str(source), "--repo", str(tmp_path / "repo"), "--name", "m", "--shape", "nope:4")
    assert unknown.returncode == 1 and "--shape names 'nope', which the model does not take" in unknown.stderr
    assert not (tmp_path / "repo").exists()
