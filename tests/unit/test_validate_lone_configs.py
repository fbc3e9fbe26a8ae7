"""Configs linted on their own (as CI jobs do) and GPU checks against the target server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_runner import cli
from tritonctl.repo_schema.gpus import local_gpus
from tritonctl.repo_schema.render.code_examples import working_directory, write_model

ONNX = '''name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
'''
ENSEMBLE = '''name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ {
  model_name: "pre" model_version: -1 input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" }
} ] }
'''
GPU_GROUP = '''name: "g"
backend: "python"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]
'''


def _codes(out: str) -> list[str]:
    return [d["code"] for d in json.loads(out)["diagnostics"]]


@pytest.fixture(autouse=True)
def _no_assumed_gpus(monkeypatch):
    monkeypatch.delenv("TRITONCTL_ASSUME_GPUS", raising=False)


@pytest.fixture
def work(tmp_path: Path):
    with working_directory(tmp_path):
        yield tmp_path


def test_lone_config_gets_config_checks_only(work, capsys):
    Path("m").mkdir()
    Path("m/config.pbtxt").write_text(ONNX)
    code, out, _ = cli(capsys, "validate", "m/config.pbtxt")
    assert code == 0, out
    assert "note[REPO54]: not checked without the repository: version directories, model files, label files" in out
    # The same file in its (incomplete) repository: no version directory, no label file.
    code, out, _ = cli(capsys, "validate", "m", "--format", "json")
    assert code == 1 and {"VP03", "IO16"} <= set(_codes(out))


def test_lone_ensemble_does_not_look_for_its_members(work, capsys):
    Path("pipe.pbtxt").write_text(ENSEMBLE)
    code, out, _ = cli(capsys, "validate", "pipe.pbtxt", "--format", "json")
    report = json.loads(out)
    assert code == 0 and _codes(out) == ["REPO54"]
    assert report["diagnostics"][0]["message"] == \
        "not checked without the repository: version directories, ensemble members"
    # The dataflow inside the ensemble needs only the config, so it is still checked.
    Path("pipe.pbtxt").write_text(ENSEMBLE.replace('value: "OUT"', 'value: "OUTT"'))
    code, out, _ = cli(capsys, "validate", "pipe.pbtxt", "--format", "json")
    assert code == 1 and "ENS08" in _codes(out)
    # So is an ensemble that runs itself.
    Path("pipe.pbtxt").write_text(ENSEMBLE.replace('model_name: "pre"', 'model_name: "pipe"'))
    code, out, _ = cli(capsys, "validate", "pipe.pbtxt", "--format", "json")
    assert code == 1 and "ENS11" in _codes(out)


def test_several_files_and_a_directory_of_configs(work, capsys):
    Path("configs").mkdir()
    Path("configs/a.pbtxt").write_text(ONNX)
    Path("configs/b.pbtxt").write_text(ONNX.replace("max_batch_size: 8", "max_batch_size: -1"))
    code, out, _ = cli(capsys, "validate", "configs/a.pbtxt", "configs/b.pbtxt")
    assert code == 1 and "configs/b.pbtxt:3:17" in out and out.count("REPO54") == 1
    assert out.endswith("1 error, 1 note in 2 models\n")
    code, out2, _ = cli(capsys, "validate", "configs")
    assert code == 1 and out2.replace("--> configs\n", "--> configs/a.pbtxt\n") == out
    # A file not named config.pbtxt has no model directory: its name comes from the config.
    code, out, _ = cli(capsys, "validate", "configs/a.pbtxt", "--format", "json")
    assert code == 0 and "TOP02" not in _codes(out)


def test_config_only_on_a_repository(work, capsys):
    write_model(work / "repo" / "m", ONNX.replace(' label_filename: "labels.txt"', ""))
    (work / "repo" / "m" / "1" / "model.onnx").write_bytes(b"version https://git-lfs")
    (work / "repo" / "nover").mkdir()
    (work / "repo" / "nover" / "config.pbtxt").write_text(GPU_GROUP.replace('"g"', '"nover"'))
    code, out, _ = cli(capsys, "validate", "repo", "--gpus", "2", "--format", "json")
    assert code == 1 and {"VP03", "MF01"} <= set(_codes(out))
    code, out, _ = cli(capsys, "validate", "repo", "--gpus", "2", "--config-only", "--format", "json")
    assert code == 0 and _codes(out) == ["REPO54"], out
    # A directory's name still counts for its config.pbtxt.
    (work / "repo" / "nover" / "config.pbtxt").write_text(GPU_GROUP)
    code, out, _ = cli(capsys, "validate", "repo", "--gpus", "2", "--config-only", "--format", "json")
    assert code == 1 and "TOP02" in _codes(out)


def test_label_file_outside_the_model_directory_is_an_error_on_its_own(work, capsys):
    Path("c.pbtxt").write_text(ONNX.replace('"labels.txt"', '"../labels.txt"'))
    code, out, _ = cli(capsys, "validate", "c.pbtxt", "--format", "json")
    assert code == 1 and "IO16" in _codes(out)


def test_gpus_unknown_by_default(work, capsys):
    Path("g.pbtxt").write_text(GPU_GROUP)
    code, out, _ = cli(capsys, "validate", "g.pbtxt")
    assert code == 0, out
    assert "note[IG54]: GPU ids and KIND_GPU instance groups not checked" in out
    assert "--gpus N" in out


@pytest.mark.parametrize(("args", "env", "code", "expected"), [
    (["--gpus", "2"], None, 0, None),
    (["--gpus", "1"], None, 1, "IG05"),
    (["--gpus", "0"], None, 1, "IG05"),
    ([], "2", 0, None),
    ([], "1", 1, "IG05"),
    (["--gpus", "2"], "1", 0, None),  # the flag wins over the environment
])
def test_gpus_of_the_target_server(work, capsys, monkeypatch, args, env, code, expected):
    if env is not None:
        monkeypatch.setenv("TRITONCTL_ASSUME_GPUS", env)
    Path("g.pbtxt").write_text(GPU_GROUP)
    got, out, _ = cli(capsys, "validate", "g.pbtxt", "--format", "json", *args)
    codes = _codes(out)
    assert got == code and "IG54" not in codes, out
    assert (expected in codes) if expected else not [c for c in codes if c.startswith("IG")]


def test_kind_gpu_needs_a_gpu_only_when_the_count_is_known(work, capsys):
    Path("g.pbtxt").write_text(GPU_GROUP.replace(" gpus: [ 1 ]", ""))
    assert cli(capsys, "validate", "g.pbtxt")[0] == 0
    code, out, _ = cli(capsys, "validate", "g.pbtxt", "--gpus", "0", "--format", "json")
    assert code == 1 and "IG04" in _codes(out)


def test_gpus_local_checks_this_machine(work, capsys):
    Path("g.pbtxt").write_text(GPU_GROUP.replace("gpus: [ 1 ]", "gpus: [ 0 ]"))
    code, out, _ = cli(capsys, "validate", "g.pbtxt", "--gpus", "local", "--format", "json")
    has_gpu = local_gpus().count >= 1
    assert code == (0 if has_gpu else 1) and ("IG05" in _codes(out)) != has_gpu


@pytest.mark.parametrize("group", [
    "{ kind: KIND_GPU gpus: [ -1 ] }",     # IG05: no server has GPU -1
    "{ kind: KIND_CPU gpus: [ 0 ] }",      # IG03
    "{ kind: KIND_AUTO gpus: [ -2 ] }",    # IG03: KIND_AUTO becomes KIND_CPU
    "{ kind: KIND_MODEL gpus: [ 0 ] }",    # IG02
])
def test_configs_wrong_for_any_gpu_count_are_reported_without_gpus(work, capsys, group):
    Path("g.pbtxt").write_text(GPU_GROUP.replace("{ kind: KIND_GPU gpus: [ 1 ] }", group))
    code, out, _ = cli(capsys, "validate", "g.pbtxt", "--format", "json")
    assert code == 1 and [c for c in _codes(out) if c.startswith("IG")], out


def test_tensorrt_on_cpu_is_wrong_whatever_the_gpus(work, capsys):
    trt = 'name: "t"\nplatform: "tensorrt_plan"\nmax_batch_size: 1\n' \
          'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' \
          'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    Path("t.pbtxt").write_text(trt)
    assert cli(capsys, "validate", "t.pbtxt")[0] == 0
    assert cli(capsys, "validate", "t.pbtxt", "--gpus", "0")[0] == 1
    Path("t.pbtxt").write_text(trt + "instance_group [ { kind: KIND_CPU } ]\n")
    code, out, _ = cli(capsys, "validate", "t.pbtxt", "--format", "json")
    assert code == 1 and "IG07" in _codes(out)


def test_bad_gpus_value_is_a_usage_error(work, capsys, monkeypatch):
    Path("g.pbtxt").write_text(GPU_GROUP)
    code, _, err = cli(capsys, "validate", "g.pbtxt", "--gpus", "two")
    assert code == 2 and "GPU count" in err and "'two'" in err
    monkeypatch.setenv("TRITONCTL_ASSUME_GPUS", "lots")
    code, _, err = cli(capsys, "validate", "g.pbtxt")
    assert code == 2 and "TRITONCTL_ASSUME_GPUS" in err
    # A count no server has is a typo, refused in one line (not an overflow deep inside).
    monkeypatch.delenv("TRITONCTL_ASSUME_GPUS")
    code, _, err = cli(capsys, "validate", "g.pbtxt", "--gpus", "99999999999999999999")
    assert code == 2 and err.strip().splitlines()[-1].startswith(
        "error: --gpus 99999999999999999999 is more GPUs than one server has (at most 1024)")


def test_many_gpus_are_named_as_a_range(work, capsys):
    Path("g.pbtxt").write_text(GPU_GROUP.replace("gpus: [ 1 ]", "gpus: [ 40 ]"))
    code, out, _ = cli(capsys, "validate", "g.pbtxt", "--gpus", "32", "--format", "json")
    found = [d["message"] for d in json.loads(out)["diagnostics"] if d["code"] == "IG05"]
    assert code == 1 and found == ["instance group 'g_0' lists gpu id 40, but the available GPU ids are: 0 to 31"]


def test_help_names_the_gpu_flag_and_variable(capsys):
    code, out, _ = cli(capsys, "validate", "--help")
    flat = " ".join(out.split())
    assert code == 0 and "--gpus" in flat and "TRITONCTL_ASSUME_GPUS" in flat and "--config-only" in flat
