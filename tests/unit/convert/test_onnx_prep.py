"""ONNX preparation on real models: dynamic batch rewrite, its verification, folding."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers.build_models import (fixed_batch_concat, fixed_batch_reshape, onnxruntime_max_ir_version,
                                  sequence_model, with_ir_version)

from tritonctl.convert import onnx_prep
from tritonctl.convert.errors import BuildError
from tritonctl.convert.prepare import prepare_onnx, verify_rows

ort = pytest.importorskip("onnxruntime")


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_fixed_batch_is_detected_only_when_every_tensor_pins_it(tmp_path):
    assert onnx_prep.has_fixed_batch_of_one(onnx.load(fixed_batch_reshape(tmp_path / "a.onnx")))
    assert not onnx_prep.has_fixed_batch_of_one(onnx.load(sequence_model(tmp_path / "b.onnx")))


def test_rewrite_frees_io_and_the_hard_coded_reshape(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    result = onnx_prep.make_batch_dynamic(model)
    assert result.changes == ["input 'x': first dimension 1 -> 'batch'", "output 'y': first dimension 1 -> 'batch'",
                              "Reshape 'flatten': target [1, 12] -> [-1, 12]"]
    assert _dims(result.model.graph.input[0]) == ["batch", 3, 4]
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((5, 3, 4)).astype(np.float32)
    original = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rows = np.concatenate([original.run(None, {"x": x[i:i + 1]})[0] for i in range(5)])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], rows, rtol=1e-5, atol=1e-6)
    assert len(model.graph.initializer) == 4  # the input model is left alone


def test_reshape_with_minus_one_gets_a_zero(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    target = next(t for t in model.graph.initializer if t.name == "target")
    target.CopyFrom(onnx.numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "target"))
    assert onnx_prep.make_batch_dynamic(model).changes[-1] == "Reshape 'flatten': target [1, -1] -> [0, -1]"


def test_saved_model_carries_inferred_shapes(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    saved = onnx_prep.save_checked(model, tmp_path / "checked.onnx")
    shapes = {v.name: _dims(v) for v in saved.graph.value_info}
    assert shapes["flat"] == [1, 12] and shapes["m"] == [1, 4]


def test_prepare_verifies_rows_and_folds_constants(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    prepared = prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    assert prepared.fixed_batch_source and len(prepared.batch_rewrite) == 3
    assert prepared.folded == 1  # two + three
    assert [n.op_type for n in prepared.model.graph.node] == ["Reshape", "MatMul", "Mul"]
    assert {t.name for t in prepared.model.graph.initializer} == {"W", "target__dynamic_batch_1", "five"}
    assert prepared.io.inputs[0].dims == (-1, 3, 4)
    assert (tmp_path / "out.onnx").is_file()


def test_prepare_keeps_batch_one_when_batching_is_not_wanted(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    prepared = prepare_onnx(model, tmp_path / "out.onnx", want_batch=False, shapes=[], seed=0)
    assert not prepared.batch_rewrite and prepared.io.inputs[0].dims == (1, 3, 4)


def test_a_batch_no_rewrite_can_free_is_refused_with_what_was_tried(tmp_path):
    model = onnx.load(fixed_batch_concat(tmp_path / "m.onnx"))
    with pytest.raises(BuildError) as error:
        prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    message = str(error.value)
    assert "fixed batch of 1" in message and "input 'x': first dimension 1 -> 'batch'" in message
    assert "--max-batch-size 0" in message


def test_folding_leaves_random_ops_and_graph_inputs_alone():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("RandomUniform", [], ["r"], shape=[2], dtype=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    folded = onnx_prep.fold_constants(helper.make_model(graph))
    assert folded.folded == 0 and [n.op_type for n in folded.model.graph.node] == ["RandomUniform", "Add"]
    assert [v.name for v in folded.model.graph.input] == ["x"]


def test_checker_failure_is_a_build_error(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Add", ["x", "missing"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(BuildError, match="onnx.checker"):
        onnx_prep.save_checked(helper.make_model(graph), tmp_path / "broken.onnx")


@pytest.mark.parametrize("ir_version", range(onnx_prep.OLDEST_IR_VERSION, onnx.IR_VERSION + 1))
def test_every_ir_version_onnx_reads_is_prepared_and_checked(tmp_path, ir_version):
    source = with_ir_version(fixed_batch_reshape(tmp_path / "m.onnx"), tmp_path / "ir.onnx", ir_version)
    if ir_version > onnxruntime_max_ir_version():  # an onnx newer than this onnxruntime
        with pytest.raises(BuildError) as refused:
            prepare_onnx(onnx.load(str(source)), tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
        assert str(refused.value).startswith(f"onnxruntime cannot load the model: the model has ONNX IR version "
                                             f"{ir_version} and onnxruntime {ort.__version__} reads IR versions up "
                                             f"to {onnxruntime_max_ir_version()}")
        return
    prepared = prepare_onnx(onnx.load(str(source)), tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    model = prepared.model
    assert model.ir_version == ir_version and prepared.folded == 1
    initializers = {t.name for t in model.graph.initializer}
    assert initializers == {"W", "target__dynamic_batch_1", "five"}
    listed = {v.name for v in model.graph.input}
    assert listed == ({"x"} | initializers if ir_version < 4 else {"x"})
    assert [t.name for t in prepared.io.inputs] == ["x"] and prepared.io.inputs[0].dims == (-1, 3, 4)
    x = np.random.default_rng(2).standard_normal((4, 3, 4)).astype(np.float32)
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    rows = np.concatenate([original.run(None, {"x": x[i:i + 1]})[0] for i in range(4)])
    batched = ort.InferenceSession(str(prepared.path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(batched, rows, rtol=1e-5, atol=1e-6)


def test_a_model_newer_than_onnxruntime_reads_says_so_and_how_out(tmp_path):
    """A model written by a newer onnx than onnxruntime reads: onnxruntime's refusal, explained, and
    not blamed on the batch rewrite (the source is run first)."""
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    rewritten = onnx_prep.make_batch_dynamic(model).model
    model.ir_version = rewritten.ir_version = 99  # onnx's checker refuses it too, so after the rewrite
    with pytest.raises(BuildError) as refused:
        verify_rows(model, rewritten, ["a change"], [], seed=0)
    limit = onnxruntime_max_ir_version()
    assert str(refused.value) == (
        f"onnxruntime cannot load the model: the model has ONNX IR version 99 and onnxruntime {ort.__version__} "
        f"reads IR versions up to {limit} (a newer onnx wrote it): upgrade onnxruntime (pip install -U onnxruntime), "
        f"or save the model with ir_version {limit} or lower (onnx.helper.find_min_ir_version_for gives the lowest "
        "its operator sets allow)")


def test_overridable_initializers_are_not_folded_from_ir_version_4():
    from onnx import TensorProto, helper, numpy_helper

    def model(ir_version):
        two = numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two")
        graph = helper.make_graph(
            [helper.make_node("Add", ["two", "two"], ["four"]), helper.make_node("Mul", ["x", "four"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
             helper.make_tensor_value_info("two", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [two])
        return helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", 13)])

    overridable = onnx_prep.fold_constants(model(4))
    assert overridable.folded == 0 and [v.name for v in overridable.model.graph.input] == ["x", "two"]
    constant = onnx_prep.fold_constants(model(3))  # before IR 4 a listed initializer is a constant
    assert constant.folded == 1 and [n.op_type for n in constant.model.graph.node] == ["Mul"]
    assert [v.name for v in constant.model.graph.input] == ["x", "four"]
    onnx.checker.check_model(constant.model)


def test_ir_versions_before_operator_sets_are_refused(tmp_path):
    model = onnx.load(fixed_batch_reshape(tmp_path / "m.onnx"))
    model.ir_version = 2
    del model.opset_import[:]
    with pytest.raises(BuildError, match="IR version 2, from before ONNX versioned its operators"):
        prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    assert not (tmp_path / "out.onnx").exists()


def _fixed_batch_model(op: str, dtype: int, inputs: list[str]):
    from onnx import helper

    graph = helper.make_graph([helper.make_node(op, inputs, ["y"])], op.lower(),
                              [helper.make_tensor_value_info(n, dtype, [1, 4]) for n in inputs],
                              [helper.make_tensor_value_info("y", dtype, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_source_that_fails_on_the_verification_inputs_is_a_build_error(tmp_path):
    model = _fixed_batch_model("Mod", onnx.TensorProto.INT64, ["a", "b"])  # integers in {0, 1}: modulo by zero
    with pytest.raises(BuildError, match="the source model fails on the random inputs that verify its dynamic "
                                         "batch .*--max-batch-size 0"):
        prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)


def test_nan_the_original_computes_too_does_not_fail_the_rewrite(tmp_path):
    model = _fixed_batch_model("Sqrt", onnx.TensorProto.FLOAT, ["x"])  # inputs in [-1, 1): NaN on both sides
    prepared = prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    assert prepared.fixed_batch_source and _dims(prepared.model.graph.input[0]) == ["batch", 4]


def test_sequence_inputs_are_refused_as_unservable_not_as_unchecked(tmp_path):
    from onnx import helper

    graph = helper.make_graph([helper.make_node("SequenceAt", ["xs", "i"], ["y"])], "seq",
                              [helper.make_tensor_sequence_value_info("xs", onnx.TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(BuildError, match="input 'xs' has type non-tensor \\(sequence_type\\), which Triton cannot "
                                         "pass") as raised:
        prepare_onnx(model, tmp_path / "out.onnx", want_batch=True, shapes=[], seed=0)
    assert "--no-check" not in str(raised.value)
