"""perf_analyzer's command-line spellings: deprecated load flags, repeated and combined options, and
outside text that must give a PerfError, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tritonctl.perf import flags
from tritonctl.perf.flags import Load
from tritonctl.perf.options import PerfError, Range, parse_range, parse_sequence_id_range, parse_shapes


@pytest.mark.parametrize("args, load", [
    ((None, None, False, None, None, False, False), Load(concurrency=(1,))),
    (("1:5:2", None, False, None, None, False, False), Load(concurrency=(1, 3, 5))),
    (("2:0:2", None, False, None, None, False, False), Load(concurrency=(2,), search_range=Range(2, 0, 2))),
    (("1:8:2", None, False, None, None, False, True), Load(concurrency=(1,), search_range=Range(1, 8, 2))),
    ((None, "100:200:50", False, None, None, False, False), Load(request_rates=(100.0, 150.0, 200.0))),
    ((None, None, True, None, None, False, False), Load()),
    ((None, None, False, 5, None, False, False), Load(concurrency=(5,))),  # -t5
    ((None, None, False, 2, 4, True, False), Load(concurrency=(2, 3, 4))),  # -d -t2 -c4
    ((None, None, False, 2, None, True, False), Load(concurrency=(2,), search_range=Range(2, 0, 1))),
])
def test_loads_of_perf_analyzer_flags(args, load):
    assert flags.load_from_flags(*args) == load


@pytest.mark.parametrize("args, fragment", [
    (("1", "10", False, None, None, False, False), "more than one inference load mode"),
    (("1", None, False, 5, None, False, False), "deprecated options -t, -c and -d with --concurrency-range"),
    ((None, None, False, 0, None, False, False), "must be > 0"),
    ((None, None, False, 4, 2, True, False), "below -t 4"),
])
def test_load_flags_refused(args, fragment):
    with pytest.raises(PerfError, match=fragment):
        flags.load_from_flags(*args)


def test_unsupported_options_are_named_with_the_reason():
    with pytest.raises(PerfError, match="perf_analyzer's --periodic-concurrency-range is not supported: concurrency"):
        flags.refuse_extra_args(["--periodic-concurrency-range", "1:4"], ["--model"])
    with pytest.raises(PerfError, match="--ssl-grpc-use-ssl is not supported: TLS"):
        flags.refuse_extra_args(["--ssl-grpc-use-ssl", "true"], ["--model"])
    with pytest.raises(PerfError, match="no such option: --modle \\(did you mean --model\\?\\)"):
        flags.refuse_extra_args(["--modle=x"], ["--model"])
    flags.refuse_extra_args([], ["--model"])


def test_headers_parameters_and_trace_settings():
    assert flags.parse_headers(["x-key:a:b", "Other: v "]) == {"x-key": "a:b", "Other": "v"}
    assert flags.parse_request_parameters(["max_tokens:256:int", "stream:True:bool", "s:x:STRING"]) == {
        "max_tokens": 256, "stream": True, "s": "x"}
    assert flags.trace_settings(["TIMESTAMPS", "TENSORS"], "1000", "-1", None) == {
        "trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "1000", "trace_count": "-1"}
    assert flags.trace_settings([], None, None, None) == {}
    for call, fragment in ((lambda: flags.parse_headers(["novalue"]), "'Header:Value'"),
                           (lambda: flags.parse_request_parameters(["a:1"]), "<name:value:type>"),
                           (lambda: flags.parse_request_parameters(["a:x:int"]), "must be of that type"),
                           (lambda: flags.trace_settings(["ALL"], None, None, None), "OFF, TIMESTAMPS, TENSORS"),
                           (lambda: flags.trace_settings([], None, "-2", None), ">= -1")):
        with pytest.raises(PerfError, match=fragment):
            call()


def test_input_data_flags(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("{}")
    second.write_text("{}")
    assert flags.input_data_from_flags([], False) == ("random", ())
    assert flags.input_data_from_flags([], True) == ("zero", ())
    assert flags.input_data_from_flags(["random", str(first), str(second)], False) == (str(first), (str(second),))
    with pytest.raises(PerfError, match="cannot be combined"):
        flags.input_data_from_flags(["zero", str(first)], False)
    with pytest.raises(PerfError, match="'nope.json': Unsupported type"):
        flags.input_data_from_flags(["nope.json"], False)


@given(start=st.integers(1, 10**6), width=st.integers(0, 10**6), step=st.integers(1, 10**6))
@settings(max_examples=100, deadline=None)
def test_ranges_spell_back(start, width, step):
    value = parse_range(f"{start}:{start + width}:{step}", "--concurrency-range", whole=True)
    assert value == Range(start, start + width, step)


TEXT = st.text(alphabet=st.sampled_from("0123456789:,.-+e xINPUT_\u00e9\x00"), max_size=20) | st.text(max_size=20)


@given(text=TEXT)
@settings(max_examples=300, deadline=None)
def test_outside_text_gives_a_perf_error_or_a_value(text):
    """Every parser of command-line text either returns or raises PerfError (no other exception)."""
    for parse in (lambda: parse_range(text, "--concurrency-range", True, open_end=True),
                  lambda: parse_range(text, "--request-rate-range", False, open_end=True),
                  lambda: parse_shapes([text]), lambda: parse_sequence_id_range(text),
                  lambda: flags.parse_headers([text]), lambda: flags.parse_request_parameters([text]),
                  lambda: flags.trace_settings([text], text, text, text)):
        try:
            parse()
        except PerfError:
            pass
