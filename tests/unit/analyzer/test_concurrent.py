"""How --concurrent combines the models' best configs and chooses a combination: max-min of the
models' shares of their best alone, constraints first, the models' own choices kept within noise."""

from __future__ import annotations

from tritonctl.analyzer.concurrent import Choice, Combination, choose, combinations
from tritonctl.analyzer.objective import Constraints, Objective
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Candidate, Knobs


def point(config_id: str, throughput: float, p99: float = 5.0, stage: str = "explore") -> Point:
    return Point(config_id, f"h-{config_id}", Knobs(8), False, 4, stage, throughput=throughput, p99_ms=p99,
                 stable=True)


def choice(model: str, config_id: str, alone: float, best_alone: float) -> Choice:
    return Choice(model, Candidate(Knobs(8), None, config_id=config_id), point(config_id, alone),
                  point("best", best_alone))


def together(choices: tuple[Choice, ...], *measured: tuple[float, float], own: bool = False) -> Combination:
    combination = Combination(choices, [point(c.candidate.config_id, t, p99, "concurrent")
                                        for c, (t, p99) in zip(choices, measured)])
    combination.own_choices = own
    return combination


A1, A2 = choice("a", "a1", 1000, 1000), choice("a", "a2", 800, 1000)
B1, B2 = choice("b", "b1", 100, 100), choice("b", "b2", 90, 100)


def test_every_pairing_with_the_own_choices_first_and_at_most_the_limit():
    combos = combinations([[A1, A2], [B1, B2], [choice("c", "c1", 1, 1), choice("c", "c2", 1, 1)]], limit=4)
    assert combos[0].own_choices and [c.candidate.config_id for c in combos[0].choices] == ["a1", "b1", "c1"]
    assert len(combos) == 4 and not any(c.own_choices for c in combos[1:])
    assert len({c.id for c in combos}) == 4 and combos[0].id == "a:a1@4 + b:b1@4 + c:c1@4"


def test_the_worst_served_model_decides():
    objective = Objective()
    # Own choices: a keeps 90 %, b only 30 %. The other: a 60 %, b 55 %: its worst model fares better.
    own = together((A1, B1), (900, 5.0), (30, 5.0), own=True)
    fair = together((A2, B2), (600, 5.0), (55, 5.0))
    assert own.shares(objective) == [0.9, 0.3] and fair.shares(objective) == [0.6, 0.55]
    assert choose([own, fair], objective, Constraints()) is fair
    # A sum would have kept the own choices; a combination missing a constraint never wins.
    assert choose([own, fair], objective, Constraints(max_p99_ms=4.0)) is None
    slow = together((A2, B2), (600, 5.0), (55, 9.0))
    assert choose([own, slow], objective, Constraints(max_p99_ms=8.0)) is own


def test_within_noise_the_own_choices_stay():
    objective = Objective()
    own = together((A1, B1), (500, 5.0), (50, 5.0), own=True)
    other = together((A2, B2), (510, 5.0), (51, 5.0))  # 2 % better: noise
    assert choose([other, own], objective, Constraints()) is own
    better = together((A2, B2), (600, 5.0), (60, 5.0))
    assert choose([other, own, better], objective, Constraints()) is better
