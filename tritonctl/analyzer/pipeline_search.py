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

from tritonctl.analyzer.pipeline_space import JointSpace, PipelineCandidate, PipelineKnobs
from tritonctl.analyzer.strategy import (LABELS, ORDERED, REFINE_ALLOWANCE, UNORDERED, GridClimb, Search, knob_values,
                                         nearest, start_knobs)

Dim = tuple[int, str]  # (step index, knob)


class JointSmartSearch(GridClimb):
    """Smart over the product of the steps' grids, a position being the steps' knobs together."""

    def __init__(self, search: Search, space: JointSpace):
        self.space = space
        self.names = space.pipeline.names
        self.grids = [knob_values(step.candidates.candidates) for step in space.pipeline.steps]
        dims: list[Dim] = [(i, dim) for dim in ORDERED + UNORDERED for i in range(len(self.names))
                           if len(self.grids[i][dim]) > 1]
        super().__init__(search, dims, self._start())

    def _start(self) -> PipelineKnobs:
        """Every step where the single-model search starts, or the step candidate nearest it."""
        steps = []
        for step, values in zip(self.space.pipeline.steps, self.grids):
            some = next(iter(step.lookup))
            steps.append(nearest(step.lookup, values,
                                 start_knobs(values, step.candidates.default.knobs, some.dynamic_batching)))
        return PipelineKnobs(self.names, tuple(steps))

    def label(self, dim: Dim) -> str:
        return f"{self.names[dim[0]]}: {LABELS[dim[1]]}"

    def values(self, dim: Dim) -> list:
        return self.grids[dim[0]][dim[1]]

    def get(self, position: PipelineKnobs, dim: Dim):
        return getattr(position.steps[dim[0]], dim[1])

    def set(self, position: PipelineKnobs, dim: Dim, value) -> PipelineKnobs:
        index, knob = dim
        return position.with_step(index, replace(position.steps[index], **{knob: value}))

    def at(self, position: PipelineKnobs) -> PipelineCandidate | None:
        return self.space.at(position)

    def ordered(self, dim: Dim) -> bool:
        return dim[1] in ORDERED

    def start_words(self, start: PipelineCandidate) -> str:
        return "the middle of every step's space"


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
