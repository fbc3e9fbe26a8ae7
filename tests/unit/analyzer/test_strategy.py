"""The strategies on simulated servers: smart gets within 5 % of exhaustive's best objective while
measuring at most a quarter of the candidates, and says how it decided."""

from __future__ import annotations

import pytest
from analyze_models import onnx_model
from batching_sim import SimulatedServer

from tritonctl.analyzer.objective import Constraints, Objective, choose_best
from tritonctl.analyzer.search import SearchSpace, build_candidates, load_model_config
from tritonctl.analyzer.strategy import Search, run_exhaustive, run_smart, smart_budget

# A small fast model (mlp-like: batching pays 4x), a big one (batching barely pays, instances hurt),
# and one whose batches are expensive to start (large batches and a long delay pay).
SERVERS = {
    "small": SimulatedServer(0.15, 0.02, 0.9, 0.25),
    "big": SimulatedServer(2.0, 12.0, 1.05, 0.3),
    "batch-hungry": SimulatedServer(5.0, 0.5, 0.6, 0.3),
}
GOALS = {
    "throughput": (Objective(), Constraints()),
    "throughput under p99": (Objective(), Constraints(max_p99_ms=25)),
    "latency over a floor": (Objective(0.0), Constraints(min_throughput=60)),
    "weighted": (Objective(0.5), Constraints()),
}


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    repo = tmp_path_factory.mktemp("strategy")
    model_dir = onnx_model(repo, config=None)
    _, base = load_model_config(repo, "add_sub")
    space = SearchSpace(instance_counts=(1, 2, 3, 4)).resolved(base)  # 1..64 x 0..10000 us x 1..4
    return build_candidates(model_dir, base, space, validate=False), space


def run(strategy, candidates, server, objective, constraints):
    cset, space = candidates
    measured: list = []
    budget = smart_budget(len(cset.all)) if strategy is run_smart else None
    search = Search(cset, server.evaluator(space.concurrency, objective, constraints, measured), objective,
                    constraints, budget=budget)
    strategy(search)
    best = choose_best(list(search.results.values()), objective)
    # The objective the chosen config really has (the simulation without noise), not its lucky draw.
    exact = SimulatedServer(server.t0_ms, server.t1_ms, server.contention, server.overhead_ms, noise=0.0)
    value = objective.value(exact.point(next(c for c in cset.all if c.config_id == best.config_id),
                                        best.best.concurrency, "check"))
    return search, value, measured


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("goal", GOALS)
def test_smart_reaches_exhaustive_with_a_quarter_of_the_configs(candidates, server, goal):
    objective, constraints = GOALS[goal]
    full, full_value, full_points = run(run_exhaustive, candidates, SERVERS[server], objective, constraints)
    smart, smart_value, smart_points = run(run_smart, candidates, SERVERS[server], objective, constraints)
    total = len(candidates[0].all)
    assert len(full.results) == total == 124  # (1 + 6 x 5) per instance count
    assert len(smart.results) <= total // 4 and len(smart_points) <= len(full_points) / 4
    assert smart_value >= 0.95 * full_value, "\n".join(smart.decisions)


def test_decisions_say_what_was_measured_and_why(candidates):
    search, _, _ = run(run_smart, candidates, SERVERS["small"], Objective(), Constraints())
    decisions = search.decisions
    assert decisions[0].startswith("baseline: the default config b4-d0-i2-cpu (")
    assert decisions[1].startswith("explore: start in the middle of the space at b8-d500-i1-cpu (")
    assert any(d.startswith("explore instance count: ") for d in decisions)
    assert any(d.startswith("explore max batch size: ") for d in decisions)
    assert any(d.startswith("explore queue delay (us): keep 500 - ") and "tried 100, 2000, none better" in d
               for d in decisions)
    assert decisions[-1].startswith("refine: no neighbour of ")
    assert search.results["b4-d0-i2-cpu"].points[0].stage == "baseline"
    stages = {p.stage for r in search.results.values() for p in r.points}
    assert {"baseline", "explore"} <= stages <= {"baseline", "explore", "refine"}


def test_budget_stops_the_search(candidates):
    cset, space = candidates
    search = Search(cset, SERVERS["small"].evaluator(space.concurrency, Objective(), Constraints()), Objective(),
                    Constraints(), budget=3)
    run_smart(search)
    assert len(search.results) == 3
    assert search.decisions[-1] == "stopped: the budget of 3 measured configs is used up (raise it with --budget)"
