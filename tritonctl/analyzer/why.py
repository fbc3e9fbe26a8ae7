"""Why the chosen config won, in numbers, from the points already measured.

For each knob the search varied, the effect of moving it away from the winner's value: the
configs measured that differ from the winner in that knob only (the winner's neighbours along the
knob), each compared with the winner by their best sweep points, the same points the results table
shows. Where no such neighbour was measured, the line search's data stands in: pairs of measured
configs that differ in that knob only, one of them at the winner's value, compared with each other
("measured elsewhere"). A knob with neither is "not measured". Knobs are ranked by how much moving
them away from the winner costs (a neighbour that misses the constraints counts as the largest cost).

The trade-off against the runner-up uses the final round's head-to-head medians when there was a
final round, and the two configs' best sweep points either way, with what each config costs
(instances, max batch size and the other knobs that differ).

Nothing here measures anything: every number is one the run already recorded.
"""

from __future__ import annotations

import math
from dataclasses import fields

from tritonctl.analyzer.objective import ConfigResult, Constraints, Objective
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Knobs

KNOBS = (
    ("instance_count", "instance count"),
    ("instance_kind", "instance kind"),
    ("max_batch_size", "max batch size"),
    ("preferred_batch_size", "preferred batch size"),
    ("max_queue_delay_us", "queue delay (µs)"),
    ("max_queue_size", "max queue size"),
    ("queue_timeout_us", "queue timeout (µs)"),
    ("dynamic_batching", "dynamic batcher"),
)
_WAITING = ("max_queue_delay_us", "preferred_batch_size")  # meaningless at max_batch_size 1: a batch of 1 never waits


def differs_only_in(a: Knobs, b: Knobs, knob: str) -> bool:
    """Whether two configs differ in ``knob`` and in nothing else that matters to the batcher (with a
    max batch size of 1 on either side, the queue delay and preferred size do not matter)."""
    if getattr(a, knob) == getattr(b, knob):
        return False
    loose = knob == "max_batch_size" and min(a.max_batch_size, b.max_batch_size) <= 1
    for field in fields(Knobs):
        name = field.name
        if name == knob or (loose and name in _WAITING):
            continue
        if getattr(a, name) != getattr(b, name):
            return False
    return True


def explain(results: list[ConfigResult], best: ConfigResult, final: dict | None, objective: Objective,
            constraints: Constraints, searched: dict[str, list]) -> dict:
    """The "why it won" section of summary.json. ``searched``: the values each knob took over the
    candidates (knobs with one value are left out: the search did not vary them)."""
    winner = _point(best, constraints)
    knobs = []
    for knob, label in KNOBS:
        values = searched.get(knob) or []
        if len(values) < 2:
            continue
        knobs.append(_knob(knob, label, values, best, winner, results, objective, constraints))
    knobs.sort(key=lambda k: (k["status"] != "measured", -k["_rank"]))
    for entry in knobs:
        del entry["_rank"]
        for change in entry["changes"]:
            change.pop("_load", None)
            change.pop("_base_load", None)
    return {
        "winner": {"config_id": best.config_id, **_numbers(winner, objective, constraints)},
        "knobs": knobs,
        "runner_up": _runner_up(results, best, winner, final, objective, constraints),
        "basis": "each config's best point of its load sweep (the points in measurements.csv with repeat 0), "
                 "except the final round's medians where stated",
    }


def _knob(knob: str, label: str, values: list, best: ConfigResult, winner: Point, results: list[ConfigResult],
          objective: Objective, constraints: Constraints) -> dict:
    mine = getattr(best.knobs, knob)
    entry = {"knob": knob, "label": label, "winner_value": _plain(mine), "values": [_plain(v) for v in values]}
    neighbours = [r for r in results if r.config_id != best.config_id and differs_only_in(best.knobs, r.knobs, knob)]
    changes = []
    for other in sorted(neighbours, key=lambda r: _order(getattr(r.knobs, knob))):
        point = _point(other, constraints)
        if point is None:
            continue
        changes.append({"config_id": other.config_id, "value": _plain(getattr(other.knobs, knob)),
                        **_numbers(point, objective, constraints), **_versus(point, winner, objective)})
    if changes:
        entry.update(status="measured", changes=changes, _rank=max(_cost(c) for c in changes))
        entry["summary"] = _summary(label, mine, changes, "")
        return entry
    pairs = []
    for base in results:
        if getattr(base.knobs, knob) != mine or base.config_id == best.config_id:
            continue
        base_point = _point(base, constraints)
        for other in results:
            if not differs_only_in(base.knobs, other.knobs, knob):
                continue
            point = _point(other, constraints)
            if base_point is None or point is None:
                continue
            pairs.append({"from_config_id": base.config_id, "config_id": other.config_id,
                          "value": _plain(getattr(other.knobs, knob)), **_numbers(point, objective, constraints),
                          **_versus(point, base_point, objective)})
    if pairs:
        entry.update(status="measured elsewhere", changes=pairs, _rank=max(_cost(c) for c in pairs))
        entry["summary"] = _summary(label, mine, pairs, f" (measured from {pairs[0]['from_config_id']}, not from "
                                                        "the winner)")
        return entry
    entry.update(status="not measured", changes=[], _rank=-math.inf,
                 summary=f"{label}: not measured; no measured config differs from {best.config_id} (or from another "
                         f"config at {_plain(mine)}) in this knob only")
    return entry


def _runner_up(results: list[ConfigResult], best: ConfigResult, winner: Point, final: dict | None,
               objective: Objective, constraints: Constraints) -> dict | None:
    by_id = {r.config_id: r for r in results}
    name = (final or {}).get("runner_up")
    source = "final round"
    if name is None or name not in by_id:
        others = sorted((r for r in results if r.config_id != best.config_id and _point(r, constraints)),
                        key=lambda r: r.score(objective, constraints), reverse=True)
        if not others:
            return None
        name, source = others[0].config_id, "sweeps"
    other = by_id[name]
    point = _point(other, constraints)
    entry = {"config_id": name, "chosen_by": source,
             "sweep": {"runner_up": _numbers(point, objective, constraints),
                       **_versus(point, winner, objective)},
             "knobs_that_differ": {f.name: [_plain(getattr(best.knobs, f.name)), _plain(getattr(other.knobs, f.name))]
                                   for f in fields(Knobs)
                                   if getattr(best.knobs, f.name) != getattr(other.knobs, f.name)},
             "resources": {"winner": _resources(best.knobs), "runner_up": _resources(other.knobs)}}
    if source == "final round":
        rows = {f["config_id"]: f for f in final.get("finalists") or ()}
        mine, theirs = rows.get(best.config_id), rows.get(name)
        if mine and theirs and mine.get("throughput") is not None and theirs.get("throughput") is not None:
            entry["final_round"] = {
                "rounds": final.get("rounds"), "winner_throughput": mine["throughput"], "winner_p99_ms": mine["p99_ms"],
                "runner_up_throughput": theirs["throughput"], "runner_up_p99_ms": theirs["p99_ms"],
                "margin": final.get("margin"), "band": final.get("band"), "beyond_noise": final.get("beyond_noise")}
    entry["summary"] = _runner_up_words(best, entry, point, winner)
    entry["sweep"].pop("_load", None)
    entry["sweep"].pop("_base_load", None)
    return entry


def _point(result: ConfigResult, constraints: Constraints) -> Point | None:
    """A config's best point, or, when none meets the constraints, the one closest to meeting them."""
    if result.best is not None:
        return result.best
    ok = [p for p in result.points if p.ok]
    return min(ok, key=constraints.violation) if ok else None


def _numbers(point: Point | None, objective: Objective, constraints: Constraints) -> dict:
    if point is None:
        return {"measured": False}
    return {"throughput": point.throughput, "p99_ms": point.p99_ms, "reject_rate": point.reject_rate,
            "objective": objective.value(point), "meets_constraints": constraints.meets(point),
            "load": point.load, "level": point.level}


def _versus(point: Point, base: Point | None, objective: Objective) -> dict:
    """The point against ``base``: relative changes of the objective and throughput, p99 in ms."""
    if base is None:
        return {}
    mine, theirs = objective.value(point), objective.value(base)
    return {"objective_change": mine / theirs - 1.0 if theirs > 0 else None,
            "throughput_change": point.throughput / base.throughput - 1.0 if base.throughput > 0 else None,
            "p99_change_ms": point.p99_ms - base.p99_ms,
            "reject_rate_change": point.reject_rate - base.reject_rate, "base_level": base.level,
            "_base_load": base.load_words(), "_load": point.load_words()}


def _cost(change: dict) -> float:
    """How much a change away from the winner's value loses (larger: the knob mattered more)."""
    if not change.get("meets_constraints", True):
        return math.inf
    value = change.get("objective_change")
    return -value if value is not None else 0.0


def _summary(label: str, mine, changes: list[dict], where: str) -> str:
    worst = max(changes, key=_cost)
    words = (f"{label} {_plain(mine)} -> {worst['value']}{where}: objective "
             + (f"{worst['objective_change']:+.1%}" if worst.get("objective_change") is not None else "n/a")
             + (f", throughput {worst['throughput_change']:+.1%}" if worst.get("throughput_change") is not None else "")
             + f", p99 {worst['p99_change_ms']:+.2f} ms")
    if worst.get("reject_rate"):
        words += f", {worst['reject_rate']:.1%} rejected"
    if worst.get("level") != worst.get("base_level"):
        words += f" (best points at {worst['_load']} vs {worst['_base_load']})"
    if not worst.get("meets_constraints", True):
        words += " (misses the constraints)"
    others = len(changes) - 1
    return words + (f"; {others} other value{'s' * (others != 1)} measured" if others > 0 else "")


def _runner_up_words(best: ConfigResult, entry: dict, point: Point | None, winner: Point | None) -> str:
    name = entry["config_id"]
    final = entry.get("final_round")
    if final:
        head = (f"{best.config_id} against the runner-up {name} over {final['rounds']} head-to-head rounds: "
                f"{final['winner_throughput']:,.1f} vs {final['runner_up_throughput']:,.1f} infer/s, p99 "
                f"{final['winner_p99_ms']:.2f} vs {final['runner_up_p99_ms']:.2f} ms")
        if final.get("margin") is not None:
            head += f", margin {final['margin']:+.1%}" + (" (beyond noise)" if final.get("beyond_noise") else
                                                         " (within noise)")
    elif point is not None and winner is not None:
        head = (f"{best.config_id} against the next best {name} (sweeps): {winner.throughput:,.1f} vs "
                f"{point.throughput:,.1f} infer/s, p99 {winner.p99_ms:.2f} vs {point.p99_ms:.2f} ms")
    else:
        head = f"{best.config_id} against {name}"
    resources = entry["resources"]
    differ = ", ".join(f"{k} {a} vs {b}" for k, (a, b) in entry["knobs_that_differ"].items()) or "no knob"
    return (f"{head}; resources {resources['winner']} vs {resources['runner_up']}; knobs that differ: {differ}")


def _resources(knobs: Knobs) -> str:
    kind = knobs.instance_kind.removeprefix("KIND_")
    return f"{knobs.instance_count} x {kind}, max batch {knobs.max_batch_size}"


def _order(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def why_lines(why: dict | None) -> list[str]:
    """The section as sentences, for the terminal and the HTML report."""
    if not why:
        return []
    lines = [k["summary"] for k in why.get("knobs") or ()]
    if why.get("runner_up"):
        lines.append(why["runner_up"]["summary"])
    return lines
