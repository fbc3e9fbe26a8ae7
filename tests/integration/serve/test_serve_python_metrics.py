"""Metrics a Python model defines (``pb_utils.MetricFamily``), as Triton's Python backend has them
(its qa/python_models/custom_metrics cases): counters, gauges and histograms by labels, shown on
``/metrics``; duplicates that are the same metric; refusals as TritonModelException; a model's
metrics gone once it is unloaded. In stub processes and in the server's process."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


def refused(call):
    try:
        call()
    except pb_utils.TritonModelException as exc:
        return str(exc)
    return None


class TritonPythonModel:
    def initialize(self, args):
        self.requests = pb_utils.MetricFamily(name="demo_requests_total", description="requests seen",
                                              kind=pb_utils.COUNTER)
        self.by_model = self.requests.Metric(labels={"model": "metered", "path": "execute"})
        self.levels = pb_utils.MetricFamily("demo_level", "last value seen", pb_utils.MetricFamily.GAUGE)
        self.level = self.levels.Metric()
        self.all_sizes = pb_utils.MetricFamily("demo_sizes", "values seen", pb_utils.HISTOGRAM)
        self.sizes = self.all_sizes.Metric(labels={"model": "metered"}, buckets=[1, 10, 100])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = float(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().sum())
            self.by_model.increment(1)
            self.level.set(x)
            self.sizes.observe(x)
            again = pb_utils.MetricFamily("demo_requests_total", "another description", pb_utils.COUNTER)
            same = again.Metric(labels={"path": "execute", "model": "metered"})
            report = {
                "count": same.value(), "level": self.level.value(),
                "negative": refused(lambda: self.by_model.increment(-1)),
                "set_counter": refused(lambda: self.by_model.set(3)),
                "other_kind": refused(lambda: pb_utils.MetricFamily("demo_level", "x", pb_utils.COUNTER)),
                "histogram_value": refused(lambda: self.sizes.value()),
                "bad_label": refused(lambda: self.requests.Metric(labels={"9lives": "x"})),
                "orphan": refused(lambda: pb_utils.MetricFamily("demo_orphan", "x", pb_utils.GAUGE).Metric().set(1)),
            }
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(report)],
                                                                                          dtype=object))]))
        return responses
'''

CONFIG = '''
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
'''


@pytest.fixture(params=["process", "thread"])
def served(request, tmp_path: Path, transports):
    write_python_model(tmp_path / "repo", "metered", CONFIG, MODEL)
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["metered"], python_isolation=request.param, **transports)
    with BackgroundServer(options) as server:
        yield server


def metrics_text(served) -> str:
    return urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()


def infer(client, values) -> dict:
    tensor = httpclient.InferInput("IN", [2], "FP32")
    tensor.set_data_from_numpy(np.array(values, np.float32))
    return json.loads(client.infer("metered", [tensor]).as_numpy("OUT")[0])


def test_a_models_metrics_count_show_and_go_with_it(served):
    client = httpclient.InferenceServerClient(served.http_url)
    first = infer(client, [2.0, 3.0])
    second = infer(client, [20.0, 30.0])
    assert (first["count"], second["count"]) == (1.0, 2.0) and second["level"] == 50.0
    assert "counter only goes up" in first["negative"] and "cannot be set" in first["set_counter"]
    assert "already exists as a gauge" in first["other_kind"]
    assert "value() is not supported for a histogram" in first["histogram_value"]
    assert "'9lives' is not a valid label name" in first["bad_label"]
    # a metric whose MetricFamily object is gone refuses to work, as in Triton
    assert first["orphan"] == "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
    text = metrics_text(served)
    for line in ["# HELP demo_requests_total requests seen", "# TYPE demo_requests_total counter",
                 'demo_requests_total{model="metered",path="execute"} 2',
                 "# TYPE demo_level gauge", "demo_level 50",
                 "# TYPE demo_sizes histogram", 'demo_sizes_count{model="metered"} 2',
                 'demo_sizes_sum{model="metered"} 55',
                 'demo_sizes_bucket{model="metered",le="1"} 0', 'demo_sizes_bucket{model="metered",le="10"} 1',
                 'demo_sizes_bucket{model="metered",le="100"} 2', 'demo_sizes_bucket{model="metered",le="+Inf"} 2']:
        assert line in text.splitlines(), line
    assert "another description" not in text  # the first description stays
    client.unload_model("metered")
    assert "demo_" not in metrics_text(served)
