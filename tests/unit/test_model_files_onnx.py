"""ONNX model files against config.pbtxt, with models built by onnx.helper on disk."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.corpus_harness import write_model
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io
from tritonctl.repo_schema.validate import validate_paths


def save_onnx(path: Path, inputs, outputs, external_weight: bool = False) -> None:
    """inputs/outputs: (name, elem_type, shape) with None for a symbolic dim."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    nodes = [helper.make_node("Identity", [inputs[0][0]], [o[0]]) for o in outputs]
    initializers = []
    if external_weight:
        import numpy as np

        initializers.append(numpy_helper.from_array(np.zeros((256, 256), dtype="float32"), "weight"))
    model = helper.make_model(helper.make_graph(nodes, "g", ins, outs, initializers))
    if external_weight:
        onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin",
                        size_threshold=0)
    else:
        onnx.save_model(model, str(path))


def check(tmp_path: Path, config: str, inputs, outputs, **kw) -> list:
    model_dir = tmp_path / "repo" / "m"
    write_model(model_dir, config, ["1/"])
    save_onnx(model_dir / "1" / "model.onnx", inputs, outputs, **kw)
    report = validate_paths([tmp_path / "repo"])
    return [d for d in report.diagnostics if d.model == "m"]


def cfg(mbs: int, inputs: str, outputs: str) -> str:
    return f'backend: "onnxruntime"\nmax_batch_size: {mbs}\ninput [ {inputs} ]\noutput [ {outputs} ]\n'


F32 = TensorProto.FLOAT
IN = '{ name: "x" data_type: TYPE_FP32 dims: [ 3, 4 ] }'
OUT = '{ name: "y" data_type: TYPE_FP32 dims: [ 3, 4 ] }'


def codes(found) -> list[str]:
    return sorted(d.code for d in found)


def test_batching_model_matches(tmp_path):
    assert check(tmp_path, cfg(8, IN, OUT), [("x", F32, [None, 3, 4])], [("y", F32, [None, 3, 4])]) == []


def test_fixed_batch_of_one_with_max_batch_size(tmp_path):
    found = check(tmp_path, cfg(8, IN, OUT), [("x", F32, [1, 3, 4])], [("y", F32, [1, 3, 4])])
    assert codes(found) == ["ORT04"]
    assert found[0].span.line == 2 and "'x' [1,3,4]" in found[0].message
    assert "max_batch_size: 0 and dims: [1,3,4]" in found[0].hint


def test_wrong_data_type(tmp_path):
    found = check(tmp_path, cfg(8, IN, OUT), [("x", TensorProto.INT64, [None, 3, 4])], [("y", F32, [None, 3, 4])])
    assert codes(found) == ["ORT03"]
    assert "config.pbtxt says TYPE_FP32 but the ONNX model declares INT64" in found[0].message
    assert found[0].hint.startswith("change data_type to TYPE_INT64")
    assert (found[0].span.line, found[0].span.col) == (3, 32)


def test_wrong_name_suggests_the_model_name(tmp_path):
    found = check(tmp_path, cfg(8, IN, OUT.replace('"y"', '"y1"')), [("x", F32, [None, 3, 4])],
                  [("y_1", F32, [None, 3, 4])])
    assert codes(found) == ["ORT02"]
    assert "its outputs are: y_1" in found[0].message and found[0].hint == "did you mean 'y_1'?"


def test_scalar_model_tensor_needs_dims_of_ones(tmp_path):
    ok = check(tmp_path / "a", cfg(0, IN.replace("3, 4", "1"), OUT.replace("3, 4", "1")),
               [("x", F32, [])], [("y", F32, [])])
    assert ok == []
    bad = check(tmp_path / "b", cfg(0, IN.replace("3, 4", "2"), OUT.replace("3, 4", "1")),
                [("x", F32, [])], [("y", F32, [])])
    assert codes(bad) == ["ORT05"] and "scalar" in bad[0].message


def test_reshape_replaces_dims_in_the_comparison(tmp_path):
    config = cfg(8, '{ name: "x" data_type: TYPE_FP32 dims: [ 3, 4 ] reshape { shape: [ 12 ] } }', OUT)
    assert check(tmp_path, config, [("x", F32, [None, 12])], [("y", F32, [None, 3, 4])]) == []


def test_repeated_batch_dimension_gets_a_specific_hint(tmp_path):
    config = cfg(8, IN.replace("3, 4", "-1, 3, 4"), OUT)
    found = check(tmp_path, config, [("x", F32, [None, 3, 4])], [("y", F32, [None, 3, 4])])
    ort = [d for d in found if d.code == "ORT05"]
    assert len(ort) == 1 and "leave out the batch dimension" in ort[0].hint and "dims: [3,4]" in ort[0].hint


def test_inputs_accept_model_wildcards_but_outputs_compare_exactly(tmp_path):
    found = check(tmp_path, cfg(8, IN, OUT), [("x", F32, [None, None, 4])], [("y", F32, [None, None, 4])])
    assert [(d.code, d.message.split(":")[0]) for d in found] == [("ORT05", "output 'y'")]


def test_optional_inputs_do_not_count_as_model_inputs(tmp_path):
    config = cfg(0, IN + ', { name: "z" data_type: TYPE_FP32 dims: [ 3, 4 ] optional: true }', OUT)
    found = check(tmp_path, config, [("x", F32, [3, 4]), ("z", F32, [3, 4])], [("y", F32, [3, 4])])
    assert codes(found) == ["ORT01"]
    assert "configuration expects 1 inputs, the ONNX model provides 2" in found[0].message


def test_missing_config_input_is_named(tmp_path):
    found = check(tmp_path, cfg(0, IN, OUT), [("x", F32, [3, 4]), ("mask", TensorProto.BOOL, [3])],
                  [("y", F32, [3, 4])])
    assert codes(found) == ["ORT01"] and "no config entry for 'mask'" in found[0].message


def test_external_data_file_absent_is_still_checked(tmp_path):
    model_dir = tmp_path / "repo" / "m"
    check(tmp_path, cfg(8, IN, OUT), [("x", TensorProto.INT32, [None, 3, 4])],
          [("y", F32, [None, 3, 4])], external_weight=True)
    (model_dir / "1" / "weights.bin").unlink()
    found = [d for d in validate_paths([tmp_path / "repo"]).diagnostics if d.model == "m"]
    assert codes(found) == ["ORT03"]


def test_corrupt_model_is_a_clear_error(tmp_path):
    model_dir = tmp_path / "repo" / "m"
    write_model(model_dir, cfg(8, IN, OUT), ["1/"])
    (model_dir / "1" / "model.onnx").write_bytes(b"\x08\x07\x12\x03abc\xff\xff")  # a truncated download
    found = [d for d in validate_paths([tmp_path / "repo"]).diagnostics if d.model == "m"]
    assert codes(found) == ["MF01"] and "not a valid ONNX model" in found[0].message
    # A Git LFS pointer is named as such (tests/unit/test_model_file_diagnostics.py).
    (model_dir / "1" / "model.onnx").write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    found = [d for d in validate_paths([tmp_path / "repo"]).diagnostics if d.model == "m"]
    assert codes(found) == ["MF02"]


def test_model_onnx_directory_is_read(tmp_path):
    model_dir = tmp_path / "repo" / "m"
    write_model(model_dir, cfg(8, IN, OUT), ["1/model.onnx/"])
    save_onnx(model_dir / "1" / "model.onnx" / "model.onnx", [("x", TensorProto.INT8, [None, 3, 4])],
              [("y", F32, [None, 3, 4])])
    found = [d for d in validate_paths([tmp_path / "repo"]).diagnostics if d.model == "m"]
    assert codes(found) == ["ORT03"]


def test_onnx_file_is_read_once(tmp_path):
    path = tmp_path / "model.onnx"
    save_onnx(path, [("x", F32, [None, 3])], [("y", F32, [None, 3])])
    assert read_onnx_io(path) is read_onnx_io(path)


@pytest.mark.parametrize("mbs", [0, 8])
def test_autocompleted_config_is_not_compared_again(tmp_path, mbs):
    config = f'backend: "onnxruntime"\nmax_batch_size: {mbs}\n'
    assert [d.code for d in check(tmp_path, config, [("x", F32, [None, 3])], [("y", F32, [None, 3])])
            if d.severity.value == "error"] == []


IMAGE_IN = '{ name: "x" data_type: TYPE_FP32 dims: [ -1, 3, 8, 8 ] }'
IMAGE_OUT = '{ name: "y" data_type: TYPE_FP32 dims: [ -1, 3, 8, 8 ] }'


def test_model_file_showing_the_batch_twice_is_io53(tmp_path):
    found = check(tmp_path, cfg(8, IMAGE_IN, IMAGE_OUT), [("x", F32, [None, None, 3, 8, 8])],
                  [("y", F32, [None, None, 3, 8, 8])])
    assert codes(found) == ["IO53", "IO53"] and {d.severity.value for d in found} == {"warning"}
    first = found[0]
    assert first.message.startswith("input 'x': the ONNX model has the shape [-1,-1,3,8,8], the batch dimension twice")
    line = cfg(8, IMAGE_IN, IMAGE_OUT).splitlines()[2]
    assert (first.span.line, first.span.col) == (3, line.index("-1") + 1) and "use dims: [3,8,8]" in first.hint


def test_model_file_with_the_batch_once_is_the_load_error_not_io53(tmp_path):
    found = check(tmp_path, cfg(8, IMAGE_IN, IMAGE_OUT), [("x", F32, [None, 3, 8, 8])], [("y", F32, [None, 3, 8, 8])])
    assert codes(found) == ["ORT05", "ORT05"]
    assert "leave out the batch dimension" in found[0].hint


@pytest.mark.parametrize("model_shape", [[None, None, 4], [None, None, None, 8]])
def test_variable_lengths_after_the_batch_are_legitimate(tmp_path, model_shape):
    dims = ", ".join("-1" if d is None else str(d) for d in model_shape[1:])
    io = f'{{ name: "x" data_type: TYPE_FP32 dims: [ {dims} ] }}'
    assert check(tmp_path, cfg(8, io, io.replace('"x"', '"y"')), [("x", F32, model_shape)],
                 [("y", F32, model_shape)]) == []
