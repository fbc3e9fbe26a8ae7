"""perf_analyzer's --request-intervals files: parsed exactly, refused with the line that is wrong."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, strategies as st

from tritonctl.perf.intervals import describe, gaps_s, mean_rate, parse_intervals, read_intervals
from tritonctl.perf.loadgen import LoadGenerator, Workload
from tritonctl.perf.options import PerfError, PerfOptions, check_options

intervals = st.lists(st.integers(0, 3_600_000_000), min_size=1, max_size=50).filter(sum)


@given(intervals, st.sampled_from(["\n", "\r\n"]), st.booleans(), st.lists(st.sampled_from([" ", "\t"]), max_size=2))
def test_any_well_formed_file_gives_back_its_intervals(values, newline, trailing, padding):
    pad = "".join(padding)
    text = newline.join(f"{pad}{v}{pad}" for v in values) + (newline if trailing else "")
    assert parse_intervals(text) == tuple(values)
    assert mean_rate(tuple(values)) == pytest.approx(len(values) * 1e6 / sum(values))


@given(st.text(max_size=200))
def test_any_text_parses_or_fails_with_a_perf_error(text):
    try:
        parsed = parse_intervals(text)
    except PerfError as exc:
        assert str(exc).startswith("--request-intervals")
    else:
        assert parsed and sum(parsed) > 0 and all(0 <= v <= 3_600_000_000 for v in parsed)


@given(intervals, st.integers(0, 49), st.sampled_from(["-5", "1.5", "10ms", "1e3", "# comment", "0x10", "+7", "½"]))
def test_a_bad_line_is_named_by_its_number(values, position, bad):
    lines = [str(v) for v in values]
    index = min(position, len(lines))
    lines.insert(index, bad)
    with pytest.raises(PerfError, match=rf"^trace.txt:{index + 1}: .*microseconds"):
        parse_intervals("\n".join(lines), "trace.txt")


def test_blank_lines_are_skipped_and_empty_or_all_zero_files_refused():
    assert parse_intervals("\n100000\n\n  \n200000\n500000\n") == (100000, 200000, 500000)
    with pytest.raises(PerfError, match="no intervals"):
        parse_intervals("\n  \n")
    with pytest.raises(PerfError, match="infinite request rate"):
        parse_intervals("0\n0\n")
    with pytest.raises(PerfError, match="over an hour"):
        parse_intervals("3600000001")


def test_files_that_cannot_be_read(tmp_path):
    with pytest.raises(PerfError, match="no such file"):
        read_intervals(tmp_path / "missing.txt")
    with pytest.raises(PerfError, match="is a directory"):
        read_intervals(tmp_path)
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(PerfError, match="not a text file"):
        read_intervals(binary)
    good = tmp_path / "trace.txt"
    good.write_text("100000\n200000\n500000\n")
    assert read_intervals(good) == (100000, 200000, 500000)


def test_the_schedule_loops_over_the_file_as_perf_analyzer_does():
    # perf_analyzer's example: 100000, 200000, 500000 sends at 0.1, 0.3, 0.8, 0.9, 1.1, 1.6 s.
    times = list(itertools.accumulate(itertools.islice(gaps_s((100000, 200000, 500000)), 6)))
    assert times == pytest.approx([0.1, 0.3, 0.8, 0.9, 1.1, 1.6])
    assert describe((100000, 200000, 500000)) == "trace of 3 intervals, mean 3.75/s"


def test_one_kind_of_load_only():
    with pytest.raises(PerfError, match="one kind of load.*not both"):
        check_options(PerfOptions("m", concurrency=(1,), request_intervals=(1000,)))
    with pytest.raises(PerfError, match="not all three"):
        check_options(PerfOptions("m", request_rates=(5.0,), request_intervals=(1000,)))
    check_options(PerfOptions("m", concurrency=(), request_intervals=(1000, 0)))


def test_the_generator_replays_the_intervals():
    async def send(request):
        pass

    async def scenario():
        generator = LoadGenerator(Workload(send, ["a"]))
        generator.start_intervals((2000, 0, 4000))  # 3 sends per 6 ms: 500/s
        await asyncio.sleep(0.3)
        await generator.stop()
        return generator.state

    state = asyncio.run(scenario())
    assert 30 <= state.sent <= 200, state.sent
    assert len(state.completions) == state.sent and all(c.ok for c in state.completions)
