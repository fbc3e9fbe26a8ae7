"""The smart search over a pipeline's joint knobs: the single-model search (``strategy``) with a
knob per step and knob kind ("pre: max batch size", "post: instance count", ...).

Every step starts where the single-model search starts (the middle max batch size above 1, the
middle queue delay above 0, the fewest instances, the step's instance kind); then a line search
along every joint knob, knob kind by knob kind in order of effect and step by step within a
kind, then the hill climb over the neighbours in every joint knob, then the final round. The
comparisons, their re-measurements and the final round are the single-model search's
(``Search``), measured on the pipeline's endpoint.

The default budget covers the baseline, the start, every joint knob's whole line and
``REFINE_ALLOWANCE`` more configs per step; a quarter of the product would grow with the product.
"""

from __future__ import annotations

from dataclasses import replace

from tritonctl.analyzer.noise import beats
from tritonctl.analyzer.pipeline_space import JointSpace, PipelineCandidate, PipelineKnobs
from tritonctl.analyzer.search import Knobs
from tritonctl.analyzer.strategy import (LABELS, ORDERED, REFINE_ALLOWANCE, UNORDERED, BudgetExhausted, Search,
                                         final_round, knob_values)

Dim = tuple[int, str]  # (step index, knob)


class JointSmartSearch:
    """Coordinate line searches, then a hill climb, over the product of the steps' grids."""

    def __init__(self, search: Search, space: JointSpace):
        self.search = search
        self.space = space
        self.names = space.pipeline.names
        self.values = [knob_values(step.candidates.candidates) for step in space.pipeline.steps]
        self.dims: list[Dim] = [(i, dim) for dim in ORDERED + UNORDERED for i in range(len(self.names))
                                if len(self.values[i][dim]) > 1]
        self.position = self._start()

    def label(self, dim: Dim) -> str:
        return f"{self.names[dim[0]]}: {LABELS[dim[1]]}"

    def run(self) -> None:
        search = self.search
        pending = list(self.dims)
        try:
            search.baseline()
            start = self.at(self.position)
            search.measure(start, "explore")
            search.decide(f"explore: start at {search.summary(start)}, the middle of every step's space")
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

    # --- grid ----------------------------------------------------------------------------
    def _start(self) -> PipelineKnobs:
        def middle(values: list, above):
            larger = [v for v in values if v > above] or values
            return larger[(len(larger) - 1) // 2]

        steps = []
        for step, values in zip(self.space.pipeline.steps, self.values):
            position = {dim: v[0] for dim, v in values.items()}
            position["max_batch_size"] = middle(values["max_batch_size"], 1)
            position["max_queue_delay_us"] = middle(values["max_queue_delay_us"], 0)
            default = step.candidates.default.knobs
            kinds = values["instance_kind"]
            position["instance_kind"] = default.instance_kind if default.instance_kind in kinds else kinds[0]
            some = next(iter(step.lookup))
            wanted = Knobs(**{**position, "dynamic_batching": some.dynamic_batching})
            steps.append(wanted if wanted in step.lookup else _nearest(step.lookup, values, wanted))
        return PipelineKnobs(self.names, tuple(steps))

    def at(self, position: PipelineKnobs) -> PipelineCandidate | None:
        return self.space.at(position)

    def get(self, position: PipelineKnobs, dim: Dim):
        return getattr(position.steps[dim[0]], dim[1])

    def set(self, position: PipelineKnobs, dim: Dim, value) -> PipelineKnobs:
        index, knob = dim
        return position.with_step(index, replace(position.steps[index], **{knob: value}))

    def _step(self, position: PipelineKnobs, dim: Dim, step: int) -> PipelineKnobs | None:
        values = self.values[dim[0]][dim[1]]
        index = values.index(self.get(position, dim)) + step
        if not 0 <= index < len(values):
            return None
        return self.set(position, dim, values[index])

    def _neighbours(self, position: PipelineKnobs, dim: Dim) -> list[PipelineKnobs]:
        if dim[1] in UNORDERED:
            return [self.set(position, dim, v) for v in self.values[dim[0]][dim[1]]]
        return [p for p in (self._step(position, dim, -1), self._step(position, dim, 1)) if p]

    # --- explore ---------------------------------------------------------------------------
    def _line_search(self, dim: Dim) -> None:
        """As the single-model search: walk the joint knob's line both ways while each value measures
        no worse (beyond noise) than the best so far; step to the best only on a win beyond noise."""
        search, label = self.search, self.label(dim)
        home = self.at(self.position)
        best, walked = home, []
        if dim[1] in UNORDERED:
            lines = [[self.set(self.position, dim, v) for v in self.values[dim[0]][dim[1]]]]
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
                if beats(search.estimate(best), search.estimate(candidate)):
                    break
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
        self.position = best.knobs

    # --- refine ----------------------------------------------------------------------------
    def _refine(self) -> None:
        search = self.search
        visited = {self.at(self.position).config_id}
        while True:
            home = self.at(self.position)
            neighbours: list[PipelineCandidate] = []
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


def _nearest(lookup: dict[Knobs, object], values: dict[str, list], wanted: Knobs) -> Knobs:
    """The step candidate fewest grid steps away from ``wanted``."""
    def distance(knobs: Knobs) -> int:
        return sum(abs(values[d].index(getattr(knobs, d)) - values[d].index(getattr(wanted, d)))
                   for d in ORDERED + UNORDERED)

    return min(lookup, key=distance)


def joint_budget(space: JointSpace, budget: int | None = None) -> int:
    """The most joint configs smart measures: the baseline, the start, every joint knob's line and
    REFINE_ALLOWANCE per step (or ``budget``), never more than there are."""
    if budget is not None:
        return budget
    lines = 2 + sum(len(v) - 1 for values in (knob_values(s.candidates.candidates) for s in space.pipeline.steps)
                    for v in values.values())
    return min(space.total, lines + REFINE_ALLOWANCE * len(space.pipeline.steps))


def register(search: Search, space: JointSpace) -> None:
    """Let the search find joint candidates made after it started (the final round looks them up)."""

    class Registry(dict):
        def __missing__(self, config_id: str):
            for candidate in space.set.all:
                if candidate.config_id == config_id:
                    self[config_id] = candidate
                    return candidate
            raise KeyError(config_id)

    search.by_id = Registry(search.by_id)
