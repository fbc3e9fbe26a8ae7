"""Ensembles over real model directories: python and ONNX composing models."""

from __future__ import annotations

from pathlib import Path

from onnx import TensorProto

from helpers.corpus_harness import write_model
from test_model_files_onnx import save_onnx
from tritonctl.repo_schema.validate import validate_paths

PRE = '''backend: "python"
max_batch_size: 8
input [ { name: "RAW" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "PIX" data_type: TYPE_FP32 dims: [ 3, 4 ] } ]
'''
ENSEMBLE = '''platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 10 ] } ]
ensemble_scheduling {
  step [
    { model_name: "pre" model_version: -1 input_map { key: "RAW" value: "IMAGE" } output_map { key: "PIX" value: "pixels" } },
    { model_name: "net" model_version: -1 input_map { key: "x" value: "pixels" } output_map { key: "y" value: "SCORES" } }
  ]
}
'''


def repo_with_onnx_net(tmp_path: Path, x_type: int, ensemble: str = ENSEMBLE) -> Path:
    repo = tmp_path / "repo"
    write_model(repo / "pre", PRE, ["1/model.py"])
    write_model(repo / "ens", ensemble, ["1/"])
    # No inputs or outputs in the config: Triton auto-completes them from model.onnx.
    write_model(repo / "net", 'backend: "onnxruntime"\nmax_batch_size: 8\n', ["1/"])
    save_onnx(repo / "net" / "1" / "model.onnx", [("x", x_type, [None, 3, 4])], [("y", TensorProto.FLOAT, [None, 10])])
    return repo


def ensemble_findings(repo: Path) -> list:
    return [d for d in validate_paths([repo]).diagnostics if d.model == "ens"]


def test_autocompleted_onnx_step_matches(tmp_path):
    assert ensemble_findings(repo_with_onnx_net(tmp_path, TensorProto.FLOAT)) == []


def test_type_from_the_onnx_file_is_compared_along_the_tensor(tmp_path):
    found = ensemble_findings(repo_with_onnx_net(tmp_path, TensorProto.FLOAT16))
    assert [d.code for d in found] == ["ENS17"]
    assert "model 'pre' output 'PIX' (step 0) has TYPE_FP32" in found[0].message
    assert "model 'net' input 'x' (step 1) has TYPE_FP16" in found[0].message
    assert (found[0].span.line, found[0].span.col) == (8, 71)


def test_unfed_step_input_is_named_as_the_root_cause(tmp_path):
    repo = repo_with_onnx_net(tmp_path, TensorProto.FLOAT, ENSEMBLE.replace('value: "pixels" } output_map { key: "y"',
                                                                            'value: "pixel" } output_map { key: "y"'))
    found = ensemble_findings(repo)
    assert [d.code for d in found] == ["ENS08"]
    assert "step 1 ('net') needs input 'x' from ensemble tensor 'pixel', and nothing feeds it" in found[0].message
    assert "did you mean 'pixels'?" in found[0].hint


def test_broken_composing_model_is_reported_as_the_cause(tmp_path):
    repo = repo_with_onnx_net(tmp_path, TensorProto.FLOAT)
    (repo / "net" / "1" / "model.onnx").write_bytes(b"\x00garbage")
    found = ensemble_findings(repo)
    assert [d.code for d in found] == ["ENS12"]
    assert "uses model 'net', which will not load" in found[0].message
    assert "net/config.pbtxt" in found[0].hint


def test_single_ensemble_directory_sees_its_siblings(tmp_path):
    repo = repo_with_onnx_net(tmp_path, TensorProto.FLOAT,
                              ENSEMBLE.replace(' model_version: -1 input_map { key: "RAW"', ' input_map { key: "RAW"'))
    found = [d for d in validate_paths([repo / "ens"]).diagnostics]
    assert [d.code for d in found] == ["ENS12"]
    assert "asks for version 0" in found[0].message and "model_version: -1" in found[0].hint
