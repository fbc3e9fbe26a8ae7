"""Repository layout warnings, model.py read statically, and TensorRT plans."""

from __future__ import annotations

import pytest

from helpers.corpus_harness import PYTHON_MODEL, write_model
from tritonctl.repo_schema.modelfiles.tensorrt import unavailable_reason
from tritonctl.repo_schema.validate import validate_paths

CONFIG = '''backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''


def findings(paths, config_name=None, prefix=("REPO", "PY", "PB10", "TRT")) -> list:
    return [d for d in validate_paths(paths, config_name).diagnostics if d.code.startswith(prefix)]


def test_hidden_and_cache_directories_in_the_root_are_flagged(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "good", CONFIG, ["1/model.py"])
    for name in (".git/objects/", "__pycache__/", ".ipynb_checkpoints/"):
        (repo / name).mkdir(parents=True)
    (repo / "README.md").write_text("files in the root are fine")
    found = [d for d in findings([repo]) if d.code == "REPO50"]
    assert sorted(d.path.name for d in found) == [".git", ".ipynb_checkpoints", "__pycache__"]
    assert all(d.severity.value == "warning" for d in found)
    # the stray directories get that one warning, not a pile of model errors
    strays = {".git", "__pycache__", ".ipynb_checkpoints"}
    assert [d.code for d in findings([repo], prefix="") if d.path and strays & set(d.path.parts)] == ["REPO50"] * 3


def test_missing_custom_config_falls_back_silently(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "m", CONFIG, ["1/model.py"])
    found = findings([repo], config_name="prod")
    assert [d.code for d in found] == ["REPO51"]
    assert "has no configs/prod.pbtxt; Triton silently uses config.pbtxt" in found[0].message
    (repo / "m" / "configs").mkdir()
    (repo / "m" / "configs" / "prod.pbtxt").write_text(CONFIG)
    assert findings([repo], config_name="prod") == []


def test_custom_config_in_the_model_root_is_never_read(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "m", CONFIG, ["1/model.py"])
    (repo / "m" / "prod.pbtxt").write_text(CONFIG)
    found = findings([repo])
    assert [d.code for d in found] == ["REPO52"] and "configs/prod.pbtxt" in found[0].hint


@pytest.mark.parametrize("name", ["config.pbtxt.txt", "Config.pbtxt", "config.txt", "1/config.pbtxt"])
def test_near_miss_config_names(tmp_path, name):
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text(PYTHON_MODEL)
    (repo / "m" / name).write_text(CONFIG)
    found = [d for d in findings([repo]) if d.code == "REPO53"]
    assert len(found) == 1 and found[0].path == repo / "m" / name


def test_model_py_syntax_error_points_into_model_py(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "m", CONFIG, ["1/"])
    model_py = repo / "m" / "1" / "model.py"
    model_py.write_text("import numpy as np\n\nclass TritonPythonModel:\n    def execute(self, requests)\n")
    found = findings([repo])
    assert [(d.code, d.path, d.span.line) for d in found] == [("PY01", model_py, 4)]
    assert "SyntaxError" in found[0].message


def test_model_py_without_the_class_or_execute(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "a", CONFIG, ["1/"])
    (repo / "a" / "1" / "model.py").write_text("class Model:\n    def execute(self, requests):\n        return []\n")
    write_model(repo / "b", CONFIG, ["1/"])
    (repo / "b" / "1" / "model.py").write_text("class TritonPythonModel:\n    def initialize(self, args):\n        pass\n")
    found = {(d.model, d.code, d.severity.value) for d in findings([repo])}
    assert found == {("a", "PY01", "error"), ("b", "PY50", "warning")}


def test_model_py_is_never_executed(tmp_path):
    repo = tmp_path / "repo"
    marker = tmp_path / "executed"
    write_model(repo / "m", CONFIG, ["1/"])
    (repo / "m" / "1" / "model.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + PYTHON_MODEL)
    assert findings([repo]) == [] and not marker.exists()


def test_missing_file_in_every_loaded_version(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "m", CONFIG.replace('max_batch_size: 8', 'version_policy { all { } }\nmax_batch_size: 8'),
                ["1/model.py", "2/", "3/weights.bin"])
    found = findings([repo])
    assert sorted(d.message for d in found) == [
        "version 2 of model 'm' has no model.py (it is empty)",
        "version 3 of model 'm' has no model.py (it holds: weights.bin)"]


def test_cc_model_filenames_files_are_required(tmp_path):
    repo = tmp_path / "repo"
    config = CONFIG.replace('backend: "python"', 'backend: "tensorrt"\ncc_model_filenames { key: "8.6" value: "sm86.plan" }')
    write_model(repo / "m", config, ["1/model.plan"])
    found = [d for d in findings([repo]) if d.code == "PB10"]
    assert len(found) == 1 and "has no sm86.plan" in found[0].message and found[0].span.line == 2


@pytest.mark.skipif(unavailable_reason() is None, reason="tensorrt and a GPU are present")
def test_plan_without_tensorrt_is_reported_as_not_checked(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo / "m", CONFIG.replace("python", "tensorrt"), ["1/model.plan"])
    found = [d for d in findings([repo]) if d.code == "TRT50"]
    assert len(found) == 1 and found[0].severity.value == "info"
    assert found[0].message == f"TensorRT plan not checked: {unavailable_reason()}"


@pytest.mark.gpu
@pytest.mark.skipif(unavailable_reason() is not None, reason=f"TensorRT plan checks need: {unavailable_reason()}")
def test_plan_is_checked_against_the_engine(tmp_path):
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    network.mark_output(network.add_identity(x).get_output(0))
    network.get_output(0).name = "y"
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (4, 4), (8, 4))
    build_config = builder.create_builder_config()
    build_config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, build_config)
    repo = tmp_path / "repo"
    config = ('backend: "tensorrt"\nmax_batch_size: 16\n'
              'input [ { name: "x" data_type: TYPE_FP16 dims: [ 4 ] } ]\n'
              'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
              'instance_group [ { kind: KIND_GPU } ]\n')
    write_model(repo / "m", config, ["1/"])
    (repo / "m" / "1" / "model.plan").write_bytes(bytes(plan))
    found = sorted(d.code for d in findings([repo], prefix=("TRT",)))
    assert found == ["TRT02", "TRT04", "TRT05"]
