"""Clear diagnostics for model files: Git LFS pointers, and file names that are paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from helpers.cli_runner import cli
from tritonctl.repo_schema.modelfiles import ModelFileError, git_lfs_pointer_size, lfs_pointer_problem
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io
from tritonctl.repo_schema.render.code_examples import working_directory

POINTER = ("version https://git-lfs.github.com/spec/v1\n"
           "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
           "size 102503872\n")
CONFIG = '''name: "m"
backend: "{backend}"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
'''


def _validate(capsys, *args) -> tuple[int, list[dict]]:
    code, out, _ = cli(capsys, "validate", *args, "--format", "json")
    return code, json.loads(out)["diagnostics"]


@pytest.fixture
def work(tmp_path: Path):
    with working_directory(tmp_path):
        yield tmp_path


@pytest.mark.parametrize(("backend", "filename"), [("onnxruntime", "model.onnx"), ("python", "model.py"),
                                                   ("tensorrt", "model.plan"), ("pytorch", "model.pt")])
def test_lfs_pointer_is_named_as_such(work, capsys, backend, filename):
    model = Path("repo/m")
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(backend=backend) + "instance_group [ { kind: KIND_CPU } ]\n"
                                        if backend != "tensorrt" else CONFIG.format(backend=backend))
    (model / "1" / filename).write_text(POINTER)
    code, found = _validate(capsys, "repo", "--gpus", "1")
    assert code == 1
    pointer = [d for d in found if d["code"] == "MF02"]
    assert len(pointer) == 1, found
    assert pointer[0]["message"] == f"1/{filename} is a Git LFS pointer to a file of 97.8 MiB, not the model itself"
    assert "git lfs pull" in pointer[0]["hint"] and (pointer[0]["line"], pointer[0]["column"]) == (2, 10)
    # No second diagnostic about the same file ("protobuf decoding failed", a syntax error).
    assert not [d for d in found if d["code"] in ("MF01", "PY01", "TRT50")], found


def test_onnx_directory_form_and_reader_message(work, capsys):
    model = Path("repo/m")
    (model / "1" / "model.onnx").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(backend="onnxruntime"))
    (model / "1" / "model.onnx" / "model.onnx").write_text(POINTER)
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["MF02"]
    with pytest.raises(ModelFileError, match=r"model.onnx is a Git LFS pointer .*git lfs pull"):
        read_onnx_io(model / "1" / "model.onnx")


def test_tensorflow_savedmodel_pointer_and_missing_file(work, capsys):
    model = Path("repo/m")
    (model / "1" / "model.savedmodel" / "variables").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(backend="tensorflow").replace(
        'backend: "tensorflow"', 'platform: "tensorflow_savedmodel"'))
    # Git LFS tracks the files inside a SavedModel directory, saved_model.pb first.
    (model / "1" / "model.savedmodel" / "saved_model.pb").write_text(POINTER)
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["MF02"], found
    assert found[0]["message"].startswith("1/model.savedmodel/saved_model.pb is a Git LFS pointer")
    # A version without the SavedModel (or a GraphDef model without model.graphdef) is refused.
    (model / "2").mkdir()
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["message"] for d in found if d["code"] == "PB10"] == [
        "version 2 of model 'm' has no model.savedmodel (it is empty)"]
    (model / "config.pbtxt").write_text(CONFIG.format(backend="tensorflow").replace(
        'backend: "tensorflow"', 'platform: "tensorflow_graphdef"'))
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["message"] for d in found if d["code"] == "PB10"] == [
        "version 2 of model 'm' has no model.graphdef (it is empty)"]
    (model / "2" / "model.graphdef").write_bytes(b"\x0a\x00")
    code, found = _validate(capsys, "repo")
    assert code == 0 and not [d for d in found if d["severity"] == "error"], found


def test_pointer_detection(tmp_path):
    file = tmp_path / "f"
    file.write_text(POINTER)
    assert git_lfs_pointer_size(file) == 102503872
    file.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
    assert git_lfs_pointer_size(file) == 0 and lfs_pointer_problem(file) == "f is a Git LFS pointer to a file, " \
                                                                           "not the model itself"
    file.write_text(POINTER + "x" * 2000)  # pointers stay below 1 KiB
    assert git_lfs_pointer_size(file) is None
    assert git_lfs_pointer_size(tmp_path / "missing") is None


@given(st.binary(max_size=1100))
def test_pointer_detection_never_fails_on_other_bytes(tmp_path_factory, data):
    file = tmp_path_factory.mktemp("b") / "model.onnx"
    file.write_bytes(data)
    size = git_lfs_pointer_size(file)
    assert size is None or data.startswith(b"version https://")


@pytest.mark.parametrize("name", ["../../tmp/model.dali", "sub/model.onnx", "..", "a\\\\model.onnx"])
def test_default_model_filename_must_be_a_file_name(work, capsys, name):
    Path("c.pbtxt").write_text(CONFIG.format(backend="onnxruntime") + f'default_model_filename: "{name}"\n')
    code, found = _validate(capsys, "c.pbtxt")
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["PB11"]
    assert found[-1]["line"] == 6 and "version directory" in found[-1]["message"]


def test_model_file_name_that_is_a_path_fails_even_when_the_file_exists(work, capsys):
    model = Path("repo/m")
    (model / "1" / "sub").mkdir(parents=True)
    (model / "1" / "sub" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, r):\n        return []\n")
    (model / "config.pbtxt").write_text(CONFIG.format(backend="python") + 'default_model_filename: "sub/model.py"\n')
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["PB11"]
    # Nor is an ONNX file reached through the path read and judged: PB11 says all there is.
    Path("repo/x.onnx").write_bytes(b"not a model")
    (model / "config.pbtxt").write_text(CONFIG.format(backend="onnxruntime") + 'default_model_filename: "../../x.onnx"\n')
    code, found = _validate(capsys, "repo")
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["PB11"], found
    Path("t.pbtxt").write_text(CONFIG.format(backend="tensorrt") +
                               'cc_model_filenames { key: "8.6" value: "../a100/model.plan" }\n')
    code, found = _validate(capsys, "t.pbtxt")
    assert code == 1 and "PB11" in [d["code"] for d in found]


def test_plain_names_pass(work, capsys):
    Path("c.pbtxt").write_text(CONFIG.format(backend="onnxruntime") + 'default_model_filename: "resnet..v2.onnx"\n')
    assert _validate(capsys, "c.pbtxt")[0] == 0
