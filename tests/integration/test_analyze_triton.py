"""tritonctl analyze --engine triton on the real Triton 2.51 from ../shared/anchors (CPU, Python
backend only): candidates go through Triton's own repository load API with a ``config`` override."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.analyze_models import FAST
from helpers.triton_anchor import tritonserver_wrapper, unavailable_reason
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.search import SearchSpace

EXAMPLES = Path(__file__).parents[2] / "examples" / "model_repository"
REASON = unavailable_reason()
pytestmark = [pytest.mark.triton, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_engine_triton_tunes_a_python_model(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo)  # add_sub: Python backend, max_batch_size 8, queue delay 500 us
    out = tmp_path / "out"
    options = AnalyzeOptions(
        repository=repo, model="add_sub", output_dir=out, strategy="exhaustive", engine="triton",
        tritonserver=str(tritonserver_wrapper(tmp_path)),
        space=SearchSpace(batch_sizes=(4, 8), queue_delays_us=(0,), instance_counts=(1,), concurrency=(2,)), **FAST)
    result = run_analyze(options)
    assert result.meta["engine"].startswith("tritonserver (") and result.best is not None
    assert {r.config_id for r in result.results} == {"default", "b4-d0-i1-cpu", "b8-d0-i1-cpu"}
    assert all(r.best is not None for r in result.results), [r.describe(options.objective, options.constraints)
                                                             for r in result.results]
    # Triton's own statistics: b4 and b8 with delay 0 never batch more than the requests in flight.
    frame = result.frame
    assert (frame["throughput"] > 0).all() and (frame["avg_batch_size"] <= frame["concurrency"] + 1e-9).all()
    log = (out / "server.log").read_text()
    assert "successfully loaded 'add_sub'" in log
    assert json.loads((out / "summary.json").read_text())["best_config_id"] == result.best.config_id
