"""tritonctl analyze on a pipeline: an ensemble and a BLS Python model, each running two ONNX MLPs
(``pre`` then ``post``), their steps' configs searched together and measured on the pipeline's own
endpoint with the bundled server. Real servers, real load, short windows, small spaces."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.analyze_models import FAST, FAST_ARGS, onnx_model, pipeline_repository
from helpers.cli_runner import cli
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.pipeline_space import PipelineKnobs, ensemble_error, load_pipeline, pipeline_kind
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError, Knobs, SearchSpace, validation_error

# Max batch sizes 1 and 4 only: the ensemble (max_batch_size 8) refuses both in its steps (ENS13).
SPACE = SearchSpace(batch_sizes=(1, 4), queue_delays_us=(0,), instance_counts=(1, 2), concurrency=(1, 4))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return pipeline_repository(tmp_path_factory.mktemp("pipeline") / "repo")


def _run(repo: Path, out: Path, model: str, space: SearchSpace = SPACE, **extra):
    options = AnalyzeOptions(repository=repo, model=model, output_dir=out, space=space, engine="inprocess",
                             **FAST, **extra)
    return run_analyze(options)


def test_ensemble_steps_tuned_together_differ_from_each_steps_own_best(repo, tmp_path):
    """pre alone: every candidate but its default (max batch 8, no batcher) has max batch 1 or 4,
    and batching beats the default, so its own best has max batch 4 (or 1). In the ensemble
    (max_batch_size 8) a step must take batches of 8: the joint search keeps pre and post at 8,
    and pre's own best is a config the ensemble does not load."""
    # At concurrency 4 only, in longer windows than FAST: on a loaded machine 150 ms windows let the
    # unbatched default tie with batching often enough to keep it.
    alone = run_analyze(AnalyzeOptions(repository=repo, model="pre", output_dir=tmp_path / "pre",
                                       space=replace(SPACE, concurrency=(4,)), engine="inprocess",
                                       **{**FAST, "measurement_interval_ms": 300.0}))
    own_best = alone.best.knobs
    assert alone.best.config_id != "default" and own_best.max_batch_size in (1, 4)
    own_text = (tmp_path / "pre" / "config.pbtxt").read_text()
    assert validation_error(repo / "pre", own_text) is None  # fine on its own ...
    assert ensemble_error(repo, "pipe", "pre", own_text).startswith("ENS13")  # ... refused in the pipeline

    joint = _run(repo, tmp_path / "pipe", "pipe")
    summary = json.loads((tmp_path / "pipe" / "summary.json").read_text())
    pipeline = summary["pipeline"]
    assert pipeline["kind"] == "ensemble" and pipeline["steps"] == ["pre", "post"]
    assert any("pre b4-d0-i1-cpu" in d and "ENS13" in d for d in pipeline["dropped"])
    assert isinstance(joint.best.knobs, PipelineKnobs)
    chosen_pre = joint.best.knobs.step("pre")
    assert chosen_pre.max_batch_size == 8 and chosen_pre != own_best
    written = (tmp_path / "pipe" / "pre" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in written and ensemble_error(repo, "pipe", "pre", written) is None
    assert "Step 'pre' of the ensemble 'pipe'" in written and "Chosen by tritonctl analyze" in written
    assert (tmp_path / "pipe" / "pipe" / "config.pbtxt").read_text() == (repo / "pipe" / "config.pbtxt").read_text()
    # Each step's share of the latency, from the statistics of the measured run.
    shares = pipeline["latency_share"]["chosen"]
    assert set(shares) == {"pre", "post", "pipeline_us"}
    for step in ("pre", "post"):
        assert shares[step]["compute_us"] > 0 and 0 < shares[step]["share"] <= 1
    assert summary["best"]["steps"] == shares
    assert any(d.startswith("latency share at the chosen config") for d in summary["decisions"])


def test_bls_model_steps_searched_together_at_its_endpoint(repo, tmp_path):
    """The BLS model names its steps in its config; no ensemble rule holds them, so the joint search
    walks both steps' batch sizes and instance counts, and writes a config for each step."""
    space = SearchSpace(batch_sizes=(1, 4), queue_delays_us=(0, 500), instance_counts=(1,), concurrency=(1, 4))
    result = _run(repo, tmp_path / "out", "bls", space, budget=6)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["pipeline"]["kind"] == "bls" and summary["pipeline"]["steps"] == ["pre", "post"]
    explored = " ".join(summary["decisions"])
    assert "pre: max batch size" in explored and "post: max batch size" in explored
    assert summary["final_round"] is not None and result.best is not None
    chosen = summary["pipeline"]["chosen"]
    for step in ("pre", "post"):
        text = (tmp_path / "out" / step / "config.pbtxt").read_text()
        assert validation_error(repo / step, text) is None
        assert chosen[step] in text or chosen[step] == "default"
    assert (tmp_path / "out" / "bls" / "config.pbtxt").read_text() == (repo / "bls" / "config.pbtxt").read_text()
    frame = result.frame
    assert {"pre.max_batch_size", "post.max_batch_size", "pre.share", "post.share"} <= set(frame.columns)
    assert (frame["pre.share"] > 0).all() and (frame["post.share"] > 0).all()
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="pipeline"' in html and "Python model calling through BLS" in html
    assert html.count("% (queue ") >= 2  # each step's share at the chosen config


def test_resume_measures_nothing_again(repo, tmp_path):
    """--composing-models tunes a subset of an ensemble's steps; the others run with their own configs."""
    space = SearchSpace(batch_sizes=(8,), queue_delays_us=(0, 500), instance_counts=(1,), concurrency=(2,))
    first = _run(repo, tmp_path / "out", "pipe", space, composing_models=("pre",))
    again = _run(repo, tmp_path / "out", "pipe", space, composing_models=("pre",), resume=True)
    assert again.measured == 0 and again.reused == first.measured + first.reused
    assert again.best.config_id == first.best.config_id
    assert not (tmp_path / "out" / "post").exists()  # only the named step is tuned


def test_exhaustive_measures_the_whole_product(repo, tmp_path):
    space = SearchSpace(batch_sizes=(8,), queue_delays_us=(0, 500), instance_counts=(1,), concurrency=(2,))
    result = _run(repo, tmp_path / "out", "pipe", space, strategy="exhaustive")
    measured = {r.config_id for r in result.results}
    assert result.meta["candidates_total"] == 5 and len(measured) == 5  # 2 x 2 and the default
    assert "pre:b8-d0-i1-cpu+post:b8-d500-i1-cpu" in measured
    assert result.meta["final_round"] is not None


def test_cli_composing_models(repo, tmp_path, capsys):
    code, out, err = cli(capsys, "analyze", str(repo), "-m", "bls", "--composing-models", "pre,post", "-o", str(tmp_path / "out"),
                 "--batch-sizes", "4", "--queue-delays", "0", "--instance-counts", "1", "--concurrency", "2",
                 "--engine", "inprocess", *FAST_ARGS)
    assert code == 0, err
    assert "latency share at the chosen config" in out + err
    assert (tmp_path / "out" / "post" / "config.pbtxt").is_file()
    code, out, err = cli(capsys, "analyze", str(repo), "--composing-models", "pre")
    assert code == 2 and "give --model too" in err


@pytest.mark.parametrize("model, composing, message", [
    ("pre", ("post",), "neither an ensemble nor a Python model"),
    ("pipe", ("other",), "other is not a step of ensemble 'pipe' (its steps: pre, post)"),
    ("bls", ("missing",), "composing model 'missing' of 'bls' cannot be tuned"),
    ("bls", ("pipe",), "composing model 'pipe' of 'bls' cannot be tuned"),
    ("bls", ("bls",), "cannot be a composing model of itself"),
])
def test_bad_pipelines_are_refused_with_the_reason(repo, model, composing, message):
    with pytest.raises(AnalyzeError, match=re.escape(message)):
        load_pipeline(repo, model, composing, SPACE)


def test_a_python_model_without_named_steps_is_one_model(repo, tmp_path):
    onnx_model(tmp_path, "plain")
    assert pipeline_kind(tmp_path, "plain") is None
    assert pipeline_kind(repo, "bls") == "bls" and pipeline_kind(repo, "pipe") == "ensemble"


def test_pipeline_points_round_trip_through_the_checkpoint_record():
    knobs = PipelineKnobs(("pre", "post"), (Knobs(8, 500, 2), Knobs(0, 0, 1, dynamic_batching=False)))
    point = Point("x", "hash", knobs, False, 4, "explore", throughput=10.0,
                  steps={"pre": {"share": 0.4}, "pipeline_us": 900.0})
    again = Point.from_record(json.loads(json.dumps(point.to_record())))
    assert again.knobs == knobs and again.steps == point.steps
    assert knobs.instance_count == 3 and knobs.resources == (3, 8, 500, 0)
    single = Point("y", "hash", Knobs(4), False, 1, "explore")
    assert "steps" not in single.to_record() and Point.from_record(single.to_record()).knobs == Knobs(4)
