"""tritonctl analyze on a whole repository: every model in name order under one time budget, the
ensemble tuned as a pipeline (its step within it), one repository report whose numbers are the per-model files', and
--resume after a SIGKILL measuring only what is missing. Real servers, real load, tiny models."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.analyze_models import FAST, FAST_ARGS, add_sub_ensemble, onnx_model
from helpers.cli_runner import cli
from tritonctl.analyzer.analyze import AnalyzeOptions
from tritonctl.analyzer.repository import repository_models, run_repository
from tritonctl.analyzer.search import AnalyzeError, SearchSpace

SPACE = SearchSpace(batch_sizes=(1, 8), queue_delays_us=(0,), instance_counts=(1,), concurrency=(2,))


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    onnx_model(repo, "beta", config="dynamic_batching { max_queue_delay_microseconds: 100 }")
    onnx_model(repo, "alpha")
    add_sub_ensemble(repo, "pipeline", "alpha")
    return repo


def test_every_model_tuned_in_order_and_summed_up_from_its_own_files(repo, tmp_path):
    out = tmp_path / "out"
    options = AnalyzeOptions(repository=repo, model="", output_dir=out, space=SPACE, engine="inprocess",
                             strategy="exhaustive", time_budget_s=120, **FAST)
    run = run_repository(options, repository_models(repo, None))
    assert [o.model for o in run.outcomes] == ["alpha", "beta", "pipeline"]
    document = json.loads((out / "repository.json").read_text())
    entries = {e["model"]: e for e in document["models"]}
    # The ensemble is tuned as a pipeline; its step alpha within it, not on its own as well.
    assert "tuned together with the other steps of pipeline 'pipeline'" in entries["alpha"]["skipped"]
    for model in ("beta", "pipeline"):
        summary = json.loads((out / model / "summary.json").read_text())
        entry = entries[model]
        assert entry["chosen"]["config_id"] == summary["best_config_id"]
        assert entry["chosen"]["throughput"] == round(summary["best"]["throughput"], 2)
        assert entry["default"]["config_id"] == summary["default_config_id"]
        assert entry["config_written"]
        assert 0 < entry["budget_s"] <= 120
    assert (out / "beta" / "config.pbtxt").is_file()
    assert (out / "pipeline" / "alpha" / "config.pbtxt").is_file()
    assert json.loads((out / "pipeline" / "summary.json").read_text())["pipeline"]["steps"] == ["alpha"]
    # The first model's unused time went to the second.
    assert entries["pipeline"]["budget_s"] > entries["beta"]["budget_s"]
    report = (out / "repository.md").read_text()
    assert "| beta |" in report and "| pipeline |" in report
    assert "| alpha | skipped: tuned together with the other steps of pipeline 'pipeline'" in report
    assert "[pipeline/report.html](pipeline/report.html)" in report


def test_the_time_budget_stops_the_search_and_still_chooses(repo, tmp_path):
    space = SearchSpace(batch_sizes=(1, 2, 4, 8), queue_delays_us=(0, 100, 2000), instance_counts=(1, 2),
                        concurrency=(1, 2))
    options = AnalyzeOptions(repository=repo, model="", output_dir=tmp_path / "out", space=space,
                             engine="inprocess", strategy="exhaustive", time_budget_s=12, **FAST)
    run = run_repository(options, ["alpha"])
    (outcome,) = run.outcomes
    meta = outcome.result.meta
    assert meta["out_of_time"] and meta["candidates_measured"] < meta["candidates_total"]
    assert any("of the 12 s budget) does not cover another config's sweep" in d for d in meta["decisions"])
    assert outcome.result.best is not None and (tmp_path / "out" / "alpha" / "config.pbtxt").is_file()
    # One sweep of two points may run past the deadline, no more (4 windows of 150 ms each at most).
    assert run.wall_s < 12 + 10


def test_resume_after_sigkill_measures_only_what_is_missing(repo, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tritonctl", "analyze", str(repo), "-o", str(out), "--models", "alpha,beta",
               "--strategy", "exhaustive", "--batch-sizes", "1,8", "--queue-delays", "0", "--instance-counts", "1",
               "--concurrency", "2", "--engine", "inprocess", *FAST_ARGS]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out / "alpha" / "summary.json").is_file() and time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    done = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    alpha = json.loads((out / "alpha" / "summary.json").read_text())
    assert alpha["points_measured"] == 0 and alpha["points_reused"] > 0  # replayed, not measured again
    beta = json.loads((out / "beta" / "summary.json").read_text())
    assert beta["best_config_id"] and not beta["interrupted"]
    models = [e["model"] for e in json.loads((out / "repository.json").read_text())["models"]]
    assert models == ["alpha", "beta"]


@pytest.mark.parametrize("args, fragment", [
    (["--models", "alpha,nope"], "--models: nope not in"),
    (["-m", "alpha", "--models", "alpha"], "not both"),
    (["--time-budget", "soon"], "--time-budget 'soon': give a duration such as 90s, 20m or 1h30m"),
])
def test_usage_errors(repo, tmp_path, capsys, args, fragment):
    code, _, stderr = cli(capsys, "analyze", str(repo), "-o", str(tmp_path / "out"), *args)
    assert code == 2 and fragment in stderr, stderr


def test_an_empty_repository_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalyzeError, match="holds no model directory"):
        repository_models(tmp_path / "empty", None)
