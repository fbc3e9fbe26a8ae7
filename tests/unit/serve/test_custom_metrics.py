"""The server's registry of the metrics models define, and how /metrics writes them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.serve.core.custom_metrics import COUNTER, GAUGE, HISTOGRAM, CustomMetrics, MetricError, MetricUser
from tritonctl.serve.metrics import custom_lines


def test_a_family_and_its_metrics_live_while_anyone_holds_them():
    metrics = CustomMetrics()
    one, two = MetricUser(metrics), MetricUser(metrics)
    one.family("jobs", "jobs done", COUNTER)
    two.family("jobs", "other words", COUNTER)  # the same family; the first description stays
    one.metric("jobs", {"queue": "a"}, None)
    two.metric("jobs", {"queue": "a"}, None)  # the same metric
    one.update("jobs", {"queue": "a"}, "increment", 2)
    assert two.update("jobs", {"queue": "a"}, "value") == 2.0
    assert custom_lines(metrics) == ["# HELP jobs jobs done", "# TYPE jobs counter", 'jobs{queue="a"} 2']
    one.close()
    assert two.update("jobs", {"queue": "a"}, "value") == 2.0
    two.release_metric("jobs", {"queue": "a"})
    assert custom_lines(metrics) == ["# HELP jobs jobs done", "# TYPE jobs counter"]
    two.release_family("jobs")
    assert custom_lines(metrics) == []
    two.release_family("jobs")  # more releases than holds change nothing
    assert metrics.snapshot() == []


def test_histogram_buckets_count_values_up_to_their_bound():
    metrics = CustomMetrics()
    metrics.family("latency", "seconds", HISTOGRAM)
    metrics.metric("latency", (), [0.5, 1])
    for value in (0.5, 0.7, 1, 3):
        metrics.update("latency", (), "observe", value)
    assert custom_lines(metrics)[2:] == ["latency_count 4", "latency_sum 5.2", 'latency_bucket{le="0.5"} 1',
                                         'latency_bucket{le="1"} 3', 'latency_bucket{le="+Inf"} 4']


@pytest.mark.parametrize("kind, op, value, text", [
    (COUNTER, "increment", -1, "a counter only goes up"),
    (COUNTER, "set", 1, "a counter cannot be set"),
    (GAUGE, "observe", 1, "observe() is for histograms; 'm' is a gauge"),
    (GAUGE, "increment", "1", "increment() takes a number, got str"),
    (HISTOGRAM, "set", 1, "set() is not supported for a histogram ('m'); use observe()"),
    (HISTOGRAM, "value", None, "value() is not supported for a histogram ('m')"),
])
def test_what_a_kind_does_not_do_is_refused(kind, op, value, text):
    metrics = CustomMetrics()
    metrics.family("m", "", kind)
    metrics.metric("m", (), [1.0] if kind == HISTOGRAM else None)
    with pytest.raises(MetricError, match=text.replace("(", r"\(").replace(")", r"\)")):
        metrics.update("m", (), op, value)


@pytest.mark.parametrize("make, text", [
    (lambda m: m.family("9x", "", COUNTER), "'9x' is not a valid metric family name"),
    (lambda m: m.family("x", "", 7), "unknown metric kind 7"),
    (lambda m: m.family("nv_inference_count", "", COUNTER), "names starting with nv_ or tritonctl_ are the server"),
    (lambda m: (m.family("x", "", GAUGE), m.family("x", "", COUNTER)), "already exists as a gauge"),
    (lambda m: (m.family("x", "", HISTOGRAM), m.metric("x", (), None)), "needs its buckets"),
    (lambda m: (m.family("x", "", HISTOGRAM), m.metric("x", (), [2, 1])), "must increase"),
    (lambda m: (m.family("x", "", GAUGE), m.metric("x", (), [1])), "buckets are for histograms"),
    (lambda m: m.metric("nothing", (), None), "metric family 'nothing' no longer exists"),
])
def test_bad_definitions_are_refused(make, text):
    with pytest.raises(MetricError, match=text):
        make(CustomMetrics())


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4))
def test_any_labels_are_shown_or_refused(labels):
    user = MetricUser(CustomMetrics())
    user.family("m", "", GAUGE)
    try:
        user.metric("m", labels, None)
    except MetricError as exc:
        assert "label name" in str(exc)
        return
    user.update("m", labels, "set", 1.5)
    line = custom_lines(user.metrics)[-1]
    assert line.startswith("m") and line.endswith(" 1.5")
    for name in labels:
        assert f'{name}="' in line


def test_values_are_written_as_prometheus_writes_them():
    metrics = CustomMetrics()
    metrics.family("g", "", GAUGE)
    metrics.metric("g", (), None)
    for value, text in ((2023.0, "2023"), (999.9, "999.9"), (1e20, "1e+20"), (math.inf, "+Inf"), (-0.5, "-0.5")):
        metrics.update("g", (), "set", value)
        assert custom_lines(metrics)[-1] == f"g {text}"
