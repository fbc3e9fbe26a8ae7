"""tritonctl analyze under request-rate sweeps and replayed traces, with the queue policy searched,
rejected requests counted, and the report saying why the winner won. Real servers on loopback
(the bundled server in-process), a tiny ONNX model made in code, short windows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers.analyze_models import FAST as ANALYZE_FAST
from helpers.analyze_models import FAST_ARGS as ANALYZE_FAST_ARGS
from helpers.analyze_models import onnx_model
from helpers.cli_runner import cli
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.objective import Constraints
from tritonctl.analyzer.search import SearchSpace
from tritonctl.repo_schema.validate import validate_paths

FAST_ARGS = [*ANALYZE_FAST_ARGS, "--engine", "inprocess"]
FAST = {**ANALYZE_FAST, "engine": "inprocess"}
POLICY_CONFIG = """dynamic_batching {
  max_queue_delay_microseconds: 100
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 500000 max_queue_size: 16 }
}"""


def sweep_rows(out: Path) -> pd.DataFrame:
    frame = pd.read_csv(out / "measurements.csv")
    return frame[frame["repeat"] == 0]


def assert_why_matches_the_measurements(out: Path) -> dict:
    """Every number of the why-section is one of the measured sweep points."""
    summary = json.loads((out / "summary.json").read_text())
    why = summary["why"]
    rows = sweep_rows(out)

    def row_of(config_id: str, level: float) -> pd.Series:
        level_column = rows["concurrency"].where(rows["load"] == "concurrency", rows["request_rate"])
        match = rows[(rows["config_id"] == config_id) & (level_column == level)]
        assert len(match) == 1, (config_id, level)
        return match.iloc[0]

    winner = why["winner"]
    assert winner["config_id"] == summary["best_config_id"]
    mine = row_of(winner["config_id"], winner["level"])
    assert winner["throughput"] == pytest.approx(mine["throughput"], rel=1e-12)
    assert winner["p99_ms"] == pytest.approx(mine["p99_ms"], rel=1e-12)
    assert summary["best"]["throughput"] == pytest.approx(winner["throughput"], rel=1e-12)
    for knob in why["knobs"]:
        assert knob["status"] in ("measured", "measured elsewhere", "not measured") and knob["summary"]
        for change in knob["changes"]:
            other = row_of(change["config_id"], change["level"])
            assert change["throughput"] == pytest.approx(other["throughput"], rel=1e-12)
            assert change["p99_ms"] == pytest.approx(other["p99_ms"], rel=1e-12)
            assert change["reject_rate"] == pytest.approx(other["reject_rate"], abs=1e-12)
            base = winner if knob["status"] == "measured" else None
            if base is not None:
                assert change["value"] != knob["winner_value"]
                assert change["throughput_change"] == pytest.approx(other["throughput"] / mine["throughput"] - 1)
                assert change["p99_change_ms"] == pytest.approx(other["p99_ms"] - mine["p99_ms"])
    runner_up = why["runner_up"]
    if runner_up is not None:
        theirs = runner_up["sweep"]["runner_up"]
        assert theirs["throughput"] == pytest.approx(row_of(runner_up["config_id"], theirs["level"])["throughput"],
                                                     rel=1e-12)
        final = runner_up.get("final_round")
        if final:
            finalists = {f["config_id"]: f for f in summary["final_round"]["finalists"]}
            assert final["winner_throughput"] == finalists[winner["config_id"]]["throughput"]
            assert final["runner_up_throughput"] == finalists[runner_up["config_id"]]["throughput"]
    return summary


def test_request_rate_sweep_searches_the_queue_policy_and_writes_it(tmp_path, capsys):
    repo = tmp_path / "repo"
    model_dir = onnx_model(repo, config=POLICY_CONFIG)
    out = tmp_path / "out"
    code, stdout, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(out), "--batch-sizes", "8",
                               "--queue-delays", "100", "--instance-counts", "1", "--max-queue-sizes", "1,16",
                               "--queue-timeouts", "2000,500000", "--request-rate", "40,120", "--max-p99-ms", "500",
                               *FAST_ARGS, "--apply")
    assert code == 0, stderr
    assert "Why it won:" in stdout
    summary = assert_why_matches_the_measurements(out)
    assert summary["load"] == {"kind": "request_rate", "request_rates": [40.0, 120.0]}
    assert summary["search_space"]["max_queue_size"] == [1, 16]
    assert summary["search_space"]["queue_timeout_us"] == [2000, 500000]
    rows = sweep_rows(out)
    assert set(rows["load"]) == {"request_rate"} and set(rows["request_rate"]) <= {40.0, 120.0}
    assert (rows["concurrency"] == 0).all()
    # The model's own policy is read as its knobs' values: the default is a grid candidate, and the
    # smart search walked both queue knobs' lines from its start (the first value of each).
    assert summary["default_config_id"] == "b8-d100-i1-cpu-q16-t500000"
    measured = set(rows["config_id"])
    assert {"b8-d100-i1-cpu-q16-t500000", "b8-d100-i1-cpu-q1-t2000", "b8-d100-i1-cpu-q16-t2000"} <= measured
    assert any("explore max queue size" in d for d in summary["decisions"])
    assert any("explore queue timeout (us)" in d for d in summary["decisions"])
    assert {k["knob"] for k in summary["why"]["knobs"]} == {"max_queue_size", "queue_timeout_us"}
    # Every candidate carries a queue policy, so the written config does too, and it validates.
    text = (out / "config.pbtxt").read_text()
    assert "default_queue_policy {" in text and "max_queue_size: " in text
    assert "default_timeout_microseconds: " in text
    report = validate_paths([model_dir])
    assert report.errors == 0, [d.message for d in report.diagnostics]
    html = out / "report.html"
    if html.exists():  # the load is named as a rate, never as a concurrency of 0
        page = html.read_text()
        assert 'id="why"' in page and " req/s" in page and "concurrency 0" not in page


def test_a_config_that_rejects_requests_is_judged_by_what_it_served(tmp_path):
    onnx_model(tmp_path / "repo", config="")
    out = tmp_path / "out"
    # One instance, batches of 1, 8 requests in flight: a queue of 1 must turn most of them away.
    space = SearchSpace(batch_sizes=(1,), queue_delays_us=(0,), instance_counts=(1,), max_queue_sizes=(0, 1),
                        concurrency=(8,))
    options = AnalyzeOptions(tmp_path / "repo", "add_sub", out, space=space, strategy="exhaustive",
                             constraints=Constraints(max_p99_ms=5000.0), **FAST)
    result = run_analyze(options)
    rows = sweep_rows(out).set_index("config_id")
    bounded = rows.loc["b1-d0-i1-cpu-q1"]
    assert bounded["error_count"] > 0 and 0 < bounded["reject_rate"] < 1
    assert bounded["reject_rate"] == pytest.approx(
        bounded["error_count"] / (bounded["error_count"] + bounded["request_count"]))
    assert not bounded["meets_constraints"]  # its p99 is fine, but it turned requests away
    assert rows.loc["b1-d0-i1-cpu", "reject_rate"] == 0 and rows.loc["b1-d0-i1-cpu", "meets_constraints"]
    assert result.best is not None and result.best.config_id != "b1-d0-i1-cpu-q1"
    summary = json.loads((out / "summary.json").read_text())
    queue = next(k for k in summary["why"]["knobs"] if k["knob"] == "max_queue_size")
    if summary["best_config_id"] == "b1-d0-i1-cpu":  # the default may win instead; then it is measured elsewhere
        assert queue["status"] == "measured" and queue["changes"][0]["config_id"] == "b1-d0-i1-cpu-q1"
        assert "misses the constraints" in queue["summary"] and "rejected" in queue["summary"]

    # Allowing rejections changes the verdict on the same points (nothing is measured again).
    allowed = bounded["reject_rate"] + 0.01
    again = run_analyze(AnalyzeOptions(tmp_path / "repo", "add_sub", out, space=space, strategy="exhaustive",
                                       constraints=Constraints(max_p99_ms=5000.0, max_reject_rate=allowed),
                                       resume=True, **FAST))
    bounded_again = next(r for r in again.results if r.config_id == "b1-d0-i1-cpu-q1")
    assert bounded_again.best is not None and again.meta["constraints"]["max_reject_rate"] == allowed
    assert again.reused > 0 and len(sweep_rows(out)) == len(rows)  # no sweep point measured again


def test_a_replayed_trace_gives_results_and_a_valid_config(tmp_path, capsys):
    repo = tmp_path / "repo"
    model_dir = onnx_model(repo, config="dynamic_batching { max_queue_delay_microseconds: 50000 }")
    trace = tmp_path / "trace.txt"
    trace.write_text("5000\n15000\n\n10000\n")  # 3 sends per 30 ms: 100/s on average
    out = tmp_path / "out"
    code, stdout, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(out), "--strategy",
                               "exhaustive", "--batch-sizes", "1,8", "--queue-delays", "0", "--instance-counts", "1",
                               "--request-intervals", str(trace), *FAST_ARGS)
    assert code == 0, stderr
    summary = assert_why_matches_the_measurements(out)
    assert summary["load"] == {"kind": "request_intervals", "file": str(trace), "count": 3, "total_us": 30000,
                               "mean_rate_per_s": 100.0}
    rows = sweep_rows(out)
    assert set(rows["load"]) == {"request_intervals"} and set(rows["request_rate"]) == {100.0}
    assert rows.groupby("config_id").size().max() == 1  # the trace is one load level
    assert (rows["throughput"] > 0).all() and "the trace (mean 100 req/s)" in stdout
    knobs = {k["knob"]: k for k in summary["why"]["knobs"]}
    assert set(knobs) == {"max_batch_size", "max_queue_delay_us"}
    assert all(k["status"] != "not measured" or not k["changes"] for k in knobs.values())
    written = tmp_path / "written" / "add_sub"
    written.mkdir(parents=True)
    for path in model_dir.rglob("*"):
        if path.is_file() and path.name != "config.pbtxt":
            target = written / path.relative_to(model_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (written / "config.pbtxt").write_text((out / "config.pbtxt").read_text())
    code, _, stderr = cli(capsys, "validate", str(written))
    assert code == 0, stderr
    # Resumed with another trace, the checkpoint refuses to mix the two loads.
    trace.write_text("1000\n")
    code, _, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(out), "--strategy", "exhaustive",
                          "--batch-sizes", "1,8", "--queue-delays", "0", "--instance-counts", "1",
                          "--request-intervals", str(trace), "--resume", *FAST_ARGS)
    assert code == 2 and "request_intervals" in stderr and "other settings" in stderr


@pytest.mark.parametrize("args, fragment", [
    (["--request-intervals", "BAD"], "BAD:2: '1.5' is not a whole number of microseconds"),
    (["--request-intervals", "EMPTY"], "EMPTY: the file has no intervals"),
    (["--request-intervals", "missing.txt"], "--request-intervals missing.txt: no such file"),
    (["--concurrency", "1:4", "--request-rate", "50"], "give one kind of load: --concurrency or --request-rate, "
                                                       "not both"),
    (["--request-rate", "50", "--request-intervals", "BAD"], "--request-rate or --request-intervals, not both"),
    (["--request-rate", "0,50"], "--request-rate '0,50': give positive rates"),
    (["--request-rate", "fast"], "--request-rate 'fast': expected requests per second"),
    (["--max-queue-sizes", "-1"], "--max-queue-sizes '-1': values must be at least 0"),
    (["--queue-timeouts", "1ms"], "--queue-timeouts '1ms': expected whole numbers"),
    (["--max-reject-rate", "150%"], "--max-reject-rate '150%': give a share of the requests from 0 up to 1"),
])
def test_bad_load_and_queue_options(tmp_path, capsys, args, fragment):
    onnx_model(tmp_path / "repo", config="")
    (tmp_path / "BAD").write_text("1000\n1.5\n")
    (tmp_path / "EMPTY").write_text("\n\n")
    args = [str(tmp_path / a) if a in ("BAD", "EMPTY") else a for a in args]
    fragment = fragment.replace("BAD", str(tmp_path / "BAD")).replace("EMPTY", str(tmp_path / "EMPTY"))
    code, _, stderr = cli(capsys, "analyze", str(tmp_path / "repo"), "-m", "add_sub", "-o", str(tmp_path / "out"),
                          *args)
    assert code == 2 and fragment in " ".join(stderr.split()), stderr
    assert not (tmp_path / "out").exists()  # refused before anything was started or written
