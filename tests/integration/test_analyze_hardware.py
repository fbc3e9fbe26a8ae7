"""Every point carries the fingerprint of the machine that measured it, and a run never ranks
points of different hardware together: resuming a run on other hardware (here: the same machine
labelled otherwise with TRITONCTL_HARDWARE_TAG) measures everything again and judges only its own
points, while the checkpoint keeps both machines' points."""

from __future__ import annotations

import pandas as pd

from helpers.analyze_models import FAST, onnx_model
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.checkpoint import CHECKPOINT_NAME, read
from tritonctl.analyzer.hardware import TAG_ENV, fingerprint
from tritonctl.analyzer.search import SearchSpace

SPACE = SearchSpace(batch_sizes=(1, 8), queue_delays_us=(0,), instance_counts=(1,), concurrency=(2,))


def test_a_run_resumed_on_other_hardware_measures_again_and_compares_only_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv(TAG_ENV, raising=False)
    onnx_model(tmp_path / "repo", "alpha")
    options = AnalyzeOptions(repository=tmp_path / "repo", model="alpha", output_dir=tmp_path / "out", space=SPACE,
                             engine="inprocess", strategy="exhaustive", **FAST)
    first = run_analyze(options)
    here = fingerprint()["id"]
    assert first.meta["hardware"]["id"] == here and first.measured > 0
    monkeypatch.setenv(TAG_ENV, "other-node")
    there = fingerprint()["id"]
    assert there != here
    again = run_analyze(options.__class__(**{**options.__dict__, "resume": True}))
    assert again.reused == 0 and again.measured > 0  # how many points a sweep takes depends on the load
    assert again.meta["hardware"]["id"] == there and again.meta["hardware"]["tag"] == "other-node"
    frame = pd.read_csv(tmp_path / "out" / "measurements.csv")
    assert set(frame["hardware"]) == {there}  # the tables and the choice: this hardware's points only
    _, points, _ = read(tmp_path / "out" / CHECKPOINT_NAME)
    assert {p.hardware for p in points} == {here, there}
    # Back on the first machine, its own points are found again: nothing is measured.
    monkeypatch.delenv(TAG_ENV)
    back = run_analyze(options.__class__(**{**options.__dict__, "resume": True}))
    assert back.measured == 0 and back.reused == first.measured + first.reused
