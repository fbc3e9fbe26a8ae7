"""smart search on a model where batching wins by far: the 256-1024-1024-256 MLP, one CPU instance.

Over the 18-config space of the issue (max batch 1, 8, 32 x queue delay 0, 500, 2000 us x 1 or 2
instances, concurrency 16), a single noisy measurement once made smart keep max_batch_size 1. It
must choose a batched config; its noise-aware steps (a step only on a win beyond noise, from a
batched start) and the final head-to-head round make that hold on a loaded 2-core machine.
Windows are short (300 ms) to keep the run near a minute. The load goes over gRPC, whose C++
transport leaves the server more of the CPU per request than HTTP, so batching's gain stands out
of the noise better when other processes share the cores.
"""

from __future__ import annotations

import json

from helpers.analyze_models import mlp_model
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.search import SearchSpace

SPACE = SearchSpace(batch_sizes=(1, 8, 32), queue_delays_us=(0, 500, 2000), instance_counts=(1, 2), concurrency=(16,))


def test_smart_chooses_a_batched_config_for_the_mlp(tmp_path):
    mlp_model(tmp_path / "repo")
    out = tmp_path / "out"
    result = run_analyze(AnalyzeOptions(tmp_path / "repo", "mlp", out, space=SPACE, engine="subprocess", protocol="grpc",
                                        measurement_interval_ms=300.0, stability_percentage=20.0, max_trials=5))
    decisions = "\n".join(result.meta["decisions"])
    assert not result.interrupted and result.best is not None, decisions
    assert result.best.knobs.max_batch_size > 1 and result.best.knobs.dynamic_batching, decisions
    assert result.meta["unexplored_knobs"] == [], decisions  # the budget covered every knob's line
    for knob in ("instance count", "max batch size", "queue delay (us)"):
        assert f"explore {knob}: " in decisions
    final = result.meta["final_round"]
    # The best three, and the default (no batcher) when it was not among them.
    assert final["chosen"] == result.best.config_id and len(final["finalists"]) in (3, 4)
    assert all(f["samples"] >= 3 for f in final["finalists"])
    assert isinstance(final["beyond_noise"], bool) and "against the runner-up" in final["verdict"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_round"]["verdict"] == final["verdict"]
    assert "# Final round, " in (out / "config.pbtxt").read_text()
