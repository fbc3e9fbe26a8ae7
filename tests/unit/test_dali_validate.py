"""DALI models: the pipeline may come from 1/dali.py (autoserialization) instead of model.dali, and
DALI's auto-complete fills in inputs, outputs and max_batch_size from the pipeline at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli_runner import cli
from tritonctl.repo_schema.validate import validate_paths

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "realworld_configs" / "corpus"
PIPELINE = '''import nvidia.dali as dali
from nvidia.dali.plugin.triton import autoserialize


@autoserialize
@dali.pipeline_def(batch_size=8, num_threads=2, device_id=0)
def pipe():
    return dali.fn.external_source(name="DALI_INPUT_0", device="cpu")
'''
COMPLETE = '''backend: "dali"
max_batch_size: 8
input [ { name: "DALI_INPUT_0" data_type: TYPE_UINT8 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "DALI_OUTPUT_0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
dynamic_batching { }
'''


def dali_model(repo: Path, name: str, config: str, *files: str) -> Path:
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    for file in files:
        (model_dir / "1" / file).write_text(PIPELINE if file.endswith(".py") else "serialized pipeline")
    return model_dir


def codes(repo: Path) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in validate_paths([repo]).diagnostics]


def test_dali_py_stands_in_for_model_dali(tmp_path):
    repo = tmp_path / "repo"
    dali_model(repo, "from_py", COMPLETE, "dali.py")
    dali_model(repo, "serialized", COMPLETE, "model.dali")
    dali_model(repo, "named", COMPLETE.replace("max_batch_size: 8", 'max_batch_size: 8\ndefault_model_filename: '
                                               '"pipe.py"'), "pipe.py")
    assert codes(repo) == []


def test_without_model_dali_or_dali_py_the_model_file_is_missing(tmp_path):
    repo = tmp_path / "repo"
    dali_model(repo, "empty", COMPLETE, "notes.txt")
    assert codes(repo) == [("PB10", "version 1 of model 'empty' has neither model.dali nor dali.py "
                                    "(it holds: notes.txt)")]


def test_what_the_pipeline_fills_in_is_a_note_not_an_error(tmp_path, capsys):
    repo = tmp_path / "repo"
    dali_model(repo, "partial", '''backend: "dali"
max_batch_size: 32
input [ { name: "DALI_INPUT_0" data_type: TYPE_FP16 allow_ragged_batch: true } ]
output [ { name: "DALI_OUTPUT_0" } ]
output [ { name: "DALI_OUTPUT_1" } ]
dynamic_batching { preferred_batch_size: [ 16, 32 ] max_queue_delay_microseconds: 500 }
''', "dali.py")
    dali_model(repo, "bare", 'backend: "dali"\ndynamic_batching { }\n', "dali.py")
    status, out, _ = cli(capsys, "validate", str(repo), "--strict", "--color", "never")
    assert status == 0, out
    assert ("note[AC53]: DALI fills in input 'DALI_INPUT_0' (dims), output 'DALI_OUTPUT_0' (data_type and dims) "
            "and output 'DALI_OUTPUT_1' (data_type and dims) from the pipeline at load") in out
    assert "note[AC53]: DALI fills in the inputs, the outputs and max_batch_size from the pipeline at load" in out
    # nor is the batcher without max_batch_size (DB50): the pipeline's batch size fills it in
    assert "IO02" not in out and "IO03" not in out and "BIO50" not in out and "DB50" not in out


def test_a_complete_dali_config_gets_no_note(tmp_path):
    repo = tmp_path / "repo"
    dali_model(repo, "complete", COMPLETE, "dali.py")
    assert [d.code for d in validate_paths([repo]).diagnostics] == []


def test_backend_from_the_directory_name(tmp_path):
    """A model directory named <name>.dali without backend in its config is a DALI model."""
    repo = tmp_path / "repo"
    dali_model(repo, "model.dali", "max_batch_size: 0\noutput [ { name: \"DALI_OUTPUT_0\" } ]\n", "dali.py")
    found = codes(repo)
    assert [code for code, _ in found] == ["AC53"]


def test_an_ensemble_over_an_auto_completed_dali_model(tmp_path):
    repo = tmp_path / "repo"
    dali_model(repo, "preprocess", 'backend: "dali"\nmax_batch_size: 8\n', "dali.py")
    (repo / "classify" / "1").mkdir(parents=True)
    (repo / "classify" / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    (repo / "classify" / "config.pbtxt").write_text('''backend: "python"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "LABEL" data_type: TYPE_INT64 dims: [ 1 ] } ]
''')
    (repo / "pipeline" / "1").mkdir(parents=True)
    (repo / "pipeline" / "config.pbtxt").write_text('''platform: "ensemble"
max_batch_size: 8
input [ { name: "RAW" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "LABEL" data_type: TYPE_INT64 dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "preprocess" model_version: -1
    input_map { key: "DALI_INPUT_0" value: "RAW" } output_map { key: "DALI_OUTPUT_0" value: "image" } },
  { model_name: "classify" model_version: -1
    input_map { key: "IMAGE" value: "image" } output_map { key: "LABEL" value: "LABEL" } }
] }
''')
    assert [code for code, _ in codes(repo)] == ["AC53"]


def test_triton_dali_examples_with_their_pipelines_as_dali_py(tmp_path):
    if not CORPUS.is_dir():
        pytest.skip(f"the real-world configs are not here ({CORPUS})")
    repos = []
    for i, file in enumerate(sorted(CORPUS.glob("triton-inference-server__dali_backend__*__config.pbtxt"))):
        text = file.read_text()
        if 'platform: "ensemble"' in text:
            continue
        name = file.name.split("__model_repository__")[1].removesuffix("__config.pbtxt")
        repos.append(tmp_path / str(i))  # one repository each: two are named model.dali
        model_dir = dali_model(repos[-1], name, text, "dali.py")
        for version in ("2", "3"):  # L0_many_versions asks for these
            (model_dir / version).mkdir()
            (model_dir / version / "dali.py").write_text(PIPELINE)
    assert len(repos) >= 8
    found = {(d.model, d.code) for d in validate_paths(repos).diagnostics if d.severity.value != "info"}
    assert not {code for _, code in found} & {"PB10", "IO02", "IO03", "BIO50"}, found
