"""The levels of a sweep as perf_analyzer walks them: linear until a level is not good, or a
binary search for the highest good level."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from tritonctl.perf.options import PerfOptions, Range
from tritonctl.perf.sweep import levels_of, walk

BASE = PerfOptions("m")


def test_listed_levels_stop_after_the_first_that_is_not_good():
    options = replace(BASE, concurrency=(1, 3, 5, 7))
    assert levels_of(walk(options), lambda level: True) == [1, 3, 5, 7]
    assert levels_of(walk(options), lambda level: level < 5) == [1, 3, 5]
    assert levels_of(walk(replace(BASE, concurrency=(), request_intervals=(10,))), lambda level: False) == [0]


def test_a_range_without_an_end_steps_until_a_level_is_not_good():
    options = replace(BASE, concurrency=(2,), search_range=Range(2, 0, 3))
    assert levels_of(walk(options), lambda level: level < 10) == [2, 5, 8, 11]


def test_binary_search_as_perf_analyzer_runs_it():
    # --binary-search --concurrency-range 1:8:2 -l 5 in perf_analyzer's QA, with levels up to 6 good.
    options = replace(BASE, concurrency=(1,), search_range=Range(1, 8, 2), binary_search=True)
    assert levels_of(walk(options), lambda level: level <= 6) == [1, 8, 4, 6]
    assert levels_of(walk(options), lambda level: True) == [1, 8]  # the end is good: nothing to search
    assert levels_of(walk(options), lambda level: False) == [1]  # the start is not: nothing to search
    rates = replace(BASE, concurrency=(), request_rates=(1000.0,), search_range=Range(1000.0, 2000.0, 100.0),
                    binary_search=True)
    assert levels_of(walk(rates), lambda level: level < 1234) == [1000, 2000, 1500, 1250, 1125, 1187.5]


@given(start=st.integers(1, 50), width=st.integers(0, 200), step=st.integers(1, 20), limit=st.integers(0, 300))
@settings(max_examples=200, deadline=None)
def test_binary_search_brackets_the_highest_good_concurrency(start, width, step, limit):
    end = start + width
    options = replace(BASE, concurrency=(start,), search_range=Range(start, end, step), binary_search=True)
    measured = levels_of(walk(options), lambda level: level <= limit)
    assert all(start <= level <= end for level in measured) and measured[0] == start
    assert len(measured) <= 2 + max(width, 1).bit_length()
    if start <= limit < end:  # the search ends with a good level and a bad one at most STEP apart
        good = max(level for level in measured if level <= limit)
        bad = min(level for level in measured if level > limit)
        assert 0 < bad - good <= step
