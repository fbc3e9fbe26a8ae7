"""effective_config: Triton's normalization and backend auto-complete, replayed offline.

The expectations mirror Triton's own success fixtures
(server/qa/L0_model_config/autofill_noplatform_success/onnx/*/expected).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from helpers.build_models import model_at_lowest_ir
from tritonctl.repo_schema.autocomplete import effective_config, instance_plan

Shape = list  # ints, None or a symbolic name per dim; None for an unranked tensor


def make_onnx(path: Path, inputs: dict[str, tuple[int, Shape | None]],
              outputs: dict[str, tuple[int, Shape | None]]) -> Path:
    """An ONNX model whose outputs are Identity copies of the inputs (cycled)."""
    in_names, out_names = list(inputs), list(outputs)
    nodes = [helper.make_node("Identity", [in_names[i % len(in_names)]], [name])
             for i, name in enumerate(out_names)]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model_at_lowest_ir(graph), str(path))
    return path


def fixture_model(model_dir: Path, batch: bool = True, config: str | None = None) -> Path:
    """Triton's fixture model: INPUT0/INPUT1 INT32 [16] -> OUTPUT0/OUTPUT1 INT8 [16]."""
    shape = ["batch", 16] if batch else [16]
    make_onnx(model_dir / "1" / "model.onnx",
              {"INPUT0": (TensorProto.INT32, shape), "INPUT1": (TensorProto.INT32, shape)},
              {"OUTPUT0": (TensorProto.INT8, shape), "OUTPUT1": (TensorProto.INT8, shape)})
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config)
    return model_dir


def io_summary(entries) -> list[tuple[str, str, list[int]]]:
    from tritonctl.repo_schema.schema import data_type_name

    return [(e.name, data_type_name(e.data_type), list(e.dims)) for e in entries]


def codes(diagnostics) -> list[str]:
    return [d.code for d in diagnostics]


def test_empty_config_matches_triton_fixture_on_gpu(tmp_path):
    model_dir = fixture_model(tmp_path / "empty_config", config="")
    config, diagnostics = effective_config(model_dir, gpus=[0])
    assert config.name == "empty_config"
    assert (config.platform, config.backend) == ("onnxruntime_onnx", "onnxruntime")
    assert config.default_model_filename == "model.onnx"
    assert config.version_policy.latest.num_versions == 1
    assert config.max_batch_size == 4
    assert list(config.dynamic_batching.preferred_batch_size) == [4]
    assert io_summary(config.input) == [("INPUT0", "TYPE_INT32", [16]), ("INPUT1", "TYPE_INT32", [16])]
    assert io_summary(config.output) == [("OUTPUT0", "TYPE_INT8", [16]), ("OUTPUT1", "TYPE_INT8", [16])]
    [group] = config.instance_group
    assert (group.name, group.count, list(group.gpus), group.kind) == ("empty_config", 1, [0], 1)  # KIND_GPU
    assert config.optimization.input_pinned_memory.enable and config.optimization.output_pinned_memory.enable
    assert codes(diagnostics) == ["AC50"]


def test_without_gpu_onnx_gets_two_cpu_instances(tmp_path):
    config, _ = effective_config(fixture_model(tmp_path / "cpu_instance"))
    [group] = config.instance_group
    assert (group.name, group.count, list(group.gpus)) == ("cpu_instance", 2, [])
    assert group.kind == 2  # KIND_CPU
    assert [i.name for i in instance_plan(config)] == ["cpu_instance_0", "cpu_instance_1"]
    assert {i.host_policy for i in instance_plan(config)} == {"cpu"}


def test_unnamed_group_is_named_by_index_and_fixed_batch_model_keeps_zero(tmp_path):
    model_dir = fixture_model(tmp_path / "no_config_no_batch", batch=False,
                              config="instance_group [ { kind: KIND_CPU } ]\n")
    config, diagnostics = effective_config(model_dir)
    assert config.max_batch_size == 0
    assert not config.HasField("dynamic_batching")
    assert io_summary(config.input)[0] == ("INPUT0", "TYPE_INT32", [16])
    assert [(g.name, g.count) for g in config.instance_group] == [("no_config_no_batch_0", 2)]
    assert diagnostics == []


def test_explicit_max_batch_size_is_kept_and_no_batcher_added_for_one(tmp_path):
    config, diagnostics = effective_config(fixture_model(tmp_path / "m", config="max_batch_size: 8\n"))
    assert config.max_batch_size == 8
    assert list(config.dynamic_batching.preferred_batch_size) == [8]
    assert diagnostics == []
    config, _ = effective_config(fixture_model(tmp_path / "one", config="max_batch_size: 1\n"))
    assert not config.HasField("dynamic_batching")


def test_non_batching_model_with_max_batch_size_is_an_error(tmp_path):
    config, diagnostics = effective_config(fixture_model(tmp_path / "m", batch=False, config="max_batch_size: 4\n"))
    [diag] = diagnostics
    assert diag.code == "AC01" and diag.severity.value == "error"
    assert "model does not support batching while non-zero max_batch_size is specified" in diag.message
    assert "'INPUT0' has shape [16]" in diag.message
    assert not config.input  # Triton fails the load; nothing is filled in


def test_only_the_missing_side_is_filled(tmp_path):
    written = 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
    config, _ = effective_config(fixture_model(tmp_path / "m", config=written))
    assert io_summary(config.input) == [("INPUT0", "TYPE_INT32", [16])]  # never merged with the model's
    assert [o.name for o in config.output] == ["OUTPUT0", "OUTPUT1"]


def test_complete_config_is_left_alone(tmp_path):
    written = ('input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
               'output [ { name: "OUTPUT0" data_type: TYPE_INT8 dims: [ 16 ] } ]\n')
    config, diagnostics = effective_config(fixture_model(tmp_path / "m", config=written))
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert diagnostics == []


def test_scalar_tensors_get_dims_one_and_reshape_when_batching(tmp_path):
    make_onnx(tmp_path / "batched" / "1" / "model.onnx",
              {"x": (TensorProto.FLOAT, ["n"])}, {"y": (TensorProto.FLOAT, ["n"])})
    config, _ = effective_config(tmp_path / "batched")
    assert list(config.input[0].dims) == [1]
    assert config.input[0].HasField("reshape") and list(config.input[0].reshape.shape) == []
    make_onnx(tmp_path / "scalar" / "1" / "model.onnx",
              {"x": (TensorProto.FLOAT, [])}, {"y": (TensorProto.FLOAT, [])})
    config, _ = effective_config(tmp_path / "scalar")
    assert config.max_batch_size == 0
    assert list(config.input[0].dims) == [1] and not config.input[0].HasField("reshape")


def test_string_fp16_and_symbolic_inner_dims(tmp_path):
    make_onnx(tmp_path / "m" / "1" / "model.onnx",
              {"text": (TensorProto.STRING, ["b", "len"]), "half": (TensorProto.FLOAT16, ["b", 3, "h", "w"])},
              {"out": (TensorProto.FLOAT16, ["b", 3, "h", "w"])})
    config, _ = effective_config(tmp_path / "m")
    assert io_summary(config.input) == [("text", "TYPE_STRING", [-1]), ("half", "TYPE_FP16", [3, -1, -1])]


def test_default_max_batch_size_can_be_changed_or_disabled(tmp_path):
    model_dir = fixture_model(tmp_path / "m")
    config, _ = effective_config(model_dir, default_max_batch_size=16)
    assert config.max_batch_size == 16
    config, diagnostics = effective_config(model_dir, default_max_batch_size=0)
    assert config.max_batch_size == 0 and list(config.input[0].dims) == [-1, 16] and diagnostics == []


def test_missing_model_file_is_reported(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    config, diagnostics = effective_config(tmp_path / "m")
    assert codes(diagnostics) == ["AC02"] and "cannot read" in diagnostics[0].message


def test_kind_gpu_without_gpus_is_an_error(tmp_path):
    model_dir = fixture_model(tmp_path / "m", config="instance_group [ { kind: KIND_GPU count: 2 } ]\n")
    _, diagnostics = effective_config(model_dir)
    assert "AC03" in codes(diagnostics)
    config, diagnostics = effective_config(model_dir, gpus=[0, 1])
    assert [(i.name, i.device_id, i.host_policy) for i in instance_plan(config)] == [
        ("m_0_0", 0, "gpu_0"), ("m_0_1", 0, "gpu_0"), ("m_0_2", 1, "gpu_1"), ("m_0_3", 1, "gpu_1")]


def test_python_and_ensemble_models(tmp_path):
    (tmp_path / "py" / "1").mkdir(parents=True)
    (tmp_path / "py" / "1" / "model.py").write_text("")
    config, _ = effective_config(tmp_path / "py")
    assert config.backend == "python" and [(g.kind, g.count) for g in config.instance_group] == [(2, 1)]
    config, _ = effective_config(tmp_path / "py", gpus=[0])
    assert [(g.kind, list(g.gpus)) for g in config.instance_group] == [(1, [0])]
    (tmp_path / "ens" / "1").mkdir(parents=True)
    (tmp_path / "ens" / "config.pbtxt").write_text(
        'platform: "ensemble"\nensemble_scheduling { step [ { model_name: "py" model_version: -1 } ] }\n')
    config, _ = effective_config(tmp_path / "ens")
    assert not config.instance_group and not config.HasField("optimization")


def test_unparsable_config_returns_no_config(tmp_path):
    model_dir = fixture_model(tmp_path / "m", config="max_batch_size: [\n")
    config, diagnostics = effective_config(model_dir)
    assert config is None and any(d.severity.value == "error" for d in diagnostics)


def test_config_name_selects_custom_config(tmp_path):
    model_dir = fixture_model(tmp_path / "m")
    (model_dir / "configs").mkdir()
    (model_dir / "configs" / "big.pbtxt").write_text("max_batch_size: 32\n")
    assert effective_config(model_dir, "big")[0].max_batch_size == 32
    assert effective_config(model_dir)[0].max_batch_size == 4


def test_validate_reports_autofill_batching_failure_at_max_batch_size(tmp_path):
    from tritonctl.repo_schema.validate import validate_paths

    model_dir = fixture_model(tmp_path / "m", batch=False, config='backend: "onnxruntime"\nmax_batch_size: 8\n')
    report = validate_paths([model_dir])
    [diag] = [d for d in report.diagnostics if d.code == "AC01"]
    assert (diag.span.line, diag.span.col) == (2, 17)
    assert "'INPUT0' has the fixed first dimension 16" in diag.message
    clean = fixture_model(tmp_path / "ok", config='backend: "onnxruntime"\nmax_batch_size: 8\n')
    assert not [d for d in validate_paths([clean]).diagnostics if d.code == "AC01"]


def test_tensorrt_without_the_package_is_left_alone_with_a_note(tmp_path):
    from tritonctl.repo_schema.modelfiles.tensorrt import unavailable_reason

    if unavailable_reason() is None:
        pytest.skip("tensorrt can read plans on this machine")
    (tmp_path / "trt" / "1").mkdir(parents=True)
    (tmp_path / "trt" / "1" / "model.plan").write_bytes(b"not an engine")
    config, diagnostics = effective_config(tmp_path / "trt", gpus=[0])
    assert config.backend == "tensorrt" and not config.input and config.max_batch_size == 0
    assert codes(diagnostics) == ["AC51"] and diagnostics[0].severity.value == "info"
    config, diagnostics = effective_config(tmp_path / "trt")  # no GPU: Triton skips auto-complete
    assert diagnostics == [] and config.instance_group[0].kind == 2
