"""The load levels of a sweep, walked as perf_analyzer walks them.

Linear: each level in turn (the listed values, or START, START+STEP, ... with no end for a range
whose END is 0), stopping after the first level that is not good (not stable, or whose latency
reached ``--latency-threshold``). Binary: START must be good and END not, then the middle of the
interval is measured until the interval is no wider than STEP (concurrency halves in whole numbers).
"""

from __future__ import annotations

from typing import Generator

from tritonctl.perf.options import MAX_LEVELS, PerfOptions, Range

# A level to measure is yielded; the caller sends back whether it was good.
Walk = Generator[float, bool, None]


def walk(options: PerfOptions) -> Walk:
    """The levels of ``options``' sweep: concurrency values or request rates (one ``0`` for a trace)."""
    if options.search_range is None:
        return _listed(options.concurrency or options.request_rates or (0,))
    whole = bool(options.concurrency)
    if options.binary_search:
        return _binary(options.search_range, whole)
    return _stepped(options.search_range)


def _listed(levels: tuple[float, ...]) -> Walk:
    for level in levels:
        if not (yield level):
            return


def _stepped(value: Range) -> Walk:
    level = value.start
    for _ in range(MAX_LEVELS if value.open else MAX_LEVELS + 1):
        if not value.open and level > value.end * (1 + 1e-9):
            return
        if not (yield level if isinstance(level, int) else round(level, 6)):
            return
        level += value.step


def _binary(value: Range, whole: bool) -> Walk:
    if not (yield value.start):
        return
    if (yield value.end):
        return
    low, high = value.start, value.end
    while high - low > value.step:
        middle = (low + high) // 2 if whole else round((low + high) / 2, 6)
        if (yield middle):
            low = middle
        else:
            high = middle


def levels_of(walker: Walk, good) -> list[float]:
    """Drive ``walker`` with ``good(level) -> bool``; the levels measured, in order (for tests and plans)."""
    measured: list[float] = []
    try:
        level = next(walker)
        while True:
            measured.append(level)
            level = walker.send(good(level))
    except StopIteration:
        return measured
