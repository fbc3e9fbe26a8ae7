"""Search strategies: ``exhaustive`` measures every candidate; ``smart`` climbs the grid.

``smart`` follows Model Analyzer's quick search, with the queue delay as a dimension too:

1. baseline: the default config, so every result can be compared with it;
2. explore: from the middle of the space, a line search along each knob in order of effect
   (instance count, max batch size, queue delay, then preferred size and kind): step to the
   better neighbour and keep going in that direction while each step is better;
3. refine: hill-climb from the best config over the neighbours in every knob until no neighbour
   wins by more than noise.

A config that meets the constraints beats one that does not; between two that miss them, the one
closer to meeting them is better; between two that meet them, the objective decides, and for the
hill climb only a gain larger than noise (3 %) counts.

It never measures more than its budget (a quarter of the candidates by default) and records
every decision, with the numbers it was made on.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from tritonctl.analyzer.objective import NOISE, ConfigResult, Constraints, Objective, improves
from tritonctl.analyzer.search import Candidate, CandidateSet, Knobs

Evaluate = Callable[[Candidate, str], ConfigResult]
# Knobs in order of effect; the first three are ordered (a step is a neighbour), the others are sets.
ORDERED = ("instance_count", "max_batch_size", "max_queue_delay_us")
UNORDERED = ("preferred_batch_size", "instance_kind")
LABELS = {"instance_count": "instance count", "max_batch_size": "max batch size",
          "max_queue_delay_us": "queue delay (us)", "preferred_batch_size": "preferred batch size",
          "instance_kind": "instance kind"}
# A line search steps on any gain (gentle slopes add up over a few steps; each step only ever goes
# up, so noise cannot make it wander); the hill climb moves only on a gain larger than noise.
LINE_TOLERANCE = 0.0
BUDGET_FRACTION = 0.25
MIN_BUDGET = 3


class BudgetExhausted(Exception):
    """The smart search may not measure another config."""


class Search:
    """Measures candidates at most once each and keeps the decisions."""

    def __init__(self, candidates: CandidateSet, evaluate: Evaluate, objective: Objective,
                 constraints: Constraints, decide: Callable[[str], None] | None = None, budget: int | None = None):
        self.set = candidates
        self.evaluate = evaluate
        self.objective = objective
        self.constraints = constraints
        self.results: dict[str, ConfigResult] = {}
        self.decisions: list[str] = []
        self._decide = decide or (lambda _text: None)
        self.budget = budget

    def decide(self, text: str) -> None:
        self.decisions.append(text)
        self._decide(text)

    def measure(self, candidate: Candidate, stage: str) -> ConfigResult:
        if candidate.config_id not in self.results:
            if self.budget is not None and len(self.results) >= self.budget:
                raise BudgetExhausted
            self.results[candidate.config_id] = self.evaluate(candidate, stage)
        return self.results[candidate.config_id]

    def score(self, candidate: Candidate) -> tuple[int, float]:
        return self.results[candidate.config_id].score(self.objective, self.constraints)

    def summary(self, candidate: Candidate) -> str:
        return f"{candidate.config_id} ({self.results[candidate.config_id].describe(self.objective, self.constraints)})"

    def baseline(self) -> None:
        default = self.set.default
        self.measure(default, "baseline")
        name = "" if default.config_id == "default" else f" {default.config_id}"
        result = self.results[default.config_id].describe(self.objective, self.constraints)
        self.decide(f"baseline: the default config{name} ({result})")


def run_exhaustive(search: Search) -> None:
    """The default config, then every candidate in grid order."""
    search.baseline()
    for candidate in search.set.candidates:
        search.measure(candidate, "exhaustive")
    search.decide(f"exhaustive: measured all {len(search.results)} configs")


def smart_budget(total: int, budget: int | None = None) -> int:
    """The most configs smart may measure: a quarter of the candidates (at least 3) unless given."""
    return budget if budget is not None else max(MIN_BUDGET, math.floor(total * BUDGET_FRACTION))


class SmartSearch:
    """Coordinate line searches, then a hill climb, over the grid of knob values."""

    def __init__(self, search: Search):
        self.search = search
        candidates = search.set.candidates
        self.lookup: dict[Knobs, Candidate] = {c.knobs: c for c in candidates}
        self.values: dict[str, list] = {}
        for dim in ORDERED + UNORDERED:
            seen = list(dict.fromkeys(getattr(c.knobs, dim) for c in candidates))
            self.values[dim] = sorted(seen) if dim != "instance_kind" else seen
        self.position = self._start()

    def run(self) -> None:
        search = self.search
        try:
            search.baseline()
            start = self.at(self.position)
            search.measure(start, "explore")
            search.decide(f"explore: start in the middle of the space at {search.summary(start)}")
            for dim in ORDERED + UNORDERED:
                if len(self.values[dim]) > 1:
                    self._line_search(dim)
            self._refine()
        except BudgetExhausted:
            search.decide(f"stopped: the budget of {search.budget} measured configs is used up "
                          "(raise it with --budget)")

    # --- grid ----------------------------------------------------------------------------
    def _start(self) -> Knobs:
        """The middle value of each ordered knob, the first of the others (no preferred size)."""
        middle = {dim: values[(len(values) - 1) // 2] for dim, values in self.values.items()}
        middle["instance_count"] = self.values["instance_count"][0]
        middle["preferred_batch_size"] = self.values["preferred_batch_size"][0]
        default = self.search.set.default.knobs
        kinds = self.values["instance_kind"]
        middle["instance_kind"] = default.instance_kind if default.instance_kind in kinds else kinds[0]
        some = next(iter(self.lookup))
        return self._nearest(Knobs(**{**middle, "dynamic_batching": some.dynamic_batching}))

    def _nearest(self, position: Knobs) -> Knobs:
        """The position itself when it is a candidate, else the candidate fewest grid steps away."""
        if self.at(position) is not None:
            return position

        def distance(knobs: Knobs) -> int:
            return sum(abs(self.values[d].index(getattr(knobs, d)) - self.values[d].index(getattr(position, d)))
                       for d in ORDERED + UNORDERED)

        return min(self.lookup, key=distance)

    def at(self, position: Knobs) -> Candidate | None:
        """The candidate at a grid position; a batch of 1 never waits, so its delay and preferred
        size do not matter; a preferred size at or above the max batch size is none."""
        knobs = position
        if knobs.max_batch_size <= 1:
            knobs = replace(knobs, max_queue_delay_us=0, preferred_batch_size=0)
        elif knobs.preferred_batch_size >= knobs.max_batch_size:
            knobs = replace(knobs, preferred_batch_size=0)
        return self.lookup.get(knobs)

    def _step(self, position: Knobs, dim: str, step: int) -> Knobs | None:
        values = self.values[dim]
        index = values.index(getattr(position, dim)) + step
        if not 0 <= index < len(values):
            return None
        return replace(position, **{dim: values[index]})

    # --- explore ---------------------------------------------------------------------------
    def _better(self, a: Candidate, b: Candidate, tolerance: float = NOISE) -> bool:
        return improves(self.search.score(a), self.search.score(b), tolerance)

    def _line_search(self, dim: str) -> None:
        search, label = self.search, LABELS[dim]
        home = self.at(self.position)
        if dim in UNORDERED:
            options = [replace(self.position, **{dim: v}) for v in self.values[dim]]
        else:
            options = [p for p in (self._step(self.position, dim, -1), self._step(self.position, dim, 1)) if p]
        best_position, best = self.position, home
        for option in options:
            candidate = self.at(option)
            if candidate is None or candidate is home:
                continue
            search.measure(candidate, "explore")
            if self._better(candidate, best, LINE_TOLERANCE):
                best_position, best = option, candidate
        if best is home:
            tried = ", ".join(str(getattr(o, dim)) for o in options if self.at(o) not in (None, home))
            verdict = f"tried {tried}, none better" if tried else "no other value applies here"
            search.decide(f"explore {label}: keep {getattr(self.position, dim)} - {search.summary(home)}; {verdict}")
            return
        direction = 0 if dim in UNORDERED else (1 if getattr(best_position, dim) > getattr(self.position, dim) else -1)
        path = [getattr(best_position, dim)]
        while direction:
            following = self._step(best_position, dim, direction)
            candidate = self.at(following) if following else None
            if candidate is None:
                break
            search.measure(candidate, "explore")
            if not self._better(candidate, best, LINE_TOLERANCE):
                break
            best_position, best = following, candidate
            path.append(getattr(following, dim))
        search.decide(f"explore {label}: {getattr(self.position, dim)} -> {' -> '.join(map(str, path))}, "
                      f"each step a win; now {search.summary(best)}")
        self.position = best.knobs  # a batch of 1 has no delay: moving on from it starts at the lowest

    # --- refine ----------------------------------------------------------------------------
    def _refine(self) -> None:
        search = self.search
        while True:
            home = self.at(self.position)
            neighbours: list[tuple[Knobs, Candidate]] = []
            for dim in ORDERED + UNORDERED:
                if dim in UNORDERED:
                    steps = [replace(self.position, **{dim: v}) for v in self.values[dim]]
                else:
                    steps = [p for p in (self._step(self.position, dim, -1), self._step(self.position, dim, 1)) if p]
                for position in steps:
                    candidate = self.at(position)
                    if candidate is not None and candidate is not home and \
                            all(candidate is not c for _, c in neighbours):
                        neighbours.append((position, candidate))
            fresh = [c.config_id for _, c in neighbours if c.config_id not in search.results]
            for _, candidate in neighbours:
                search.measure(candidate, "refine")
            winner = max(neighbours, key=lambda pc: search.score(pc[1]), default=None)
            if winner is None or not self._better(winner[1], home):
                search.decide(f"refine: no neighbour of {home.config_id} wins by more than {NOISE:.0%} "
                              f"({len(fresh)} newly measured); done at {search.summary(home)}")
                return
            search.decide(f"refine: move to {search.summary(winner[1])}, better than {home.config_id}")
            self.position = winner[1].knobs


def run_smart(search: Search) -> None:
    SmartSearch(search).run()
