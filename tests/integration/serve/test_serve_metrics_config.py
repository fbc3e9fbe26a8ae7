"""``--metrics-config``: latency summaries (nv_inference_*_summary_us) and counters switched off, as
tritonserver 2.51 publishes them; refusals of unknown settings and bad values."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from helpers.serve_models import write_python_model
from tritonctl.serve.metrics.config import MetricsConfigError, parse_metrics_config
from tritonctl.serve.metrics.summary import SlidingSummary
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

CONFIG = """
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]
"""
SUMMARIES = ("nv_inference_request_summary_us", "nv_inference_queue_summary_us",
             "nv_inference_compute_input_summary_us", "nv_inference_compute_infer_summary_us",
             "nv_inference_compute_output_summary_us")
COUNTERS = ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
            "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us")
LABELS = 'model="ident",version="1"'


def scrape_after_requests(tmp_path, metrics_config: list[str], requests: int = 5) -> str:
    write_python_model(tmp_path / "repo", "ident", CONFIG, IDENTITY)
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=None, metrics_port=0, exit_timeout_secs=5,
                           python_isolation="thread", metrics_config=metrics_config)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(requests):
            tensor = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
            client.infer("ident", [tensor])
        client.close()
        with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
            return response.read().decode()


def samples(text: str) -> dict[str, float]:
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_summary_latencies_publish_triton_summaries(tmp_path):
    text = scrape_after_requests(tmp_path, ["summary_latencies=true"])
    values = samples(text)
    assert "# TYPE nv_inference_request_summary_us summary" in text
    assert ("# HELP nv_inference_queue_summary_us Summary of inference queuing duration in microseconds "
            "(includes cached requests)") in text
    for name in SUMMARIES:
        assert values[f"{name}_count{{{LABELS}}}"] == 5
        quantiles = [values[f'{name}{{{LABELS},quantile="{q}"}}'] for q in ("0.5", "0.9", "0.95", "0.99", "0.999")]
        assert quantiles == sorted(quantiles) and quantiles[-1] <= values[f"{name}_sum{{{LABELS}}}"]
    assert values[f"nv_inference_request_summary_us_sum{{{LABELS}}}"] >= values[
        f"nv_inference_request_summary_us{{{LABELS},quantile=\"0.999\"}}"]
    assert all(f"{name}{{{LABELS}}}" in values for name in COUNTERS)  # the counters stay by default


def test_a_model_loaded_later_feeds_its_summaries_from_its_first_request(tmp_path):
    write_python_model(tmp_path / "repo", "ident", CONFIG, IDENTITY)
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=None, metrics_port=0, exit_timeout_secs=5,
                           python_isolation="thread", metrics_config=["summary_latencies=true"],
                           control_mode="explicit")
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        client.load_model("ident")
        for _ in range(3):
            tensor = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
            client.infer("ident", [tensor])
        client.close()
        with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
            first = samples(response.read().decode())
        with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
            second = samples(response.read().decode())
    for name in SUMMARIES:
        assert first[f"{name}_count{{{LABELS}}}"] == second[f"{name}_count{{{LABELS}}}"] == 3, name


def test_custom_quantiles_and_no_counters(tmp_path):
    text = scrape_after_requests(tmp_path, ["summary_latencies=true", "counter_latencies=false",
                                            "summary_quantiles=0.25:0.01,0.75:0.01"], requests=2)
    values = samples(text)
    assert not any(name in text for name in COUNTERS)
    assert f"nv_inference_request_success{{{LABELS}}}" in values
    quantiles = sorted(key for key in values if key.startswith("nv_inference_queue_summary_us{"))
    assert quantiles == [f'nv_inference_queue_summary_us{{{LABELS},quantile="0.25"}}',
                         f'nv_inference_queue_summary_us{{{LABELS},quantile="0.75"}}']


def test_no_summaries_by_default(tmp_path):
    text = scrape_after_requests(tmp_path, [], requests=1)
    assert "_summary_us" not in text and f"nv_inference_request_duration_us{{{LABELS}}}" in text


def test_quantiles_cover_the_last_minute_only():
    now = [0.0]
    summary = SlidingSummary(((0.5, 0.05), (0.9, 0.01)), clock=lambda: now[0])
    for value in (10, 20, 30, 40, 1000):
        summary.observe(value)
    assert summary.snapshot() == (5, 1100, [(0.5, 20.0), (0.9, 40.0)])  # as prometheus-cpp's CKMS answers
    now[0] = 61.0
    count, total, quantiles = summary.snapshot()
    assert (count, total) == (5, 1100) and all(value != value for _, value in quantiles)  # NaN: nothing recent
    summary.observe(7)
    assert summary.snapshot()[2] == [(0.5, 7.0), (0.9, 7.0)]


@pytest.mark.parametrize("value, message", [
    ("bogus=1", "unknown setting 'bogus'"),
    ("summary_latencies=maybe", "summary_latencies=maybe: expected true or false"),
    ("summary_quantiles=0.5", "expected <quantile>:<error>"),
    ("summary_quantiles=2:0.1", "expected <quantile>:<error>"),
    ("summary_latencies", "format is <setting>=<value>"),
])
def test_bad_settings_are_refused(value, message):
    with pytest.raises(MetricsConfigError, match=message):
        parse_metrics_config([value])


def test_cli_refuses_a_bad_setting_with_status_2(tmp_path):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(tmp_path),
                              "--metrics-config", "summary_latencies=maybe"], capture_output=True, text=True,
                             timeout=60)
    assert process.returncode == 2 and "summary_latencies=maybe: expected true or false" in process.stderr
