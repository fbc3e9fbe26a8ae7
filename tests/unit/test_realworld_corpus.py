"""`tritonctl validate` on config.pbtxt files nobody on this project wrote, each linted
alone as a CI job does: no model files, no sibling models, no GPU given.

The corpus lies beside the checkout (../shared/realworld_configs, provenance in its
manifest.json); TRITONCTL_REALWORLD_CONFIGS points elsewhere. Every config that real
Triton loads exits 0 without --strict; every config Triton's own tests expect to fail
exits 1. The exceptions are listed below, each with its reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.cli_runner import cli

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("TRITONCTL_REALWORLD_CONFIGS") or ROOT.parent / "shared" / "realworld_configs")
pytestmark = pytest.mark.skipif(not (CORPUS / "manifest.json").is_file(),
                                reason=f"no real-world config corpus at {CORPUS} (../shared/realworld_configs)")

# Broken in their own repository: a correct linter reports them (code -> why).
BROKEN_UPSTREAM = {
    "triton-inference-server__model_navigator__tests__assets__configs__full_config.pbtxt": (
        {"PB01", "DB01", "DB04", "DB05"},
        "a parser test fixture of Model Navigator, never loaded: platform 'tensorrt', preferred batch 32 above "
        "max_batch_size 16, preserve_ordering with priority levels and DELAY"),
    "triton-inference-server__tutorials__Feature_Guide__Data_Pipelines__model_repository__ensemble_model__1__config.pbtxt": (
        {"PB05"}, "the tutorial's ensemble has ensemble_scheduling but no platform: \"ensemble\""),
}
# Templates: Triton loads them only after tools/fill_template.py. Unfilled, each placeholder
# in a typed field is one TXT11 error and nothing else fails; filled as their READMEs do, clean.
TEMPLATES = {
    "triton-inference-server__tensorrtllm_backend__all_models__inflight_batcher_llm__preprocessing__config.pbtxt":
        {"triton_max_batch_size": "64", "preprocessing_instance_count": "1", "tokenizer_dir": "/models/tokenizer"},
    "triton-inference-server__tensorrtllm_backend__all_models__inflight_batcher_llm__tensorrt_llm__config.pbtxt":
        {"triton_max_batch_size": "64", "decoupled_mode": "true", "max_queue_delay_microseconds": "0",
         "engine_dir": "/engines/llama", "batching_strategy": "inflight_fused_batching"},
    "k2-fsa__sherpa__triton__whisper__model_repo_whisper_trtllm__infer_bls__config.pbtxt":
        {"triton_max_batch_size": "8", "max_queue_delay_microseconds": "100"},
    "k2-fsa__sherpa__triton__whisper__model_repo_whisper_trtllm__whisper__config.pbtxt":
        {"triton_max_batch_size": "8", "max_queue_delay_microseconds": "100"},
}
# Configs that name no backend and leave out dims or data types: Triton takes the backend from
# the model directory (its name model.dali, or 1/model.py) and that backend completes them
# (DALI from its pipeline, the Python model's auto_complete_config). Alone they are IO02/IO03;
# in a model directory with a pipeline or model.py of that kind they are clean.
NEEDS_MODEL_DIR = {
    "triton-inference-server__dali_backend__qa__L0_unbatched_model__model_repository__model.dali__config.pbtxt":
        ("model.dali", "1/dali.py", "# the @autoserialize DALI pipeline\n"),
    "triton-inference-server__server__qa__L0_model_config__autofill_noplatform_success__python__incomplete_output"
    "__config.pbtxt": ("incomplete_output", "1/model.py", """
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for kind in ("input", "output"):
            for i in range(2):
                name = f"{kind.upper()}{i}"
                getattr(config, f"add_{kind}")({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        return config

    def execute(self, requests):
        return []
"""),
}
# Refused by Triton for what is in their model files, which the corpus does not hold.
NEEDS_MODEL_FILES = {
    "triton-inference-server__dali_backend__qa__L0_config_validation__model_repository__model1_gpu_invalid_i_type"
    "__config.pbtxt": "input types differ from its DALI pipeline (1/dali.py)",
    "triton-inference-server__dali_backend__qa__L0_config_validation__model_repository__model2_gpu_invalid_o_ndim"
    "__config.pbtxt": "an output's rank differs from its DALI pipeline (1/dali.py)",
    "triton-inference-server__dali_backend__qa__L0_config_validation__model_repository__model4_cpu_invalid_missing"
    "_output__config.pbtxt": "its DALI pipeline (1/dali.py) has an output the config does not list",
    "triton-inference-server__dali_backend__qa__L0_config_validation__model_repository__model5_invalid_default"
    "_model_filename__config.pbtxt": "the file default_model_filename names is not in its version directory",
}
# Refused for the server's GPUs: checked for the server Triton's QA runs them on.
NEEDS_GPUS = {
    "triton-inference-server__server__qa__L0_model_config__noautofill_platform__invalid_gpu__config.pbtxt": "1",
}


def _files(kind: str) -> list[Path]:
    return sorted((CORPUS / kind).glob("*.pbtxt")) if CORPUS.is_dir() else []


def _validate(capsys, monkeypatch, path: Path, *args: str) -> tuple[int, list[dict]]:
    monkeypatch.delenv("TRITONCTL_ASSUME_GPUS", raising=False)
    code, out, err = cli(capsys, "validate", str(path), "--format", "json", *args)
    assert code in (0, 1), err
    return code, json.loads(out)["diagnostics"]


def _errors(found: list[dict]) -> list[tuple]:
    return [(d["code"], d["line"], d["message"]) for d in found if d["severity"] == "error"]


LOADING = [p for p in _files("corpus") + _files("corpus_autofill_python")
           if p.name not in BROKEN_UPSTREAM and p.name not in TEMPLATES and p.name not in NEEDS_MODEL_DIR]


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in LOADING])
def test_config_triton_loads_exits_0(path, capsys, monkeypatch):
    code, found = _validate(capsys, monkeypatch, path)
    assert code == 0, _errors(found)


@pytest.mark.parametrize("name", sorted(NEEDS_MODEL_DIR))
def test_config_completed_by_the_backend_its_model_directory_shows(name, capsys, monkeypatch, tmp_path):
    path = next(p for kind in ("corpus", "corpus_autofill_python") for p in [CORPUS / kind / name] if p.is_file())
    code, found = _validate(capsys, monkeypatch, path)
    assert code == 1 and {c for c, _, _ in _errors(found)} <= {"IO02", "IO03"}, _errors(found)
    directory, file, text = NEEDS_MODEL_DIR[name]
    model_dir = tmp_path / "repo" / directory
    (model_dir / file).parent.mkdir(parents=True)
    (model_dir / file).write_text(text)
    (model_dir / "config.pbtxt").write_text(path.read_text())
    code, found = _validate(capsys, monkeypatch, model_dir)
    assert code == 0, _errors(found)


@pytest.mark.parametrize("name", sorted(BROKEN_UPSTREAM))
def test_config_broken_upstream_is_reported(name, capsys, monkeypatch):
    codes, why = BROKEN_UPSTREAM[name]
    code, found = _validate(capsys, monkeypatch, CORPUS / "corpus" / name)
    assert code == 1 and {c for c, _, _ in _errors(found)} == codes, (why, _errors(found))


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_fails_on_its_placeholders_only_and_passes_filled(name, capsys, monkeypatch):
    path = CORPUS / "corpus" / name
    code, found = _validate(capsys, monkeypatch, path)
    assert code == 1 and {c for c, _, _ in _errors(found)} == {"TXT11"}
    lines = path.read_text().splitlines()
    for diagnostic in found:
        if diagnostic["code"] == "TXT11":
            assert lines[diagnostic["line"] - 1][diagnostic["column"] - 1:].startswith("$")
    fills = [arg for key, value in TEMPLATES[name].items() for arg in ("--set", f"{key}={value}")]
    code, found = _validate(capsys, monkeypatch, path, *fills)
    assert code == 0, _errors(found)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in _files("corpus_negative")
                                  if p.name not in NEEDS_MODEL_FILES])
def test_config_triton_refuses_exits_1(path, capsys, monkeypatch):
    gpus = ("--gpus", NEEDS_GPUS[path.name]) if path.name in NEEDS_GPUS else ()
    code, found = _validate(capsys, monkeypatch, path, *gpus)
    assert code == 1, found


@pytest.mark.parametrize("name", sorted(NEEDS_MODEL_FILES))
def test_refusal_that_needs_the_model_files_is_not_guessed(name, capsys, monkeypatch):
    # Alone, these configs are fine: what Triton refuses is in the files beside them.
    code, found = _validate(capsys, monkeypatch, CORPUS / "corpus_negative" / name)
    assert code == 0 and "REPO54" in {d["code"] for d in found}, (NEEDS_MODEL_FILES[name], found)


def test_the_lists_name_files_of_the_corpus():
    names = {p.name for kind in ("corpus", "corpus_negative", "corpus_autofill_python") for p in _files(kind)}
    listed = set(BROKEN_UPSTREAM) | set(TEMPLATES) | set(NEEDS_MODEL_DIR) | set(NEEDS_MODEL_FILES) | \
        set(NEEDS_GPUS)
    assert listed <= names, listed - names
    assert len(_files("corpus")) >= 150 and len(_files("corpus_negative")) >= 60


def test_gpu_dependent_configs_pass_without_gpus_and_fail_on_a_gpu_less_server(capsys, monkeypatch):
    """The configs that failed on a GPU-less runner: KIND_GPU, gpu ids, TensorRT."""
    gpu_configs = [p for p in _files("corpus") if p.name not in BROKEN_UPSTREAM and p.name not in TEMPLATES
                   and p.name not in NEEDS_MODEL_DIR and ("KIND_GPU" in p.read_text() or "gpus:" in p.read_text())]
    assert len(gpu_configs) >= 20
    for path in gpu_configs:
        code, found = _validate(capsys, monkeypatch, path)
        assert code == 0 and "IG54" in {d["code"] for d in found}, path.name
    failing = [p.name for p in gpu_configs if _validate(capsys, monkeypatch, p, "--gpus", "0")[0] == 1]
    assert len(failing) >= 20
