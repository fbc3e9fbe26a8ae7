"""Search strategies: ``exhaustive`` measures every candidate; ``smart`` climbs the grid. Both
end with a final round that confirms the winner.

``smart`` follows Model Analyzer's quick search, with the queue delay as a dimension too:

1. baseline: the default config, so every result can be compared with it;
2. explore: from a start that batching can win from (the middle max batch size above 1 and the
   middle queue delay above 0, one instance), a line search along every knob the space varies
   (instance count, max batch size, queue delay, then preferred size and kind): walk the line both
   ways while each value measures no worse than the best so far (a value ends its way only when
   two measurements of each say it is worse beyond noise), then step to the best value;
3. refine: hill-climb from the best config over the neighbours in every knob until none wins.

On a throughput objective, every config after the baseline and the start is swept from near the
load where the best config so far peaked (``sweep``'s warm start), not from the lowest load.

Every comparison is noise-aware (``noise``): a step is taken only when its gain exceeds both
configs' bands; within them, both are measured again, back to back, up to ``RECHECK_ROUNDS``
times, and if they still cannot be told apart they are equivalent and the search stays where it
is (both stay candidates for the final round, where the cheaper of equivalent configs wins).

The final round (both strategies): the best ``FINALISTS`` configs, and the default config when it
meets the constraints and is not among them, are measured again head to head, interleaved,
``FINAL_ROUNDS`` times on the same server, and the winner is chosen from those numbers
alone: the leader is the finalist whose worst round-by-round ratio against the others is the
highest; finalists neither beaten by it beyond noise nor equivalent to it get more rounds; the
cheapest of the leader and the finalists equivalent to it wins, unless it neither beats the default
beyond noise nor is equivalent to it: then the default is kept (a change must prove itself), except
a default that turns batching off on a model that can batch. Its
margin over the runner-up (the closest competitor) is stated, and whether it is beyond noise.
Then the load check: when the chosen config's sweep has another load level within noise of its best
one, the two levels are measured head to head, ``LOAD_ROUNDS`` interleaved rounds, and the config
is recommended at the lower one unless the higher serves more and they are not equivalent.

A config that meets the constraints beats one that does not; between two that miss them, the one
closer to meeting them is better. Smart never measures more than its budget of configs (by default
a quarter of the candidates, and never fewer than it takes to cover every knob's line); when the
budget runs out first it says which knobs it did not explore. Under a time budget (``TimeBudget``)
a new config is measured only while its sweep and a final round still fit, the final round is cut
short after any round when the next no longer fits, and the load check runs only when it fits; the
decisions say which of these the budget cut. Every decision is recorded with the numbers it was
made on.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from tritonctl.analyzer.noise import EQUIVALENCE, Estimate, Paired, beats, cost, equivalent, estimate, paired
from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Candidate, CandidateSet, Knobs

Evaluate = Callable[[Candidate, str, "float | None"], ConfigResult]  # candidate, stage, sweep near (sweep.py)
Sample = Callable[[Candidate, float, int, str], Point]  # candidate, load level, repeat (1, 2, ...), stage
# Knobs in order of effect; the first three are ordered (a step is a neighbour), the others are sets.
ORDERED = ("instance_count", "max_batch_size", "max_queue_delay_us")
# The queue policy's knobs are sets too: 0 (unbounded, no timeout) is not the small end of their range.
UNORDERED = ("preferred_batch_size", "instance_kind", "max_queue_size", "queue_timeout_us")
LABELS = {"instance_count": "instance count", "max_batch_size": "max batch size",
          "max_queue_delay_us": "queue delay (us)", "preferred_batch_size": "preferred batch size",
          "instance_kind": "instance kind", "max_queue_size": "max queue size",
          "queue_timeout_us": "queue timeout (us)"}
BUDGET_FRACTION = 0.25
MIN_BUDGET = 3
REFINE_ALLOWANCE = 2  # configs the default budget keeps beyond the knobs' lines, for the hill climb
RECHECK_ROUNDS = 2  # most back-to-back re-measurements of two configs that cannot be told apart
FINALISTS = 3
FINAL_ROUNDS = 3  # head-to-head rounds of the finalists
FINAL_EXTRA_ROUNDS = 2  # more rounds for finalists neither beaten by the leader nor equivalent to it
LOAD_ROUNDS = 3  # head-to-head rounds of the chosen config at its two best load levels


class BudgetExhausted(Exception):
    """The search may not measure another config: its budget of configs, or of time, is used up."""


class TimeBudget:
    """A deadline for a search (``time.monotonic()`` seconds). At the pace measured so far (each
    config's sweep, each point's measurement, each config's load, each re-measurement), a new config
    is measured only while the time left covers its sweep, a final round with it among the
    finalists, and the run's wind-down (stopping the server, writing the reports). Everything after
    that asks again before it starts: a tie-break's re-measurements, each round of the final round
    after its first (the round is cut short rather than the deadline missed), the load check."""

    WIND_DOWN_S = 2.0

    def __init__(self, deadline: float, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.deadline = deadline
        self.seconds = seconds  # the whole budget, for the decisions' text
        self.clock = clock
        self.sweeps: list[float] = []  # wall seconds of each config's sweep
        self.points: list[float] = []  # seconds each point of a sweep took to measure
        self.loads: list[float] = []  # what each sweep took besides its points' measurements: loading the config
        self.samples: list[float] = []  # wall seconds of each re-measurement
        self.refusal: str | None = None  # why the last new config was refused, in words

    def record_sweep(self, took: float, points: list[Point]) -> None:
        measuring = [p.measured_s for p in points]
        self.sweeps.append(took)
        self.points.extend(measuring)
        self.loads.append(max(took - sum(measuring), 0.0))

    def left(self) -> float:
        return self.deadline - self.clock()

    def sample_seconds(self) -> float:
        """What one re-measurement takes: as measured, or until one is, a point's measurement and
        the slowest load of a config (re-measurements interleave configs, each loaded again)."""
        if self.samples:
            return statistics.median(self.samples)
        return (statistics.median(self.points) if self.points else 0.0) + max(self.loads, default=0.0)

    def allows(self, finalists: int) -> bool:
        """Whether another config's sweep and a final round of ``finalists`` still fit."""
        if not self.sweeps:
            return self.left() > 0
        sweep, final = statistics.median(self.sweeps), self._final(finalists)
        if self.left() > sweep + final + self.WIND_DOWN_S:
            return True
        self.refusal = (f"the time left ({max(self.left(), 0.0):.0f} s of the {self.seconds:.0f} s budget) does not "
                        f"cover another config's sweep (about {sweep:.0f} s) and a final round after it (about "
                        f"{final:.0f} s)")
        return False

    def allows_samples(self, count: int, finalists: int = 0) -> bool:
        """Whether ``count`` re-measurements, then a final round of ``finalists``, still fit."""
        return self.left() > count * self.sample_seconds() + self._final(finalists) + self.WIND_DOWN_S

    def _final(self, finalists: int) -> float:
        """A final round of ``finalists`` (the load check after it is left out: it runs only when
        the time left covers it then)."""
        return finalists * FINAL_ROUNDS * self.sample_seconds()


@dataclass
class FinalRound:
    """The finalists measured again head to head, and the choice made from those numbers."""

    estimates: list[Estimate]  # each finalist's medians over the final rounds, best head-to-head record first
    chosen: Estimate
    runner_up: Estimate | None
    rounds: int
    versus: Paired | None = None  # the chosen config against the runner-up, round by round
    equivalent: list[str] = field(default_factory=list)  # the leader and those equivalent to it (the cheapest won)
    unproven: str | None = None  # the head-to-head leader the default was kept against (it did not win beyond noise)
    load: LoadCheck | None = None  # the chosen config at its two best load levels, head to head

    @property
    def level(self) -> float | None:
        """The load level the chosen config is recommended at."""
        if self.load is not None:
            return self.load.chosen.level
        return self.chosen.point.level if self.chosen.point is not None else None

    @property
    def margin(self) -> float | None:
        return self.versus.margin if self.versus is not None else None

    @property
    def beyond_noise(self) -> bool | None:
        if self.runner_up is None or self.versus is None:
            return None
        if self.chosen.tier != self.runner_up.tier:
            return self.chosen.tier > self.runner_up.tier
        return self.versus.beyond_noise and self.versus.ratio > 1.0

    def verdict(self) -> str:
        """The margin in words, for the summary and the config header."""
        if self.runner_up is None or self.versus is None:
            return "it was the only measured config meeting the constraints, so there was no runner-up"
        if self.unproven is not None:
            return (f"the default config is kept: {self.unproven} led the head-to-head rounds but did not beat it "
                    f"beyond noise ({-self.margin:+.1%} over the default, noise +-{self.versus.band:.1%}); longer "
                    "windows (-p) may tell them apart") if self.runner_up.config_id == self.unproven else (
                    f"the default config is kept: {self.unproven} led the head-to-head rounds but did not beat "
                    f"it beyond noise")
        head = (f"{self.margin:+.1%} against the runner-up {self.runner_up.config_id} (median of the per-round "
                f"ratios over {self.versus.rounds} head-to-head rounds)")
        if self.beyond_noise:
            return f"{head}, beyond noise (+-{self.versus.band:.1%})"
        if self.versus.equivalent:
            cheaper = cost(self.chosen.knobs) < cost(self.runner_up.knobs)
            return (f"{head}: equivalent (within {EQUIVALENCE:.0%}, noise +-{self.versus.band:.1%})"
                    + (", and the cheaper config was chosen" if cheaper else ""))
        return (f"{head}, not beyond noise (+-{self.versus.band:.1%}): the runner-up may be as good; longer "
                "windows (-p) tell them apart")

    def as_dict(self) -> dict:
        def entry(e: Estimate) -> dict:
            p = e.point
            return {"config_id": e.config_id, "concurrency": p.concurrency if p else None,
                    "request_rate": p.request_rate if p and p.request_rate else None,
                    "throughput": p.throughput if p else None, "p99_ms": p.p99_ms if p else None,
                    "objective": e.value if e.tier == 2 else None, "meets_constraints": e.tier == 2,
                    "spread": e.spread, "samples": len(e.samples),
                    "throughputs": [s.throughput for s in e.samples]}

        return {"rounds": self.rounds, "finalists": [entry(e) for e in self.estimates],
                "chosen": self.chosen.config_id,
                "runner_up": self.runner_up.config_id if self.runner_up is not None else None,
                "margin": self.margin, "band": self.versus.band if self.versus is not None else None,
                "beyond_noise": self.beyond_noise, "equivalent": list(self.equivalent),
                "default_kept_against": self.unproven, "verdict": self.verdict(),
                "load_check": self.load.as_dict() if self.load is not None else None}


def load_words(point: Point) -> str:
    return f"concurrency {point.concurrency}" if point.load == "concurrency" else f"{point.request_rate:g} req/s"


@dataclass
class LoadCheck:
    """The chosen config measured head to head at its sweep's best load level and at the level that
    came closest to it: a sweep measures each level once, and one lucky window must not set the load
    the config is recommended at. The lower level is kept unless the higher one serves more (the
    objective) and the two are not equivalent."""

    lower: Estimate
    higher: Estimate
    versus: Paired  # the higher level over the lower, round by round
    chosen: Point  # the sweep's point at the chosen level

    def verdict(self) -> str:
        low, high = self.lower.point, self.higher.point
        kept = "higher" if self.chosen.level == high.level else "lower"
        return (f"{load_words(high)} against {load_words(low)}, {self.versus.rounds} head-to-head rounds: "
                f"{self.versus.margin:+.1%} at the higher load (noise +-{self.versus.band:.1%}); "
                f"{load_words(self.chosen)} chosen, the {kept}")

    def as_dict(self) -> dict:
        return {"levels": [self.lower.point.level, self.higher.point.level], "chosen_level": self.chosen.level,
                "concurrency": self.chosen.concurrency, "throughputs": {
                    "lower": [p.throughput for p in self.lower.samples],
                    "higher": [p.throughput for p in self.higher.samples]},
                "margin": self.versus.margin, "band": self.versus.band, "rounds": self.versus.rounds,
                "verdict": self.verdict()}


class Search:
    """Measures candidates (each config's sweep at most once) and keeps the decisions."""

    def __init__(self, candidates: CandidateSet, evaluate: Evaluate, objective: Objective,
                 constraints: Constraints, decide: Callable[[str], None] | None = None, budget: int | None = None,
                 sample: Sample | None = None, time_budget: TimeBudget | None = None):
        self.set = candidates
        self.evaluate = evaluate
        self.sample = sample
        self.objective = objective
        self.constraints = constraints
        self.results: dict[str, ConfigResult] = {}
        self.samples: dict[str, list[Point]] = {}  # re-measurements (repeat >= 1) by config id
        self.decisions: list[str] = []
        self._decide = decide or (lambda _text: None)
        self.budget = budget
        self.time_budget = time_budget
        self.out_of_time = False  # the time budget stopped the search
        self.by_id = {c.config_id: c for c in candidates.all}
        self.unexplored: list[str] = []  # knobs whose line the budget did not cover
        self.final: FinalRound | None = None
        self.warm_start = False  # sweeps start near the best config's load (smart, on a throughput objective)

    def decide(self, text: str) -> None:
        self.decisions.append(text)
        self._decide(text)

    def measure(self, candidate: Candidate, stage: str) -> ConfigResult:
        if candidate.config_id not in self.results:
            if self.budget is not None and len(self.results) >= self.budget:
                raise BudgetExhausted
            if self.time_budget is not None and self.results and \
                    not self.time_budget.allows(min(len(self.results) + 1, FINALISTS + 1)):
                self.out_of_time = True
                raise BudgetExhausted
            started = self._clock()
            result = self.results[candidate.config_id] = self.evaluate(candidate, stage, self._near())
            if self.time_budget is not None and result.points:
                self.time_budget.record_sweep(self._clock() - started, result.points)
        return self.results[candidate.config_id]

    def _near(self) -> float | None:
        """Where a warm-started sweep aims: the load level at which the best config so far peaked."""
        if not self.warm_start:
            return None
        anchored = [c for c in (self.by_id[i] for i in self.results) if self.anchor(c) is not None]
        if not anchored:
            return None
        return self.anchor(max(anchored, key=lambda c: self.estimate(c).score)).level

    def _clock(self) -> float:
        return self.time_budget.clock() if self.time_budget is not None else time.monotonic()

    def budget_words(self) -> str:
        """What ran out, for the decisions."""
        if self.out_of_time:
            return self.time_budget.refusal or f"the time budget of {self.time_budget.seconds:.0f} s is used up"
        return f"the budget of {self.budget} measured configs is used up"

    def anchor(self, candidate: Candidate) -> Point | None:
        """The point a config is compared at: the point of its sweep with the best objective among
        those meeting the constraints (not the lowest-latency near-tie its report shows: a config
        must not be measured again where it is handicapped), or the one closest to the constraints."""
        result = self.results[candidate.config_id]
        ok = [p for p in result.points if p.ok]
        passing = [p for p in ok if self.constraints.meets(p)]
        if passing:
            return max(passing, key=self.objective.value)
        return min(ok, key=self.constraints.violation) if ok else None

    def confirmed_worse(self, candidate: Candidate, best: Candidate) -> bool:
        """Whether ``candidate`` is worse than ``best`` beyond noise on two measurements of each: a
        single lucky measurement of the best must not end a line search."""
        if not beats(self.estimate(best), self.estimate(candidate)):
            return False
        if self.sample is None or (self.time_budget is not None and not self.time_budget.allows_samples(
                2, min(len(self.results), FINALISTS + 1))):
            return True
        for config in (best, candidate):
            if len(self.estimate(config).samples) < 2:
                self.remeasure(config, "recheck")
        return beats(self.estimate(best), self.estimate(candidate))

    def remeasure(self, candidate: Candidate, stage: str) -> None:
        """One more measurement of the candidate at its anchor's concurrency."""
        anchor = self.anchor(candidate)
        if anchor is None or self.sample is None:
            return
        self.sample_at(candidate, anchor.level, stage)

    def sample_at(self, candidate: Candidate, level: float, stage: str) -> Point:
        """One more measurement of the candidate at a load level, kept with its others."""
        done = self.samples.setdefault(candidate.config_id, [])
        started = self._clock()
        done.append(self.sample(candidate, level, len(done) + 1, stage))
        if self.time_budget is not None:
            self.time_budget.samples.append(self._clock() - started)
        return done[-1]

    def estimate(self, candidate: Candidate, final: bool = False) -> Estimate:
        """The sweep's anchor point and its re-measurements; ``final``: the final round's only."""
        anchor = self.anchor(candidate)
        again = [p for p in self.samples.get(candidate.config_id, [])
                 if anchor is not None and p.level == anchor.level and (p.stage == "final") == final]
        samples = again if final else ([anchor] if anchor is not None else []) + again
        return estimate(candidate.config_id, candidate.knobs, samples, self.objective, self.constraints)

    def step(self, challenger: Candidate, incumbent: Candidate) -> tuple[Candidate | None, str]:
        """Whether the search steps from ``incumbent`` to ``challenger``: only on a win beyond noise, so
        a challenger that measured no better is not measured again."""
        ec, ei = self.estimate(challenger), self.estimate(incumbent)
        if ec.score <= ei.score:
            return None, f"{challenger.config_id} measured no better than {incumbent.config_id}"
        return self.compare(challenger, incumbent)

    def compare(self, a: Candidate, b: Candidate, stage: str = "recheck") -> tuple[Candidate | None, str]:
        """The better of two measured candidates and why, or None when neither wins.

        One wins when its estimate beats the other's beyond noise. Otherwise, unless they are already
        equivalent, both are measured again, back to back, up to RECHECK_ROUNDS times; after each
        round the estimates are compared again, and so are the back-to-back pairs round by round (a
        load that slows both cancels). Equivalent or still undecided, neither wins."""
        pairs: list[tuple[Point, Point]] = []
        for round_number in range(RECHECK_ROUNDS + 1):
            ea, eb = self.estimate(a), self.estimate(b)
            versus = paired([x for x, _ in pairs], [y for _, y in pairs], self.objective)
            for x, ex, y, ey, ratio in ((a, ea, b, eb, versus.ratio), (b, eb, a, ea, 1.0 / versus.ratio)):
                if beats(ex, ey) or (ex.tier == ey.tier == 2 and versus.beyond_noise and ratio > 1.0):
                    again = (f" after {round_number} re-measurement round{'s' * (round_number != 1)}"
                             if round_number else "")
                    return x, f"{x.config_id} beats {y.config_id} beyond noise{again}"
            if (equivalent(ea, eb) or versus.equivalent) or round_number == RECHECK_ROUNDS or self.sample is None:
                break
            if self.time_budget is not None and \
                    not self.time_budget.allows_samples(2, min(len(self.results), FINALISTS + 1)):
                break  # the final round must still fit
            first, second = (a, b) if round_number % 2 == 0 else (b, a)
            self.remeasure(first, stage)
            self.remeasure(second, stage)
            pairs.append((self.samples[a.config_id][-1], self.samples[b.config_id][-1]))
        ea, eb = self.estimate(a), self.estimate(b)
        versus = paired([x for x, _ in pairs], [y for _, y in pairs], self.objective)
        numbers = f"{ea.describe()} vs {eb.describe()}"
        if equivalent(ea, eb) or versus.equivalent:
            return None, f"{a.config_id} and {b.config_id} are equivalent (within {EQUIVALENCE:.0%}: {numbers})"
        return None, (f"{a.config_id} and {b.config_id} cannot be told apart after {len(pairs)} re-measurement "
                      f"rounds ({numbers}); no step")

    def summary(self, candidate: Candidate) -> str:
        return f"{candidate.config_id} ({self.estimate(candidate).describe()})"

    def baseline(self) -> None:
        default = self.set.default
        self.measure(default, "baseline")
        name = "" if default.config_id == "default" else f" {default.config_id}"
        result = self.results[default.config_id].describe(self.objective, self.constraints)
        self.decide(f"baseline: the default config{name} ({result})")


def run_exhaustive(search: Search) -> None:
    """The default config, every candidate in grid order, then the final round."""
    try:
        search.baseline()
        for candidate in search.set.candidates:
            search.measure(candidate, "exhaustive")
        search.decide(f"exhaustive: measured all {len(search.results)} configs")
    except BudgetExhausted:
        search.decide(f"stopped: {search.budget_words()} after {len(search.results)} of {len(search.set.all)} configs")
    final_round(search)


def knob_values(candidates: list[Candidate]) -> dict[str, list]:
    """The values each knob takes over the candidates (ordered knobs sorted)."""
    values: dict[str, list] = {}
    for dim in ORDERED + UNORDERED:
        seen = list(dict.fromkeys(getattr(c.knobs, dim) for c in candidates))
        values[dim] = sorted(seen) if dim != "instance_kind" else seen
    return values


def smart_budget(candidates: CandidateSet, budget: int | None = None) -> int:
    """The most configs smart may measure: unless given, a quarter of the candidates, but never
    fewer than the baseline, the start, every knob's whole line and REFINE_ALLOWANCE more."""
    if budget is not None:
        return budget
    lines = 2 + sum(len(v) - 1 for v in knob_values(candidates.candidates).values()) + REFINE_ALLOWANCE
    total = len(candidates.all)
    return min(total, max(MIN_BUDGET, int(total * BUDGET_FRACTION), lines))


def final_round(search: Search) -> None:
    """Measure the best FINALISTS configs again, interleaved, and choose from those numbers."""
    passing = [search.by_id[i] for i, r in search.results.items() if r.best is not None]
    if not passing:
        search.decide("final round: no measured config meets the constraints; nothing to choose")
        return
    ranked = sorted(passing, key=lambda c: search.estimate(c).score, reverse=True)
    finalists = ranked[:FINALISTS]
    default = search.set.default
    if default in passing and default not in finalists:
        # The default is always measured head to head too: a choice is never one that a single
        # unlucky measurement of the default let through while it is worse than the default.
        finalists.append(default)
    if len(finalists) == 1 or search.sample is None:
        only = search.estimate(finalists[0])
        search.final = FinalRound([only], only, None, 0)
        search.decide(f"final round: {finalists[0].config_id} is the only measured config meeting the "
                      "constraints; chosen without a runner-up")
        return

    def rounds_of(e: Estimate) -> list[Point]:
        return [p for p in search.samples.get(e.config_id, []) if p.stage == "final"]

    def versus(a: Estimate, b: Estimate) -> Paired:
        return paired(rounds_of(a), rounds_of(b), search.objective)

    def beaten(a: Estimate, b: Estimate) -> bool:  # a beats b beyond noise
        if a.tier != b.tier:
            return a.tier > b.tier
        head = versus(a, b)
        return head.beyond_noise and head.ratio > 1.0

    def same(a: Estimate, b: Estimate) -> bool:
        return a.tier == b.tier == 2 and versus(a, b).equivalent

    def standing(e: Estimate, among: list[Estimate]) -> tuple[int, float]:
        """Meeting the constraints first, then the worst head-to-head ratio against the others."""
        return e.tier, min(versus(e, o).ratio for o in among if o is not e)

    rounds, group, cut = 0, list(finalists), False
    while True:
        for candidate in group[rounds % len(group):] + group[:rounds % len(group)]:  # rotate who goes first
            search.remeasure(candidate, "final")
        rounds += 1
        measured = [search.estimate(c, final=True) for c in finalists]
        estimates = sorted(measured, key=lambda e: standing(e, measured), reverse=True)
        leader = estimates[0]
        undecided = [e for e in estimates[1:] if not beaten(leader, e) and not same(leader, e)]
        if rounds < FINAL_ROUNDS:
            cut = search.time_budget is not None and not search.time_budget.allows_samples(len(group))
            if cut:
                break
            continue
        if not undecided or rounds >= FINAL_ROUNDS + FINAL_EXTRA_ROUNDS:
            break
        group = [search.by_id[e.config_id] for e in [leader, *undecided]]  # only the undecided go on
        if search.time_budget is not None and not search.time_budget.allows_samples(len(group)):
            break
    equal = [leader, *(e for e in estimates[1:] if same(leader, e))]
    chosen = min(equal, key=lambda e: cost(e.knobs))
    # A default that batches (or a model that cannot batch) is the incumbent: another config replaces
    # it only by beating it beyond noise, or by being equivalent and cheaper. A default that turns
    # batching off is not a place to stay on a model that can batch (the search starts elsewhere
    # for the same reason).
    knobs = search.set.default.knobs
    incumbent = knobs.dynamic_batching or knobs.max_batch_size == 0
    default = next((e for e in estimates if e.config_id == search.set.default.config_id), None) if incumbent else None
    unproven = None
    if default is not None and chosen is not default and not beaten(chosen, default) and not same(chosen, default):
        unproven, chosen = chosen.config_id, default
    # The runner-up is the closest competitor: the smallest head-to-head margin of the chosen config.
    runner_up = min((e for e in estimates if e is not chosen),
                    key=lambda e: (e.tier != chosen.tier, versus(chosen, e).ratio))
    final = FinalRound(estimates, chosen, runner_up, rounds, versus(chosen, runner_up),
                       [e.config_id for e in equal] if len(equal) > 1 and unproven is None else [], unproven)
    search.final = final
    standings = "; ".join(f"{e.config_id} {e.describe()}" for e in estimates)
    short = f" (cut short of {FINAL_ROUNDS} by the time budget)" if cut else ""
    search.decide(f"final round: {', '.join(c.config_id for c in finalists)} measured again head to head, "
                  f"interleaved, {rounds} round{'s' if rounds > 1 else ''}{short}: {standings}")
    search.decide(f"chosen: {chosen.config_id}, {final.verdict()}")
    check_load(search)


def chosen_result(final: FinalRound, results: list[ConfigResult]) -> ConfigResult:
    """The chosen config's result, its best point at the level the load check chose (when it ran)
    rather than the sweep's lowest-p99 near-tie."""
    result = next(r for r in results if r.config_id == final.chosen.config_id)
    if final.load is not None:
        result.best = final.load.chosen
    return result


def load_rival(search: Search, candidate: Candidate) -> Point | None:
    """The sweep point at another load level that the anchor does not beat beyond noise (the best such)."""
    anchor = search.anchor(candidate)
    if anchor is None or not search.constraints.meets(anchor):
        return None

    def alone(point: Point) -> Estimate:
        return estimate(candidate.config_id, candidate.knobs, [point], search.objective, search.constraints)

    close = [p for p in search.results[candidate.config_id].points
             if p.ok and p.repeat == 0 and p.level != anchor.level and search.constraints.meets(p)
             and not beats(alone(anchor), alone(p))]
    return max(close, key=search.objective.value, default=None)


def check_load(search: Search) -> None:
    """Measure the chosen config at its two best load levels head to head, LOAD_ROUNDS interleaved
    rounds, and recommend the lower unless the higher serves more and they are not equivalent."""
    final = search.final
    candidate = search.by_id[final.chosen.config_id]
    rival = load_rival(search, candidate) if search.sample is not None else None
    if rival is None:
        return
    if search.time_budget is not None and not search.time_budget.allows_samples(2 * LOAD_ROUNDS):
        search.decide(f"load check: skipped, the time budget is used up; {candidate.config_id} is recommended at "
                      f"{load_words(search.anchor(candidate))}")
        return
    low, high = sorted((search.anchor(candidate), rival), key=lambda p: p.level)
    taken: dict[float, list[Point]] = {low.level: [], high.level: []}
    for round_number in range(LOAD_ROUNDS):
        for level in (low.level, high.level) if round_number % 2 == 0 else (high.level, low.level):
            taken[level].append(search.sample_at(candidate, level, "load"))
    versus = paired(taken[high.level], taken[low.level], search.objective)
    lower, higher = (estimate(candidate.config_id, candidate.knobs, taken[p.level], search.objective,
                              search.constraints) for p in (low, high))
    if lower.point is None or higher.point is None:
        return  # a level failed to measure: the anchor stands
    if higher.tier != lower.tier:
        chosen = high if higher.tier > lower.tier else low
    else:
        chosen = high if versus.ratio > 1.0 and not versus.equivalent else low
    final.load = LoadCheck(lower, higher, versus, chosen)
    search.decide(f"load check: {candidate.config_id} at {final.load.verdict()}")


class GridClimb:
    """Smart's walk over a grid of configs: line searches along every knob, then a hill climb, then
    the final round. A subclass says what a position and a knob (``dim``) are: the single model's
    ``Knobs`` and knob names (``SmartSearch``), or a pipeline's joint knobs (pipeline_search)."""

    def __init__(self, search: Search, dims: list, position):
        self.search = search
        self.dims = dims  # the knobs the space varies, in the order the line searches take them
        self.position = position

    # --- the grid, per subclass ---------------------------------------------------------------
    def label(self, dim) -> str:
        raise NotImplementedError

    def values(self, dim) -> list:
        raise NotImplementedError

    def get(self, position, dim):
        raise NotImplementedError

    def set(self, position, dim, value):
        raise NotImplementedError

    def at(self, position) -> Candidate | None:
        raise NotImplementedError

    def ordered(self, dim) -> bool:
        """Whether the knob's values are a line (a step is a neighbour) or a set."""
        raise NotImplementedError

    def start_words(self, start: Candidate) -> str:
        raise NotImplementedError

    # --- the walk -----------------------------------------------------------------------------
    def run(self) -> None:
        search = self.search
        pending = list(self.dims)
        try:
            search.baseline()
            start = self.at(self.position)
            search.measure(start, "explore")
            search.decide(f"explore: start at {search.summary(start)}, {self.start_words(start)}")
            if search.objective.throughput_weight == 1.0:
                # Every config met so far was swept from the lowest load; the others start near the
                # best one's peak load (and walk down when they peak lower): a sweep in half the points.
                search.warm_start = True
            for dim in list(pending):
                self._line_search(dim)
                pending.remove(dim)
            self._refine()
        except BudgetExhausted:
            search.unexplored = [self.label(dim) for dim in pending]
            missed = (f"; the line search did not cover: {', '.join(search.unexplored)}" if pending
                      else "; every knob's line was covered, the hill climb was cut short")
            raise_it = "--time-budget" if search.out_of_time else "--budget"
            search.decide(f"stopped: {search.budget_words()}{missed} (raise it with {raise_it})")
        final_round(search)

    def _step(self, position, dim, step: int):
        values = self.values(dim)
        index = values.index(self.get(position, dim)) + step
        if not 0 <= index < len(values):
            return None
        return self.set(position, dim, values[index])

    def _neighbours(self, position, dim) -> list:
        if not self.ordered(dim):
            return [self.set(position, dim, v) for v in self.values(dim)]
        return [p for p in (self._step(position, dim, -1), self._step(position, dim, 1)) if p is not None]

    def _line_search(self, dim) -> None:
        """Walk the knob's line both ways from the current config while each value measures no worse
        (beyond noise) than the best one so far, so a plateau does not stop the walk; then step to the
        best value on the line only if it beats the current config beyond noise."""
        search, label = self.search, self.label(dim)
        home = self.at(self.position)
        best, walked = home, []
        if not self.ordered(dim):
            lines = [[self.set(self.position, dim, v) for v in self.values(dim)]]
        else:
            lines = []
            for direction in (-1, 1):
                line, position = [], self.position
                while (position := self._step(position, dim, direction)) is not None:
                    line.append(position)
                lines.append(line)
        for line in lines:
            for position in line:
                candidate = self.at(position)
                if candidate is None or candidate is home or any(candidate is w for w in walked):
                    continue
                search.measure(candidate, "explore")
                walked.append(candidate)
                if search.confirmed_worse(candidate, best):
                    break  # clearly worse: further along this way is not worth measuring
                if search.estimate(candidate).score > search.estimate(best).score:
                    best = candidate
        here = self.get(self.position, dim)
        tried = ", ".join(str(self.get(c.knobs, dim)) for c in walked)
        if best is home:
            verdict = f"tried {tried}, none measured better" if walked else "no other value applies here"
            search.decide(f"explore {label}: keep {here} - {search.summary(home)}; {verdict}")
            return
        winner, why = search.step(best, home)
        if winner is not best:
            search.decide(f"explore {label}: keep {here} - {search.summary(home)}; tried {tried}; the best of them "
                          f"does not win: {why}")
            return
        search.decide(f"explore {label}: {here} -> {self.get(best.knobs, dim)} (tried {tried}); "
                      f"now {search.summary(best)}: {why}")
        self.position = best.knobs  # a batch of 1 has no delay: moving on from it starts at the lowest

    def _refine(self) -> None:
        search = self.search
        visited = {self.at(self.position).config_id}
        while True:
            home = self.at(self.position)
            neighbours: list[Candidate] = []
            for dim in self.dims:
                for position in self._neighbours(self.position, dim):
                    candidate = self.at(position)
                    if candidate is not None and candidate is not home and all(candidate is not c for c in neighbours):
                        neighbours.append(candidate)
            fresh = [c.config_id for c in neighbours if c.config_id not in search.results]
            for candidate in neighbours:
                search.measure(candidate, "refine")
            ranked = sorted(neighbours, key=lambda c: search.estimate(c).score, reverse=True)
            challenger = next((c for c in ranked if c.config_id not in visited), None)
            winner, why = (search.step(challenger, home) if challenger is not None
                           else (None, "no neighbour left to try"))
            if challenger is None or winner is not challenger:
                search.decide(f"refine: no neighbour of {home.config_id} wins ({len(fresh)} newly measured; {why}); "
                              f"done at {search.summary(home)}")
                return
            search.decide(f"refine: move to {search.summary(winner)}: {why}")
            visited.add(winner.config_id)
            self.position = winner.knobs


def middle(values: list, above):
    """The middle of the values above ``above`` (of all of them when none is): a start that batching
    can win from takes the middle max batch size above 1 and the middle queue delay above 0."""
    larger = [v for v in values if v > above] or values
    return larger[(len(larger) - 1) // 2]


def start_knobs(values: dict[str, list], default: Knobs, dynamic_batching: bool) -> Knobs:
    """Where smart starts on one model's grid: the middle max batch size above 1 and the middle queue
    delay above 0 (when the space has such values), the fewest instances, the model's instance kind,
    no preferred size (perhaps not a candidate: see ``nearest``)."""
    position = {dim: v[0] for dim, v in values.items()}
    position["max_batch_size"] = middle(values["max_batch_size"], 1)
    position["max_queue_delay_us"] = middle(values["max_queue_delay_us"], 0)
    kinds = values["instance_kind"]
    position["instance_kind"] = default.instance_kind if default.instance_kind in kinds else kinds[0]
    return Knobs(**{**position, "dynamic_batching": dynamic_batching})


def nearest(lookup: dict[Knobs, object], values: dict[str, list], wanted: Knobs) -> Knobs:
    """``wanted`` when it is a candidate, else the candidate fewest grid steps away."""
    if wanted in lookup:
        return wanted

    def distance(knobs: Knobs) -> int:
        return sum(abs(values[d].index(getattr(knobs, d)) - values[d].index(getattr(wanted, d)))
                   for d in ORDERED + UNORDERED)

    return min(lookup, key=distance)


class SmartSearch(GridClimb):
    """Smart on one model's candidates, a position being its ``Knobs``."""

    def __init__(self, search: Search):
        candidates = search.set.candidates
        self.lookup: dict[Knobs, Candidate] = {c.knobs: c for c in candidates}
        self.grid = knob_values(candidates)
        some = next(iter(self.lookup))
        wanted = start_knobs(self.grid, search.set.default.knobs, some.dynamic_batching)
        start = wanted if self.at(wanted) is not None else nearest(self.lookup, self.grid, wanted)
        super().__init__(search, [dim for dim in ORDERED + UNORDERED if len(self.grid[dim]) > 1], start)

    def label(self, dim: str) -> str:
        return LABELS[dim]

    def values(self, dim: str) -> list:
        return self.grid[dim]

    def get(self, position: Knobs, dim: str):
        return getattr(position, dim)

    def set(self, position: Knobs, dim: str, value) -> Knobs:
        return replace(position, **{dim: value})

    def ordered(self, dim: str) -> bool:
        return dim in ORDERED

    def start_words(self, start: Candidate) -> str:
        return "the middle of the space" + (", with batching on" if start.knobs.max_batch_size > 1 else "")

    def at(self, position: Knobs) -> Candidate | None:
        """The candidate at a grid position; a batch of 1 never waits, so its delay and preferred
        size do not matter; a preferred size at or above the max batch size is none."""
        knobs = position
        if knobs.max_batch_size <= 1:
            knobs = replace(knobs, max_queue_delay_us=0, preferred_batch_size=0)
        elif knobs.preferred_batch_size >= knobs.max_batch_size:
            knobs = replace(knobs, preferred_batch_size=0)
        return self.lookup.get(knobs)


def run_smart(search: Search) -> None:
    SmartSearch(search).run()
