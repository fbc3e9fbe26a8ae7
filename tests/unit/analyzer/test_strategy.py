"""The strategies on simulated servers: smart gets within 5 % of exhaustive's best objective while
measuring at most a quarter of the candidates, decides only on gains beyond noise, confirms its
winner in a final round, and says how it decided and how sure it is."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.analyze_models import onnx_model
from helpers.batching_sim import SimulatedServer

from tritonctl.analyzer.point import Point

from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective, best_point
from tritonctl.analyzer.search import SearchSpace, build_candidates, load_model_config
from tritonctl.analyzer.strategy import (FINAL_ROUNDS, LOAD_ROUNDS, RECHECK_ROUNDS, Search, TimeBudget, run_exhaustive,
                                         run_smart, smart_budget)

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


def make_search(strategy, cset, space, server, objective, constraints, measured=None, budget=None) -> Search:
    if budget is None and strategy is run_smart:
        budget = smart_budget(cset)
    return Search(cset, server.evaluator(space.concurrency, objective, constraints, measured), objective,
                  constraints, budget=budget, sample=server.sampler(measured))


def exact_value(server, cset, search, objective) -> float:
    """The objective the chosen config really has (the simulation without noise), not its lucky draw."""
    exact = SimulatedServer(server.t0_ms, server.t1_ms, server.contention, server.overhead_ms, noise=0.0)
    chosen = search.final.chosen
    candidate = next(c for c in cset.all if c.config_id == chosen.config_id)
    return objective.value(exact.point(candidate, int(search.final.level), "check"))


def run(strategy, candidates, server, objective, constraints):
    cset, space = candidates
    measured: list = []
    search = make_search(strategy, cset, space, server, objective, constraints, measured)
    strategy(search)
    return search, exact_value(server, cset, search, objective), measured


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("goal", GOALS)
def test_smart_reaches_exhaustive_with_a_quarter_of_the_configs(candidates, server, goal):
    objective, constraints = GOALS[goal]
    full, full_value, full_points = run(run_exhaustive, candidates, SERVERS[server], objective, constraints)
    smart, smart_value, smart_points = run(run_smart, candidates, SERVERS[server], objective, constraints)
    total = len(candidates[0].all)
    assert len(full.results) == total == 124  # (1 + 6 x 5) per instance count
    assert len(smart.results) <= total // 4
    # Its sweeps take at most a quarter of exhaustive's points; with the re-measurements (tie-breaks and
    # the final round, a fixed cost that matters only when every sweep is cut short by a p99 limit) a third.
    sweeps = sum(len(r.points) for r in smart.results.values())
    assert sweeps <= len(full_points) / 4 and len(smart_points) <= len(full_points) / 3
    assert smart_value >= 0.95 * full_value, "\n".join(smart.decisions)


@pytest.mark.parametrize("goal", ["throughput", "throughput under p99", "latency over a floor"])
def test_smart_sweeps_start_near_the_best_peak_on_a_throughput_objective(candidates, goal):
    """After the baseline and the start, each config's sweep begins two levels below where the best
    config so far peaked (and walks down if it peaks lower); a latency objective sweeps from the bottom."""
    objective, constraints = GOALS[goal]
    search, _, _ = run(run_smart, candidates, SERVERS["batch-hungry"], objective, constraints)
    later = [r for r in search.results.values() if r.points[0].stage in ("explore", "refine")][1:]
    lowest = min(candidates[1].concurrency)
    warm = [r for r in later if min(p.concurrency for p in r.points) > lowest]
    if objective.throughput_weight == 1.0:
        assert warm and all("(started at concurrency " in r.stop_reason for r in warm)
    else:
        assert not warm and not any("started at" in r.stop_reason for r in later)


def test_decisions_say_what_was_measured_and_why(candidates):
    search, _, _ = run(run_smart, candidates, SERVERS["small"], Objective(), Constraints())
    decisions = search.decisions
    assert decisions[0].startswith("baseline: the default config b4-d0-i2-cpu (")
    assert decisions[1].startswith("explore: start at b8-d500-i1-cpu (") and ", with batching on" in decisions[1]
    for knob in ("instance count", "max batch size", "queue delay (us)"):
        assert any(d.startswith(f"explore {knob}: ") for d in decisions), knob
    assert any(d.startswith("refine: no neighbour of ") for d in decisions)
    final = next(i for i, d in enumerate(decisions) if d.startswith("final round: "))
    assert " rounds: " in decisions[final]
    assert decisions[final + 1].startswith(f"chosen: {search.final.chosen.config_id}, ")
    assert "against the runner-up" in decisions[final + 1] and "noise" in decisions[final + 1]
    # Then, when another load level came close to the chosen config's best, the load check.
    assert decisions[final + 2:] == ([f"load check: {search.final.chosen.config_id} at {search.final.load.verdict()}"]
                                     if search.final.load is not None else [])
    assert search.results["b4-d0-i2-cpu"].points[0].stage == "baseline"
    stages = {p.stage for r in search.results.values() for p in r.points}
    assert {"baseline", "explore"} <= stages <= {"baseline", "explore", "refine"}
    finals = [p for samples in search.samples.values() for p in samples if p.stage == "final"]
    assert len(finals) >= 3 * FINAL_ROUNDS and len({(p.config_id, p.repeat) for p in finals}) == len(finals)
    assert search.final.chosen.point.throughput > 0 and search.final.rounds >= FINAL_ROUNDS


def test_budget_stops_the_search_and_says_what_it_missed(candidates):
    cset, space = candidates
    search = make_search(run_smart, cset, space, SERVERS["small"], Objective(), Constraints(), budget=3)
    run_smart(search)
    assert len(search.results) == 3
    stop = next(d for d in search.decisions if d.startswith("stopped:"))
    assert stop.startswith("stopped: the budget of 3 measured configs is used up; the line search did not cover: ")
    assert "queue delay (us)" in search.unexplored and stop.endswith("(raise it with --budget)")
    assert search.final is not None  # the final round still confirms the best of what was measured


def small_space(tmp_path, default_config: str = "", **space):
    repo = tmp_path / "repo"
    model_dir = onnx_model(repo, config=default_config)  # max_batch_size 8, one instance, by default no batcher
    _, base = load_model_config(repo, "add_sub")
    resolved = SearchSpace(**space).resolved(base)
    return build_candidates(model_dir, base, resolved, validate=False), resolved


def test_the_budget_covers_every_knobs_line_of_a_small_space(tmp_path):
    cset, _ = small_space(tmp_path, batch_sizes=(1, 8, 32), queue_delays_us=(0, 500, 2000), instance_counts=(1, 2),
                          concurrency=(16,))
    assert len(cset.all) == 15  # the default (no batcher) and 2 x (1 + 2 x 3); b32 fails nowhere unvalidated
    # baseline, start, 1 more instance count, 2 more batch sizes, 2 more delays, and 2 for the hill climb
    assert smart_budget(cset) == 9 > len(cset.all) // 4


@pytest.mark.parametrize("seed", range(8))
def test_noise_does_not_make_smart_drop_batching(tmp_path, seed):
    """The issue's failure: on a model where batching wins by far, with 10 % noise between
    measurements, smart kept max_batch_size 1. Now every run keeps a batched config."""
    cset, space = small_space(tmp_path, batch_sizes=(1, 8, 32), queue_delays_us=(0, 500, 2000),
                              instance_counts=(1, 2), concurrency=(16,))
    server = SimulatedServer(0.15, 0.02, 0.9, 0.25, noise=0.10, seed=seed)
    search = make_search(run_smart, cset, space, server, Objective(), Constraints())
    run_smart(search)
    assert search.final.chosen.knobs.max_batch_size > 1, "\n".join(search.decisions)
    assert not search.unexplored


def flat(value, spread: float):
    """A server without noise on which a config measures ``value(knobs)`` infer/s (or ``value`` for all)."""

    def point(candidate, concurrency, stage, repeat=0):
        throughput = value(candidate.knobs) if callable(value) else value
        return Point(candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, concurrency,
                     stage, throughput=throughput, p50_ms=1.0, p99_ms=2.0, stable=True, throughput_spread=spread,
                     repeat=repeat)

    def evaluate(candidate, stage, near=None):
        points = [point(candidate, 4, stage)]
        return ConfigResult(candidate.config_id, candidate.knobs, candidate.is_default, points,
                            best_point(points, Objective(), Constraints()))

    return evaluate, lambda candidate, concurrency, repeat, stage: point(candidate, concurrency, stage, repeat)


def test_configs_within_noise_are_measured_again_until_equivalent_then_the_cheaper_wins(tmp_path):
    cset, _ = small_space(tmp_path, batch_sizes=(8, 32), queue_delays_us=(0,), instance_counts=(1, 2),
                          concurrency=(4,))
    evaluate, sample = flat(1000.0, 0.03)  # one measurement: +-3 %, so two of them are not yet known equivalent
    search = Search(cset, evaluate, Objective(), Constraints(), sample=sample)
    big, small = search.by_id["b32-d0-i2-cpu"], search.by_id["b8-d0-i1-cpu"]
    search.measure(big, "explore")
    search.measure(small, "explore")
    winner, why = search.compare(big, small)
    assert winner is None and why.startswith("b32-d0-i2-cpu and b8-d0-i1-cpu are equivalent (within 5%: ")
    assert [(p.repeat, p.stage) for p in search.samples[big.config_id]] == [(1, "recheck")]  # one round told
    assert [(p.repeat, p.stage) for p in search.samples[small.config_id]] == [(1, "recheck")]

    run_exhaustive(search)  # the final round on equal configs: the cheapest of the finalists
    final = search.final
    assert final.chosen.config_id == "b8-d0-i1-cpu" and final.beyond_noise is False and final.versus.equivalent
    assert len(final.equivalent) == 3 and "equivalent (within 5%" in final.verdict()
    assert final.verdict().endswith("and the cheaper config was chosen")


def test_configs_that_cannot_be_told_apart_are_not_called_equivalent(tmp_path):
    """Noise far larger than the difference: neither a winner nor an equivalence. The search does not
    step, and the final round keeps the best median instead of falling back to the cheapest."""
    cset, _ = small_space(tmp_path, batch_sizes=(1, 32), queue_delays_us=(0,), instance_counts=(1,),
                          concurrency=(16,))
    # Measurements k = 0, 1, 2, ... of each config: b32 is better by about 20 % on average, but
    # single measurements swing by 40 % and more, and pairs of them disagree on the order.
    series = {"b1-d0-i1-cpu": [1000, 1100, 1300, 700, 800, 1200], "b32-d0-i1-cpu": [1050, 1500, 900, 1300, 1700, 1000],
              "default": [500] * 6}
    evaluate, _ = flat(lambda knobs: 0.0, 0.05)

    def point(candidate, repeat, stage):
        base = evaluate(candidate, stage).points[0]
        return replace(base, throughput=float(series[candidate.config_id][repeat]), repeat=repeat, stage=stage)

    search = Search(cset, lambda candidate, stage, near=None: ConfigResult(
        candidate.config_id, candidate.knobs, candidate.is_default, [point(candidate, 0, stage)],
        point(candidate, 0, stage)), Objective(), Constraints(),
        sample=lambda candidate, concurrency, repeat, stage: point(candidate, repeat, stage))
    one, batched = search.by_id["b1-d0-i1-cpu"], search.by_id["b32-d0-i1-cpu"]
    search.measure(one, "explore")
    search.measure(batched, "explore")
    winner, why = search.compare(one, batched)
    assert winner is None and "cannot be told apart after 2 re-measurement rounds" in why and "no step" in why

    search.results.clear()
    search.samples.clear()
    run_exhaustive(search)  # b1 is cheaper, but not known to be equivalent: the better median wins
    final = search.final
    assert final.chosen.config_id == "b32-d0-i1-cpu" and not final.equivalent
    assert final.beyond_noise is False and "not beyond noise" in final.verdict()


def test_the_default_is_kept_against_a_leader_that_does_not_beat_it_beyond_noise(tmp_path):
    """A config that leads the final round by a margin inside the noise does not replace a default that
    batches; it does replace one that turns batching off."""
    cset, _ = small_space(tmp_path, "dynamic_batching { }", batch_sizes=(1, 32), queue_delays_us=(0,),
                          instance_counts=(1,), concurrency=(16,))
    series = {"b32-d0-i1-cpu": [1100, 1300, 950, 1200, 1150, 1000, 1250],
              "default": [1000, 1000, 1150, 1050, 1100, 1100, 1050],
              "b1-d0-i1-cpu": [400] * 7}
    evaluate, _ = flat(lambda knobs: 0.0, 0.05)

    def point(candidate, repeat, stage):
        base = evaluate(candidate, stage).points[0]
        return replace(base, throughput=float(series[candidate.config_id][repeat]), repeat=repeat, stage=stage)

    search = Search(cset, lambda candidate, stage, near=None: ConfigResult(
        candidate.config_id, candidate.knobs, candidate.is_default, [point(candidate, 0, stage)],
        point(candidate, 0, stage)), Objective(), Constraints(),
        sample=lambda candidate, concurrency, repeat, stage: point(candidate, repeat, stage))
    run_exhaustive(search)
    final = search.final
    assert final.chosen.config_id == "default" and final.unproven == "b32-d0-i1-cpu", final.verdict()
    assert final.verdict().startswith("the default config is kept: b32-d0-i1-cpu led the head-to-head rounds")
    assert final.as_dict()["default_kept_against"] == "b32-d0-i1-cpu"

    no_batcher, _ = small_space(tmp_path / "b", batch_sizes=(1, 32), queue_delays_us=(0,), instance_counts=(1,),
                                concurrency=(16,))
    search = Search(no_batcher, search.evaluate, Objective(), Constraints(), sample=search.sample)
    run_exhaustive(search)
    assert search.final.chosen.config_id == "b32-d0-i1-cpu" and search.final.unproven is None


def timed_smart_run(candidates, budget_s: float, load_s: float, point_s: float, sample_s: float):
    """smart under a time budget on a clock that a sweep moves ``load_s`` plus ``point_s`` per point
    and a re-measurement ``sample_s``; the search, and the clock's time at its end."""
    cset, space = candidates
    server = SimulatedServer(0.15, 0.02, 0.9, 0.25, noise=0.05, seed=1)
    evaluate, sample = server.evaluator(space.concurrency, Objective(), Constraints()), server.sampler()
    now = [0.0]

    def timed_evaluate(candidate, stage, near=None):
        result = evaluate(candidate, stage, near)
        now[0] += load_s + point_s * len(result.points)
        return result

    def timed_sample(candidate, concurrency, repeat, stage):
        now[0] += sample_s
        return sample(candidate, concurrency, repeat, stage)

    search = Search(cset, timed_evaluate, Objective(), Constraints(), budget=smart_budget(cset), sample=timed_sample,
                    time_budget=TimeBudget(budget_s, budget_s, clock=lambda: now[0]))
    run_smart(search)
    return search, now[0]


def test_a_time_budget_is_kept_counting_the_final_round_and_the_wind_down(candidates):
    """On a clock that each sweep moves 1 s per point and each re-measurement 1.5 s (a config loads in
    0.5 s), smart measures a new config only while its sweep, the final round and the wind-down still
    fit: it ends within the budget (the wind-down included), says in numbers why it stopped, and a
    larger budget measures more."""
    measured = []
    for budget_s in (30.0, 60.0, 120.0, 240.0):
        search, end = timed_smart_run(candidates, budget_s, load_s=0.5, point_s=1.0, sample_s=1.5)
        assert end + TimeBudget.WIND_DOWN_S <= budget_s, (budget_s, end)
        assert search.final is not None
        assert search.out_of_time == any(d.startswith("stopped: the time left (") and f"of the {budget_s:.0f} s budget"
                                         in d for d in search.decisions)
        measured.append((len(search.results), search.out_of_time))
    assert measured == sorted(measured, key=lambda m: m[0]) and measured[0][1] and measured[0] < measured[-1], measured


def test_a_final_round_that_no_longer_fits_is_cut_short_and_says_so(candidates):
    """Re-measurements that take far longer than the sweeps promised (8 s each, against sweeps of
    0.1 s per point): the final round stops after the round in which the time ran short, rather than
    run its three rounds past the deadline, and the decisions say so."""
    cuts = []
    for budget_s in (30.0, 50.0, 70.0, 90.0):
        search, end = timed_smart_run(candidates, budget_s, load_s=0.1, point_s=0.1, sample_s=8.0)
        (final,) = [d for d in search.decisions if d.startswith("final round: ")]
        finalists = len(search.final.estimates)
        if finalists == 1:  # nothing to measure head to head
            continue
        assert search.final.rounds >= 1
        if search.final.rounds < FINAL_ROUNDS:
            assert f"cut short of {FINAL_ROUNDS} by the time budget" in final, final
            cuts.append(budget_s)
        # The first round always runs; after it, a round starts only when it fits.
        assert end <= budget_s + finalists * 8.0, (budget_s, end, search.decisions)
    assert cuts, "no budget cut the final round short: the test no longer tests it"


def levels_server(sweep: dict[int, float], again: dict[int, list[float]]):
    """One config (b8) whose sweep measured ``sweep[level]`` once, and whose re-measurements at a level
    give ``again[level]`` in turn (the default serves half of it everywhere)."""
    taken: dict[int, int] = {}

    def point(candidate, level, stage, repeat, throughput):
        if candidate.is_default:
            throughput /= 2
        return Point(candidate.config_id, candidate.config_hash, candidate.knobs, candidate.is_default, level, stage,
                     throughput=throughput, p50_ms=level / 100, p99_ms=level / 50, stable=True,
                     throughput_spread=0.02, repeat=repeat)

    def evaluate(candidate, stage, near=None):
        points = [point(candidate, level, stage, 0, value) for level, value in sweep.items()]
        return ConfigResult(candidate.config_id, candidate.knobs, candidate.is_default, points,
                            best_point(points, Objective(), Constraints()))

    def sample(candidate, level, repeat, stage):
        series = again.get(level) or [sweep[level]]
        count = taken[(candidate.config_id, level)] = taken.get((candidate.config_id, level), -1) + 1
        return point(candidate, level, stage, repeat, series[count % len(series)])

    return evaluate, sample


@pytest.mark.parametrize("again, level", [
    ({128: [1980, 2010, 1990], 256: [1800, 1790, 1850]}, 128),  # 256's sweep point was a lucky window
    ({128: [1950, 1990, 2000], 256: [1960, 2000, 1990]}, 128),  # equivalent: the lower load, for its latency
    ({128: [1600, 1650, 1580], 256: [2000, 1990, 2020]}, 256),  # the higher load serves more, beyond noise
])
def test_the_chosen_config_is_recommended_at_the_load_level_that_wins_head_to_head(tmp_path, again, level):
    """The sweep measured 256 a little above 128, within noise: the two levels are measured again,
    interleaved, and the chosen config is recommended at the lower one unless the higher serves more."""
    cset, _ = small_space(tmp_path, batch_sizes=(8,), queue_delays_us=(0,), instance_counts=(1,),
                          concurrency=(64, 128, 256))
    evaluate, sample = levels_server({64: 1400.0, 128: 1960.0, 256: 2010.0}, again)
    search = Search(cset, evaluate, Objective(), Constraints(), sample=sample)
    run_exhaustive(search)
    final = search.final
    assert final.chosen.config_id == "b8-d0-i1-cpu" and final.chosen.point.concurrency == 256
    assert final.load is not None and final.level == level
    loads = [p for p in search.samples["b8-d0-i1-cpu"] if p.stage == "load"]
    assert sorted(p.concurrency for p in loads) == [128] * LOAD_ROUNDS + [256] * LOAD_ROUNDS
    assert len({p.repeat for p in search.samples["b8-d0-i1-cpu"]}) == len(search.samples["b8-d0-i1-cpu"])
    assert search.decisions[-1].startswith("load check: b8-d0-i1-cpu at concurrency 256 against concurrency 128, "
                                           f"{LOAD_ROUNDS} head-to-head rounds: ")
    assert search.decisions[-1].endswith(f"concurrency {level} chosen, the {'lower' if level == 128 else 'higher'}")
    record = final.as_dict()["load_check"]
    assert record["levels"] == [128, 256] and record["chosen_level"] == record["concurrency"] == level


def test_no_load_check_when_the_best_level_wins_the_sweep_beyond_noise(tmp_path):
    cset, _ = small_space(tmp_path, batch_sizes=(8,), queue_delays_us=(0,), instance_counts=(1,),
                          concurrency=(64, 128, 256))
    evaluate, sample = levels_server({64: 1400.0, 128: 1600.0, 256: 2000.0}, {})
    search = Search(cset, evaluate, Objective(), Constraints(), sample=sample)
    run_exhaustive(search)
    assert search.final.load is None and search.final.level == 256
    assert not [p for p in search.samples["b8-d0-i1-cpu"] if p.stage == "load"]
    assert search.final.as_dict()["load_check"] is None and search.decisions[-1].startswith("chosen: ")
