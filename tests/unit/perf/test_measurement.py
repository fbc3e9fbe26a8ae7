"""The stability rule, percentiles and window merging on synthetic series."""

from __future__ import annotations

import pytest

from tritonctl.perf.loadgen import Completion
from tritonctl.perf.measurement import (LevelResult, Responses, ServerStats, Window, is_stable, merge_windows,
                                            percentile_ns, series_stable)


def window(count: int, latency_us: float, seconds: float = 1.0, start_s: float = 0.0) -> Window:
    start = int(start_s * 1e9)
    return Window(start, start + int(seconds * 1e9), [int(latency_us * 1000)] * count)


def test_needs_three_windows():
    assert not series_stable([100, 100], [5, 5], 10)
    assert series_stable([100, 100, 100], [5, 5, 5], 10)


@pytest.mark.parametrize("throughputs, latencies, stable", [
    ([100, 105, 109], [5.0, 5.2, 5.4], True),     # max/min 1.09 and 1.08
    ([100, 105, 111], [5.0, 5.0, 5.0], False),    # throughput spread 11%
    ([100, 100, 100], [5.0, 5.0, 5.6], False),    # latency spread 12%
    ([100, 100, 110], [5.0, 5.0, 5.5], True),     # exactly 10% is still stable
    ([0, 100, 100], [5.0, 5.0, 5.0], False),      # a window with zero throughput never counts
    ([10, 500, 100, 101, 102], [90, 1, 5, 5, 5], True),  # only the last three matter
])
def test_stability_rule(throughputs, latencies, stable):
    assert series_stable(throughputs, latencies, 10) is stable


def test_wider_stability_percentage_accepts_more():
    assert not series_stable([100, 120, 110], [5, 5, 5], 10)
    assert series_stable([100, 120, 110], [5, 5, 5], 25)


def test_is_stable_uses_the_chosen_latency_percentile():
    tail = [int(1e6)] * 98 + [int(50e6)] * 2  # p99 is 50 ms in one window only
    windows = [window(100, 1000), window(100, 1000), Window(0, int(1e9), tail)]
    assert not is_stable(windows, 10, latency_percentile=99)
    assert is_stable([window(100, 1000)] * 3, 10, latency_percentile=99)


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile_ns(values, 50) == 51  # round(0.5 * 99) = 50 -> the 51st value
    assert percentile_ns(values, 99) == 99
    assert percentile_ns([7], 95) == 7
    assert percentile_ns([], 50) == 0


def test_merge_windows_combines_requests_time_and_server_stats():
    a, b = window(100, 2000, 1.0), window(300, 4000, 1.0, start_s=1.0)
    a.server = ServerStats(success_count=100, queue_ns=100 * 500_000, compute_infer_ns=100 * 1_000_000)
    b.server = ServerStats(success_count=300, queue_ns=300 * 500_000, compute_infer_ns=300 * 1_000_000)
    merged = merge_windows([a, b], batch_size=2, concurrency=4, request_rate=None, stable=True, total_windows=5)
    assert isinstance(merged, LevelResult)
    assert merged.request_count == 400
    assert merged.throughput == pytest.approx(400 * 2 / 2.0)
    assert merged.avg_latency_us == pytest.approx(3500)
    assert merged.percentiles_us[50] == pytest.approx(4000)
    assert merged.server.success_count == 400
    assert merged.server_queue_us == pytest.approx(500)
    assert merged.server_compute_us == pytest.approx(1000)
    row = merged.as_dict()
    assert row["windows"] == 5 and row["server_request_count"] == 400 and row["p99_latency_us"] == 4000
    # The windows' spread, as a relative half-range: 100 and 300 requests/s are 200 +- 50 %.
    assert merged.throughput_spread == pytest.approx(0.5) and merged.p99_spread == pytest.approx(2000 / 6000)


def test_one_window_or_identical_windows_have_no_spread():
    from tritonctl.perf.measurement import relative_spread

    assert relative_spread([]) == relative_spread([5.0]) == relative_spread([3.0, 3.0, 3.0]) == 0.0
    assert relative_spread([90.0, 110.0, 100.0]) == pytest.approx(0.1)


def test_server_stats_arithmetic():
    total = ServerStats(success_count=10, queue_ns=50) - ServerStats(success_count=4, queue_ns=20)
    assert (total.success_count, total.queue_ns) == (6, 30)
    assert ServerStats().per_request_us(123) == 0.0


def test_asynchronous_mode_needs_only_the_throughput_to_agree():
    windows = [window(100, 5.0), window(100, 9.0), window(100, 5.0)]
    assert not is_stable(windows, 10)
    assert is_stable(windows, 10, check_latency=False)
    assert series_stable([100, 100, 100], None, 0)


def test_streamed_requests_count_their_responses_and_end_at_the_last_with_outputs():
    """perf_analyzer's rules for a decoupled model: the empty final response is not a response, and a
    request's latency ends at its last response with outputs."""
    with_empty_final = Responses((1_000, 3_000, 6_000, 6_500), empty_final=True)
    assert with_empty_final.count == 3 and with_empty_final.last_ns == 6_000
    assert Responses((2_000,)).count == 1 and Responses((2_000,)).last_ns == 2_000
    only_the_flag = Responses((4_000,), empty_final=True)
    assert only_the_flag.count == 0 and only_the_flag.last_ns == 4_000

    done = [Completion(6_000, 6_000, True, with_empty_final), Completion(12_000, 2_000, True, Responses((12_000,))),
            Completion(13_000, 1_000, False)]
    window = Window.of(0, int(1e9), done, 0, 0.0, None, streamed=True)
    assert window.latencies_ns == [6_000, 2_000] and window.errors == 1
    stats = window.responses
    assert (stats.requests, stats.responses, stats.answered) == (2, 4, 2)
    # first responses 1 µs and 2 µs after their sends; gaps of 2 and 3 µs between the first request's three
    assert stats.as_dict() == {"response_count": 4, "responses_per_request": 2.0, "avg_first_response_us": 1.5,
                               "avg_inter_response_us": 2.5}
    level = merge_windows([window, window], 1, 1, None, True, 2)
    assert level.responses.responses == 8 and level.response_throughput == 4.0
    assert level.as_dict()["response_throughput_per_s"] == 4.0 and level.as_dict()["responses_per_request"] == 2.0
    assert Window.of(0, 1, done, 0, 0.0, None).responses is None and "response_count" not in merge_windows(
        [Window.of(0, 1, done, 0, 0.0, None)], 1, 1, None, True, 1).as_dict()
