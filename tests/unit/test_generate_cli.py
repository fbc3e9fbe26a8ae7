"""`tritonctl generate` end to end through typer's CliRunner, on ONNX models built
with onnx.helper, checked with tritonctl's own validator."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from helpers.build_models import model_at_lowest_ir
from test_generate_autocomplete import make_onnx
from tritonctl.cli.app import create_app
from tritonctl.cli.errors import CliError
from tritonctl.repo_schema.schema import data_type_name, model_config_pb2
from tritonctl.repo_schema.validate import validate_paths

APP = create_app()


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(APP, list(args))
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def read_config(path: Path):
    config = model_config_pb2().ModelConfig()
    text_format.Parse(path.read_text(), config)
    return config


def io_summary(entries):
    return [(e.name, data_type_name(e.data_type), list(e.dims), e.HasField("reshape")) for e in entries]


def assert_validates_clean(model_dir: Path) -> None:
    report = validate_paths([model_dir])
    assert not report.diagnostics, [(d.code, d.location, d.message) for d in report.diagnostics]


def error_of(result) -> str:
    assert result.exit_code != 0
    assert isinstance(result.exception, CliError), result.exception
    return str(result.exception)


@pytest.fixture
def batched(tmp_path: Path) -> Path:
    return make_onnx(tmp_path / "resnet.onnx", {"images": (TensorProto.FLOAT, ["batch", 3, 8, 8])},
                     {"logits": (TensorProto.FLOAT, ["batch", 10])})


def test_batching_model_becomes_a_valid_repository_entry(tmp_path, batched):
    repo = tmp_path / "repo"
    result = run("generate", str(batched), "--repo", str(repo))
    model_dir = repo / "resnet"
    config = read_config(model_dir / "config.pbtxt")
    assert (config.name, config.backend, config.max_batch_size) == ("resnet", "onnxruntime", 4)
    assert io_summary(config.input) == [("images", "TYPE_FP32", [3, 8, 8], False)]
    assert io_summary(config.output) == [("logits", "TYPE_FP32", [10], False)]
    assert config.HasField("dynamic_batching") and not config.instance_group
    assert (model_dir / "1" / "model.onnx").read_bytes() == batched.read_bytes()
    assert "no errors" in result.stderr
    assert_validates_clean(model_dir)


def test_fixed_batch_of_one_gives_max_batch_size_zero_and_explains(tmp_path):
    model = make_onnx(tmp_path / "fixed.onnx", {"x": (TensorProto.FLOAT, [1, 3, 4])},
                      {"y": (TensorProto.FLOAT, [1, 3, 4])})
    result = run("generate", str(model), "--repo", str(tmp_path / "repo"))
    config = read_config(tmp_path / "repo" / "fixed" / "config.pbtxt")
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert io_summary(config.input) == [("x", "TYPE_FP32", [1, 3, 4], False)]
    assert "batch dimension is fixed to 1" in result.stderr and "dynamic_axes" in result.stderr
    assert_validates_clean(tmp_path / "repo" / "fixed")
    refused = run("generate", str(model), "--repo", str(tmp_path / "other"), "--max-batch-size", "8", ok=False)
    assert "does not support batching" in error_of(refused)


def test_per_item_scalars_get_a_reshape(tmp_path):
    model = make_onnx(tmp_path / "scalars.onnx", {"score": (TensorProto.FLOAT, ["n"])},
                      {"out": (TensorProto.FLOAT, ["n"])})
    run("generate", str(model), "--repo", str(tmp_path / "repo"))
    config = read_config(tmp_path / "repo" / "scalars" / "config.pbtxt")
    assert io_summary(config.input) == [("score", "TYPE_FP32", [1], True)]
    assert "reshape { shape: [ ] }" in (tmp_path / "repo" / "scalars" / "config.pbtxt").read_text()
    assert_validates_clean(tmp_path / "repo" / "scalars")


def test_true_scalars_cannot_batch(tmp_path):
    model = make_onnx(tmp_path / "scalar.onnx", {"a": (TensorProto.FLOAT, [])}, {"b": (TensorProto.FLOAT, [])})
    result = run("generate", str(model), "--repo", str(tmp_path / "repo"))
    config = read_config(tmp_path / "repo" / "scalar" / "config.pbtxt")
    assert config.max_batch_size == 0 and list(config.input[0].dims) == [1]
    assert "'a' is a scalar" in result.stderr
    assert_validates_clean(tmp_path / "repo" / "scalar")


def test_string_fp16_several_tensors_and_symbolic_inner_dims(tmp_path):
    model = make_onnx(tmp_path / "multi.onnx",
                      {"text": (TensorProto.STRING, ["b", 1]), "image": (TensorProto.FLOAT16, ["b", 3, "h", "w"])},
                      {"echo": (TensorProto.STRING, ["b", 1]), "pixels": (TensorProto.FLOAT16, ["b", 3, "h", "w"])})
    run("generate", str(model), "--repo", str(tmp_path / "repo"), "--name", "multi_io")
    config = read_config(tmp_path / "repo" / "multi_io" / "config.pbtxt")
    assert io_summary(config.input) == [("text", "TYPE_STRING", [1], False),
                                        ("image", "TYPE_FP16", [3, -1, -1], False)]
    assert io_summary(config.output) == [("echo", "TYPE_STRING", [1], False),
                                         ("pixels", "TYPE_FP16", [3, -1, -1], False)]
    assert_validates_clean(tmp_path / "repo" / "multi_io")


def test_batching_and_instance_options(tmp_path, batched):
    run("generate", str(batched), "--repo", str(tmp_path / "repo"), "--max-batch-size", "16",
        "--preferred-batch-size", "8", "--preferred-batch-size", "4", "--max-queue-delay-us", "500",
        "--instances", "3", "--kind", "cpu")
    config = read_config(tmp_path / "repo" / "resnet" / "config.pbtxt")
    assert config.max_batch_size == 16
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert [(g.kind, g.count) for g in config.instance_group] == [(2, 3)]  # KIND_CPU
    assert_validates_clean(tmp_path / "repo" / "resnet")


def test_no_dynamic_batching_and_bad_batcher_options(tmp_path, batched):
    run("generate", str(batched), "--repo", str(tmp_path / "repo"), "--no-dynamic-batching")
    assert not read_config(tmp_path / "repo" / "resnet" / "config.pbtxt").HasField("dynamic_batching")
    too_big = run("generate", str(batched), "--stdout", "--preferred-batch-size", "32", ok=False)
    assert "between 1 and max_batch_size (4)" in error_of(too_big)
    conflict = run("generate", str(batched), "--stdout", "--no-dynamic-batching", "--max-queue-delay-us", "9",
                   ok=False)
    assert "--no-dynamic-batching" in error_of(conflict)


def test_stdout_writes_nothing(tmp_path, batched, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("generate", str(batched), "--stdout", "--name", "printed")
    assert result.stdout.startswith("# Generated by tritonctl generate from resnet.onnx\nname: \"printed\"\n")
    assert not (tmp_path / "model_repository").exists()


def test_refuses_to_overwrite_without_force_and_keeps_a_backup_with_it(tmp_path, batched):
    model_dir = tmp_path / "repo" / "resnet"
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text("# hand-tuned\nmax_batch_size: 64\n")
    refused = run("generate", str(batched), "--repo", str(tmp_path / "repo"), ok=False)
    assert "already exists" in error_of(refused) and "--force" in error_of(refused)
    assert (model_dir / "config.pbtxt").read_text() == "# hand-tuned\nmax_batch_size: 64\n"
    assert not (model_dir / "1").exists()
    run("generate", str(batched), "--repo", str(tmp_path / "repo"), "--force")
    assert (model_dir / "config.pbtxt.bak").read_text() == "# hand-tuned\nmax_batch_size: 64\n"
    assert read_config(model_dir / "config.pbtxt").max_batch_size == 4
    assert_validates_clean(model_dir)


def test_existing_model_file_is_not_replaced_without_force(tmp_path, batched):
    target = tmp_path / "repo" / "resnet" / "1" / "model.onnx"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"someone else's model")
    refused = run("generate", str(batched), "--repo", str(tmp_path / "repo"), ok=False)
    assert str(target) in error_of(refused)
    assert target.read_bytes() == b"someone else's model"
    assert not (tmp_path / "repo" / "resnet" / "config.pbtxt").exists()


def test_in_place_generation_and_no_copy(tmp_path, batched):
    repo = tmp_path / "repo"
    placed = make_onnx(repo / "classifier" / "2" / "model.onnx", {"x": (TensorProto.FLOAT, ["n", 4])},
                       {"y": (TensorProto.FLOAT, ["n", 2])})
    run("generate", str(placed), "--repo", str(repo), "--version", "2")
    assert read_config(repo / "classifier" / "config.pbtxt").name == "classifier"
    assert_validates_clean(repo / "classifier")
    result = run("generate", str(batched), "--repo", str(repo), "--no-copy")
    assert not (repo / "resnet" / "1").exists()
    assert "put the model at" in result.stderr


def test_external_data_is_copied_next_to_the_graph(tmp_path):
    weights = numpy_helper.from_array(__import__("numpy").ones((4, 2), dtype="float32"), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])], [weights])
    model = model_at_lowest_ir(graph)
    source = tmp_path / "src" / "big.onnx"
    source.parent.mkdir()
    onnx.save(model, str(source), save_as_external_data=True, all_tensors_to_one_file=True,
              location="big.weights", size_threshold=0)
    run("generate", str(source), "--repo", str(tmp_path / "repo"))
    layout = tmp_path / "repo" / "big" / "1" / "model.onnx"
    assert layout.is_dir() and (layout / "model.onnx").is_file() and (layout / "big.weights").is_file()
    assert_validates_clean(tmp_path / "repo" / "big")


def test_unsupported_inputs_are_refused(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"")
    assert "ONNX models (.onnx)" in error_of(run("generate", str(tmp_path / "model.bin"), ok=False))
    (tmp_path / "engine.plan").write_bytes(b"")
    message = error_of(run("generate", str(tmp_path / "engine.plan"), "--stdout", ok=False))
    assert "tritonctl[tensorrt]" in message or "cannot be deserialized" in message
    (tmp_path / "broken.onnx").write_bytes(b"\xff\xff not protobuf")
    assert "not a valid ONNX model" in error_of(run("generate", str(tmp_path / "broken.onnx"), ok=False))


def test_effective_shows_what_triton_runs(tmp_path, batched):
    repo = tmp_path / "repo"
    run("generate", str(batched), "--repo", str(repo), "--no-dynamic-batching", "--max-batch-size", "2")
    (repo / "resnet" / "config.pbtxt").unlink()  # Triton auto-completes a model without a config
    result = run("generate", "--effective", str(repo / "resnet"), "--gpus", "0")
    assert 'name: "resnet"' in result.stdout and "max_batch_size: 4" in result.stdout
    assert "preferred_batch_size: [ 4 ]" in result.stdout and "count: 2" in result.stdout
    assert "AC50" in result.stderr  # max_batch_size auto-filled: a note, not an error
    as_json = json.loads(run("generate", "--effective", str(repo / "resnet"), "--gpus", "1",
                             "--format", "json").stdout)
    assert as_json["max_batch_size"] == 4 and as_json["batch_input"] == []
    assert as_json["version_policy"] == {"latest": {"num_versions": 1}}
    assert as_json["input"][0]["dims"] == [3, 8, 8] and as_json["input"][0]["data_type"] == "TYPE_FP32"
    assert as_json["instance_group"][0]["gpus"] == [0] and as_json["instance_group"][0]["kind"] == "KIND_GPU"
    assert list(as_json)[:4] == ["name", "platform", "backend", "runtime"]


def test_effective_exits_1_when_triton_would_refuse(tmp_path):
    model = make_onnx(tmp_path / "repo" / "fixed" / "1" / "model.onnx", {"x": (TensorProto.FLOAT, [1, 3])},
                      {"y": (TensorProto.FLOAT, [1, 3])})
    (model.parent.parent / "config.pbtxt").write_text("max_batch_size: 8\n")
    result = run("generate", "--effective", str(tmp_path / "repo" / "fixed"), "--gpus", "0", ok=False)
    assert result.exit_code == 1 and "error[AC01]" in result.stderr


def test_regenerating_with_the_same_model_file_only_needs_force_for_the_config(tmp_path, batched):
    repo = tmp_path / "repo"
    run("generate", str(batched), "--repo", str(repo))
    refused = run("generate", str(batched), "--repo", str(repo), "--max-batch-size", "8", ok=False)
    assert "model.onnx" not in error_of(refused)  # the identical model file is no clash
    run("generate", str(batched), "--repo", str(repo), "--max-batch-size", "8", "--force")
    assert read_config(repo / "resnet" / "config.pbtxt").max_batch_size == 8
    assert sorted(p.name for p in (repo / "resnet").iterdir()) == ["1", "config.pbtxt", "config.pbtxt.bak"]
    assert sorted(p.name for p in (repo / "resnet" / "1").iterdir()) == ["model.onnx"]


@pytest.mark.parametrize("shapes", [
    {"x": ["n", 3, "h"], "y": ["n", 3, "h"]},  # batching, symbolic inner dim
    {"x": [1, 5], "y": [1, 5]},  # fixed batch of 1
    {"x": ["n"], "y": ["n"]},  # per-item scalars (reshape)
])
def test_onnxruntime_accepts_tensors_shaped_as_the_config_says(tmp_path, shapes):
    """Requests built from the generated config run in the real onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    model = make_onnx(tmp_path / "m.onnx", {"x": (TensorProto.FLOAT, shapes["x"])},
                      {"y": (TensorProto.FLOAT, shapes["y"])})
    run("generate", str(model), "--repo", str(tmp_path / "repo"))
    config = read_config(tmp_path / "repo" / "m" / "config.pbtxt")
    session = ort.InferenceSession(str(tmp_path / "repo" / "m" / "1" / "model.onnx"))
    for entry in config.input:
        item = list(entry.reshape.shape) if entry.HasField("reshape") else list(entry.dims)
        shape = ([3] if config.max_batch_size else []) + [2 if d == -1 else d for d in item]
        [result] = session.run(None, {entry.name: np.ones(shape, dtype=np.float32)})
        out = config.output[0]
        expected = list(out.reshape.shape) if out.HasField("reshape") else list(out.dims)
        batch = [3] if config.max_batch_size else []
        assert list(result.shape) == batch + [2 if d == -1 else d for d in expected]


def test_torchscript_is_refused_naming_build(tmp_path):
    torch = pytest.importorskip("torch")
    model = tmp_path / "model.pt"
    torch.jit.script(torch.nn.ReLU()).save(str(model))
    result = run("generate", str(model), "--stdout", ok=False)
    assert "model.pt is TorchScript, which does not record its tensors' types and shapes" in error_of(result)
    assert f"tritonctl build {model} --format torchscript --input NAME:DTYPE:DIMS" in error_of(result)
