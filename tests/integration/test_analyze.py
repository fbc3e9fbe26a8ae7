"""tritonctl analyze end to end on a tiny ONNX model: real servers on loopback, real load, real files.

Windows are short (150 ms, 50 % stability) and spaces have 2-4 configs, so each run takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from helpers.analyze_models import FAST, FAST_ARGS, onnx_model
from tritonctl.analyzer.analyze import AnalyzeOptions, Reporter, run_analyze
from tritonctl.analyzer.objective import Constraints
from tritonctl.analyzer.results import COLUMNS
from tritonctl.optional import unavailable
from tritonctl.analyzer.search import AnalyzeError, SearchSpace
from helpers.cli_runner import cli
from tritonctl.repo_schema.validate import validate_paths
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

DEFAULT_CONFIG = "dynamic_batching { max_queue_delay_microseconds: 100 }"
SPACE = SearchSpace(batch_sizes=(1, 8), queue_delays_us=(0, 2000), instance_counts=(1,), concurrency=(1, 2, 4))


@pytest.fixture
def repo(tmp_path) -> Path:
    onnx_model(tmp_path / "repo", config=DEFAULT_CONFIG)
    return tmp_path / "repo"


def options(repo: Path, out: Path, **changes) -> AnalyzeOptions:
    values = {"repository": repo, "model": "add_sub", "space": SPACE, "output_dir": out, "engine": "inprocess",
              **FAST, **changes}
    return AnalyzeOptions(**values)


def checkpoint_points(out: Path) -> list[dict]:
    lines = (out / "measurements.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip() and json.loads(line)["kind"] == "point"]


def test_exhaustive_picks_the_best_measured_config_and_smart_replays_it(repo, tmp_path):
    out = tmp_path / "out"
    limit = Constraints(max_p99_ms=50.0)
    result = run_analyze(options(repo, out, strategy="exhaustive", constraints=limit))
    assert not result.interrupted and result.reused == 0
    assert result.meta["candidates_total"] == result.meta["candidates_measured"] == 4  # default + 3 in the grid
    frame = pd.read_csv(out / "measurements.csv")
    assert tuple(frame.columns[:len(COLUMNS)]) == COLUMNS and len(frame) == result.measured
    if unavailable("pyarrow") is None:  # else the run says why it left it out (unit/analyzer/test_results_files.py)
        assert pd.read_parquet(out / "measurements.parquet").equals(result.frame)
    # "load": the load check, when another load level of the chosen config came within noise of its best.
    load_check = result.meta["final_round"]["load_check"]
    assert set(frame["stage"]) == {"baseline", "exhaustive", "final"} | ({"load"} if load_check else set())
    assert frame["is_default"].any()
    assert (frame["avg_batch_size"] >= 1).all() and (frame["compute_us"] > 0).all()
    assert (frame["throughput_spread"] >= 0).all() and (frame.loc[frame["stage"] == "final", "repeat"] >= 1).all()
    passing = frame[frame["meets_constraints"]]
    assert (passing["p99_ms"] <= 50.0).all()
    # The choice comes from the final round: the best three configs, and the default, measured again
    # head to head.
    final = result.meta["final_round"]
    finalists = [f["config_id"] for f in final["finalists"]]
    assert len(finalists) in (3, 4) and final["chosen"] == result.best.config_id in finalists
    assert result.meta["default_config_id"] in finalists or not result.default.best
    rounds = frame[frame["stage"] == "final"].groupby("config_id").size()
    assert set(rounds.index) == set(finalists) and (rounds >= 3).all()
    assert final["runner_up"] in finalists and isinstance(final["beyond_noise"], bool)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_config_id"] == result.best.config_id and summary["points_measured"] == result.measured
    assert summary["final_round"]["verdict"] == final["verdict"]
    assert "against the runner-up" in final["verdict"] or final["verdict"].startswith("the default config is kept")
    text = (out / "config.pbtxt").read_text()
    assert text.startswith("# Chosen by tritonctl analyze") and f"Measured as {result.best.config_id}:" in text
    assert "# Final round, " in text and final["verdict"][:40] in text.replace("\n# ", " ")
    assert ("# Load level: " in text) == (load_check is not None)
    report = out / "report.html"
    if report.exists():  # the analyze extra installs the report's plotting library
        html = report.read_text()
        assert result.best.config_id in html and "Plotly" in html and 'id="final-round"' in html

    # smart over the same space, resumed from the same output: it replays its decisions on the
    # recorded points, so it measures no sweep point again (only re-measurements exhaustive did not make).
    replay = run_analyze(options(repo, out, strategy="smart", constraints=limit, resume=True))
    assert replay.reused > 0 and replay.meta["decisions"][0].startswith("baseline: the default config (")
    new = checkpoint_points(out)[result.measured:]
    assert len(new) == replay.measured and all(p["repeat"] >= 1 for p in new)
    # Resumed once more, the same smart run measures nothing at all and chooses the same config.
    again = run_analyze(options(repo, out, strategy="smart", constraints=limit, resume=True))
    assert again.measured == 0 and again.best.config_id == replay.best.config_id
    assert again.meta["decisions"] == replay.meta["decisions"]
    keys = [(p["config_id"], p["concurrency"], p["repeat"]) for p in checkpoint_points(out)]
    assert len(keys) == len(set(keys))


def test_cli_subprocess_engine_apply_writes_a_validate_clean_config(repo, tmp_path, capsys):
    model_dir = repo / "add_sub"
    slow = (model_dir / "config.pbtxt").read_text().replace("max_queue_delay_microseconds: 100",
                                                            "max_queue_delay_microseconds: 50000")
    (model_dir / "config.pbtxt").write_text(slow)  # a default that waits 50 ms for batches never wins
    original = slow
    out = tmp_path / "out"
    code, stdout, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(out), "--strategy",
                               "exhaustive", "--batch-sizes", "4,8", "--queue-delays", "0", "--instance-counts", "1",
                               "--concurrency", "1:4", *FAST_ARGS, "--apply")
    assert code == 0, stderr
    assert "Best configs" in stdout and "Best: b" in stdout and "Measured 3 of 3 configs" in stdout
    assert (out / "server.log").read_text().count("loaded model 'add_sub'") >= 3  # a real subprocess served it
    applied = (model_dir / "config.pbtxt").read_text()
    assert applied == (out / "config.pbtxt").read_text() and applied.startswith("# Chosen by tritonctl analyze")
    assert (model_dir / "config.pbtxt.orig").read_text() == original
    report = validate_paths([model_dir])
    assert report.errors == 0 and report.warnings == 0, [d.message for d in report.diagnostics]


def analyze_command(repo: Path, out: Path, *extra: str) -> list[str]:
    """Exhaustive over 4 configs (the default and b1, b8 x delays 0 and 2000 us), 3 concurrencies each."""
    return [sys.executable, "-m", "tritonctl", "analyze", str(repo), "-m", "add_sub", "-o", str(out), "--strategy",
            "exhaustive", "--batch-sizes", "1,8", "--queue-delays", "0,2000", "--instance-counts", "1",
            "--concurrency", "1:4", *FAST_ARGS, *extra]


def start_analyze(repo: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(analyze_command(repo, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_points(out: Path, count: int, process: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (out / "measurements.jsonl").exists() and len(checkpoint_points(out)) >= count:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} points after {timeout_s} s")


def servers_of(repo: Path) -> list[int]:
    """Processes serving this test's repository (the analyze run's subprocess engine)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"serve" in command and str(repo).encode() in command:
            found.append(int(proc.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the server process")
def test_killed_run_resumes_without_repeating_finished_points(repo, tmp_path):
    out = tmp_path / "out"
    process = start_analyze(repo, out)
    wait_for_points(out, 4, process)
    process.kill()
    process.wait(10)
    before = {(p["config_id"], p["concurrency"], p["repeat"]) for p in checkpoint_points(out)}
    deadline = time.monotonic() + 15
    while servers_of(repo) and time.monotonic() < deadline:  # the engine dies with its parent
        time.sleep(0.1)
    assert servers_of(repo) == []

    done = subprocess.run(analyze_command(repo, out, "--resume"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    keys = [(p["config_id"], p["concurrency"], p["repeat"]) for p in checkpoint_points(out)]
    assert len(keys) == len(set(keys)), "a finished point was measured again"
    assert before < set(keys)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points_reused"] == len(before) and summary["points_measured"] == len(keys) - len(before)
    assert "(from checkpoint)" in done.stderr


def test_ctrl_c_keeps_what_was_measured(repo, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.pbtxt").write_text("# from an earlier run\n")
    process = start_analyze(repo, out)
    wait_for_points(out, 2, process)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Interrupted:" in stderr and "--resume" in stderr and "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert "interrupted: stopped on Ctrl-C" in summary["decisions"][-1]
    recorded = [p for p in checkpoint_points(out) if not p["error"]]
    assert len(pd.read_csv(out / "measurements.csv")) == len(recorded) >= 2
    assert not (out / "config.pbtxt").exists()  # a partial search chooses nothing, and says so


class KillServerAfter(Reporter):
    """Kills the subprocess engine's server after ``count`` measured points."""

    def __init__(self, repo: Path, count: int):
        self.repo, self.count = repo, count

    def point(self, point, reused) -> None:
        self.count -= 1
        if self.count == 0:
            for pid in servers_of(self.repo):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the server process")
def test_a_dead_server_stops_the_run_with_the_measurements_kept(repo, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(AnalyzeError, match=r"(?s)bundled server subprocess exited \(status -9\).*The 2 points "
                                           r"measured so far are in .* run the same command with --resume"):
        run_analyze(options(repo, out, engine="subprocess", strategy="exhaustive"), KillServerAfter(repo, 2))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["decisions"][-1].startswith("stopped: the bundled server")
    assert len(pd.read_csv(out / "measurements.csv")) == 2
    failed = [p for p in checkpoint_points(out) if p["error"]]
    assert len(failed) == 1 and "cannot read model 'add_sub'" in failed[0]["error"]


def test_url_mode_on_a_separately_started_server(repo, tmp_path):
    import tritonclient.http as httpclient

    server = BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None,
                                           control_mode="explicit", load_models=["add_sub"])).start()
    try:
        result = run_analyze(options(repo, tmp_path / "out", engine="url", url=f"http://{server.http_url}",
                                     strategy="exhaustive", space=SearchSpace(batch_sizes=(2, 4), queue_delays_us=(0,),
                                                                              instance_counts=(1,),
                                                                              concurrency=(1, 2))))
        assert result.meta["engine"] == f"server at {server.http_url}" and result.best is not None
        assert result.meta["candidates_measured"] == 3 and (result.frame["throughput"] > 0).all()
        # The server is left with the model's own config again.
        config = httpclient.InferenceServerClient(server.http_url).get_model_config("add_sub")
        assert config["max_batch_size"] == 8 and config["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    finally:
        server.stop()

    polling = BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None)).start()
    try:
        with pytest.raises(AnalyzeError, match="does not accept model loads .* --model-control-mode explicit"):
            run_analyze(options(repo, tmp_path / "out2", engine="url", url=polling.http_url))
    finally:
        polling.stop()


@pytest.mark.parametrize("args, fragment", [
    (["--engine", "triton", "--tritonserver", "/nonexistent/tritonserver"], "not an executable file"),
    (["--objective", "speed"], "--objective 'speed'"),
    (["--batch-sizes", "0:4"], "--batch-sizes '0:4': needs 1 <= START <= END"),
    (["--resume", "--overwrite"], "give one of them"),
    (["-m", "missing"], "model 'missing' is not in"),
    (["--url", "127.0.0.1:1", "--engine", "inprocess"], "cannot be combined with --engine inprocess"),
])
def test_usage_errors(repo, tmp_path, capsys, args, fragment):
    code, _, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(tmp_path / "out"), *args)
    assert code == 2 and fragment in stderr, stderr


def test_engine_triton_needs_tritonserver(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without tritonserver
    code, _, stderr = cli(capsys, "analyze", str(repo), "-m", "add_sub", "-o", str(tmp_path / "out"), "--engine",
                          "triton")
    assert code == 2 and "--engine triton needs a tritonserver binary, and none is on PATH" in stderr
