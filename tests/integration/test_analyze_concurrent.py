"""tritonctl analyze --concurrent: two models tuned alone, then combinations of their best configs
loaded together into one server and measured under load on both at once; the chosen combination
is the max-min of the models' shares, its configs are written and validate, and --resume measures
no combination twice. Real servers, real load, tiny models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.analyze_models import FAST_ARGS as ANALYZE_FAST_ARGS
from helpers.analyze_models import onnx_model
from helpers.cli_runner import cli
from tritonctl.analyzer.objective import NOISE

FAST_ARGS = [*ANALYZE_FAST_ARGS, "--engine", "inprocess", "--strategy", "exhaustive",
             "--batch-sizes", "1,8", "--queue-delays", "0", "--instance-counts", "1", "--concurrency", "2"]


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    onnx_model(repo, "alpha")
    onnx_model(repo, "beta", config="dynamic_batching { max_queue_delay_microseconds: 100 }")
    return repo


@pytest.mark.slow
def test_two_models_sharing_a_server_get_a_combination_whose_configs_validate(repo, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "analyze", str(repo), "--models", "alpha,beta", "--concurrent", "-o", str(out),
                            *FAST_ARGS)
    assert code == 0, err
    document = json.loads((out / "concurrent" / "concurrent.json").read_text())
    combos = document["combinations"]
    # Each model's own choice together first, then every other pairing of the two best configs.
    assert combos[0]["own_choices"] and len(combos) == len({c["id"] for c in combos}) >= 2
    for combo in combos:
        assert [m["model"] for m in combo["models"]] == ["alpha", "beta"]
        for m in combo["models"]:
            assert m["throughput"] > 0 and m["share"] == pytest.approx(m["throughput"] / m["reference"]["throughput"],
                                                                       rel=1e-3)
    # The chosen one: no combination meeting the constraints keeps its worst model's share higher
    # beyond noise.
    chosen = next(c for c in combos if c["id"] == document["chosen"])
    assert chosen["meets_constraints"]
    assert chosen["min_share"] >= max(c["min_share"] for c in combos if c["meets_constraints"]) * (1 - NOISE) - 1e-4
    summary = {m: json.loads((out / m / "summary.json").read_text()) for m in ("alpha", "beta")}
    assert [m["config_id"] for m in combos[0]["models"]] == [summary[m]["best_config_id"] for m in ("alpha", "beta")]
    # The chosen configs are written and validate in the repository.
    deployed = tmp_path / "deployed"
    shutil.copytree(repo, deployed)
    for m in chosen["models"]:
        text = (out / "concurrent" / m["model"] / "config.pbtxt").read_text()
        assert "Chosen by tritonctl analyze --concurrent" in text
        (deployed / m["model"] / "config.pbtxt").write_text(text)
    code, _, err = cli(capsys, "validate", str(deployed))
    assert code == 0, err
    assert "analyze --concurrent: the models sharing one server" in stdout
    # --resume: the models' runs and the combinations are all replayed, nothing measured again.
    lines = (out / "concurrent" / "measurements.jsonl").read_text().splitlines()
    code, _, err = cli(capsys, "analyze", str(repo), "--models", "alpha,beta", "--concurrent", "-o", str(out),
                       "--resume", *FAST_ARGS)
    assert code == 0, err
    assert (out / "concurrent" / "measurements.jsonl").read_text().splitlines() == lines
    assert json.loads((out / "concurrent" / "concurrent.json").read_text())["chosen"] == document["chosen"]


@pytest.mark.parametrize("args, message", [
    (["--model", "alpha"], "--concurrent measures several models together: give --models a,b"),
    (["--models", "alpha"], "--concurrent measures models sharing one server: give at least two"),
    (["--ray", "127.0.0.1:1"], "--concurrent measures the models together on one server, and --ray tunes them"),
])
def test_concurrent_refuses_what_it_cannot_measure(repo, tmp_path, capsys, args, message):
    code, _, err = cli(capsys, "analyze", str(repo), "--concurrent", "-o", str(tmp_path / "out"), *args)
    assert code == 2 and message in " ".join(err.split())
