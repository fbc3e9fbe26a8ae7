"""--shape/--input parsing, optimization profiles, precision flags and option checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions, source_kind
from tritonctl.convert.profiles import ProfileShape, batch_range, check_shapes, compute_profile, default_opt_batch
from tritonctl.convert.spec import InputSpec, ShapeSpec, SpecError, parse_input, parse_shape
from tritonctl.convert.tensorrt_build import plan_unavailable, precision_flags
from tritonctl.repo_schema.modelfiles import TensorInfo


def test_parse_shape_three_shapes_and_one():
    assert parse_shape("image:3x224x224,3x512x512,3x1024x1024") == ShapeSpec(
        "image", (3, 224, 224), (3, 512, 512), (3, 1024, 1024))
    assert parse_shape("ids:128") == ShapeSpec("ids", (128,), (128,), (128,))


@pytest.mark.parametrize("text, message", [
    ("ids", "NAME:MIN,OPT,MAX"),
    ("ids:1,2", "one shape or three"),
    ("ids:4,2,8", "MIN <= OPT <= MAX"),
    ("ids:1,2x2,3", "same number of dimensions"),
    ("ids:0,1,2", "positive integer"),
])
def test_parse_shape_errors_say_what_is_expected(text, message):
    with pytest.raises(SpecError, match=message):
        parse_shape(text)


def test_parse_input_dtype_aliases_and_dynamic_dims():
    assert parse_input("input_ids:int64:seq") == InputSpec("input_ids", "int64", (-1,))
    assert parse_input("image:fp32:3x-1x224") == InputSpec("image", "float32", (3, -1, 224))
    assert parse_input("flag:bool:") == InputSpec("flag", "bool", ())
    with pytest.raises(SpecError, match="unknown dtype 'complex'"):
        parse_input("x:complex:4")
    with pytest.raises(SpecError, match="NAME:DTYPE:DIMS"):
        parse_input("x:4")


@pytest.mark.parametrize("max_batch, opt", [(1, 1), (2, 2), (8, 8), (16, 16), (32, 16), (64, 32), (128, 64)])
def test_default_opt_batch_follows_model_navigator(max_batch, opt):
    assert default_opt_batch(max_batch) == opt


def test_batch_range_rejects_opt_above_max():
    assert batch_range(16, 4) == (1, 4, 16)
    with pytest.raises(BuildError, match="between 1 and --max-batch-size"):
        batch_range(8, 9)


def test_profile_adds_batch_range_and_shape_ranges():
    inputs = [TensorInfo("ids", "TYPE_INT64", (-1, -1)), TensorInfo("image", "TYPE_FP32", (-1, 3, 8))]
    profile = compute_profile(inputs, 32, None, [parse_shape("ids:1,128,512")])
    assert profile == {"ids": ProfileShape((1, 1), (16, 128), (32, 512)),
                       "image": ProfileShape((1, 3, 8), (16, 3, 8), (32, 3, 8))}


def test_profile_without_batching_takes_full_shapes():
    inputs = [TensorInfo("x", "TYPE_FP32", (1, -1))]
    assert compute_profile(inputs, 0, None, [parse_shape("x:1x4,1x8,1x16")]) == {
        "x": ProfileShape((1, 4), (1, 8), (1, 16))}


def test_profile_errors_name_the_input_and_the_fix():
    inputs = [TensorInfo("ids", "TYPE_INT64", (-1, -1))]
    with pytest.raises(BuildError, match=r"input 'ids' has a dynamic dimension 1 .*--shape ids:MIN,OPT,MAX"):
        compute_profile(inputs, 8, None, [])
    with pytest.raises(BuildError, match="'mask', which the model does not take"):
        compute_profile(inputs, 8, None, [parse_shape("ids:4"), parse_shape("mask:4")])
    with pytest.raises(BuildError, match="gives 2 dimension"):
        compute_profile(inputs, 8, None, [parse_shape("ids:4x4")])
    fixed = [TensorInfo("image", "TYPE_FP32", (-1, 3))]
    with pytest.raises(BuildError, match="fixed to 3"):
        compute_profile(fixed, 8, None, [parse_shape("image:1,2,3")])


def test_check_shapes_use_opt_then_a_default():
    inputs = [TensorInfo("ids", "TYPE_INT64", (-1, -1)), TensorInfo("x", "TYPE_FP32", (-1, -1, 3))]
    assert check_shapes(inputs, 4, [parse_shape("ids:1,64,128")]) == {"ids": (4, 64), "x": (4, 8, 3)}


@pytest.mark.parametrize("precision, flags", [
    ("fp32", {}), ("fp16", {"fp16": True}), ("bf16", {"bf16": True}), ("int8", {"int8": True, "fp16": True})])
def test_precision_flags(precision, flags):
    assert precision_flags(precision, explicit_quantization=False, has_calibration=True) == flags


def test_int8_needs_calibration_or_qdq_and_fp8_needs_qdq():
    with pytest.raises(BuildError, match="--calibration-data"):
        precision_flags("int8", explicit_quantization=False, has_calibration=False)
    assert precision_flags("int8", explicit_quantization=True, has_calibration=False)["int8"]
    with pytest.raises(BuildError, match="QuantizeLinear/DequantizeLinear"):
        precision_flags("fp8", explicit_quantization=False, has_calibration=True)
    assert precision_flags("fp8", explicit_quantization=True, has_calibration=False) == {"fp8": True, "fp16": True}


def test_plan_unavailable_names_what_is_missing_and_the_extra():
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        message = plan_unavailable()
        assert "the 'tensorrt' Python package" in message
        assert "pip install 'tritonctl[tensorrt]'" in message
        assert "--format onnx" in message


def _options(**kwargs) -> BuildOptions:
    return BuildOptions(**{"source": "m.onnx", "repo": Path("repo"), "name": "m", **kwargs})


@pytest.mark.parametrize("kwargs, message", [
    ({"format": "tflite"}, "--format must be one of"),
    ({"name": "a/b"}, "plain directory name"),
    ({"version": 0}, "--version must be 1 or more"),
    ({"precision": "fp16"}, "configure the TensorRT build; add --format plan"),
    ({"timing_cache": Path("t.cache")}, "--timing-cache configure"),
    ({"max_batch_size": 0, "opt_batch_size": 2}, "--opt-batch-size needs a batching model"),
    ({"atol": -1.0}, "--atol must be 0 or more"),
])
def test_option_errors(kwargs, message):
    with pytest.raises(BuildError, match=message):
        _options(**kwargs).validate()


def test_tolerances_default_per_precision():
    assert _options().tolerances == (1e-4, 1e-4)
    assert _options(format="plan", precision="fp16").tolerances == (1e-2, 1e-2)
    assert _options(format="plan", precision="fp16", atol=0.5).tolerances == (0.5, 1e-2)


def test_key_options_leave_out_where_things_live(tmp_path):
    a = _options(timing_cache=tmp_path / "a.cache", format="plan").key_options()
    b = _options(timing_cache=tmp_path / "b.cache", format="plan").key_options()
    assert a == b
    assert _options(max_batch_size=4).key_options() != _options(max_batch_size=8).key_options()


def test_source_kind(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"")
    (tmp_path / "m.pt2").write_bytes(b"")
    assert source_kind(str(tmp_path / "m.onnx")) == "onnx"
    assert source_kind(str(tmp_path / "m.pt2")) == "exported"
    assert source_kind("models.nets:make") == "module"
    assert source_kind("path/to/nets.py:make") == "module"
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(BuildError, match="cannot tell what notes.txt is"):
        source_kind(str(tmp_path / "notes.txt"))
    with pytest.raises(BuildError, match="does not exist"):
        source_kind(str(tmp_path / "missing.onnx"))
