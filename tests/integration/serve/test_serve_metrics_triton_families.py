"""Metric families and response-cache texts as Triton 2.51 publishes them (qa/L0_metrics,
qa/L0_response_cache): the expected values are what a real tritonserver 2.51 answered to the same
requests (a Python identity model, one with ``response_cache { enable: true }``, one whose
``execute`` raises)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

IO = """
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]
"""
RAISE = """
class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("raised")
"""
# Triton 2.51's families, in its order, for a server with a cache, summaries and CPU metrics on
TRITON_FAMILIES = [
    "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count", "nv_inference_exec_count",
    "nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us",
    "nv_cache_num_hits_per_model", "nv_cache_hit_duration_per_model", "nv_cache_num_misses_per_model",
    "nv_cache_miss_duration_per_model", "nv_inference_pending_request_count", "nv_pinned_memory_pool_total_bytes",
    "nv_pinned_memory_pool_used_bytes", "nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes",
    "nv_cache_util", "nv_cache_num_entries", "nv_cache_num_hits", "nv_cache_num_misses", "nv_cache_num_lookups",
    "nv_cache_num_evictions", "nv_cache_lookup_duration", "nv_cache_insertion_duration",
    "nv_inference_request_summary_us", "nv_inference_queue_summary_us", "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us", "nv_inference_compute_output_summary_us",
    "nv_cache_hit_summary_per_model", "nv_cache_miss_summary_per_model",
]
TRITON_HELP = [
    "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes",
    "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]",
    "# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes",
    "# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes",
    "# HELP nv_cache_util Cache utilization [0.0 - 1.0]",
    "# HELP nv_cache_num_entries Number of responses stored in response cache",
    "# HELP nv_cache_num_lookups Number of cache lookups in response cache",
    "# HELP nv_cache_lookup_duration Total cache lookup duration (hit and miss), in microseconds",
    "# HELP nv_cache_insertion_duration Total cache insertion duration, in microseconds",
    "# HELP nv_cache_hit_summary_per_model Summary of cache hit counts/durations per model, in microseconds.",
    "# TYPE nv_cache_miss_summary_per_model summary",
]


def _repository(tmp_path):
    repo = tmp_path / "repo"
    write_python_model(repo, "ident", IO, IDENTITY)
    write_python_model(repo, "ident_cache", IO + "response_cache { enable: true }\n", IDENTITY)
    write_python_model(repo, "raise", IO, RAISE)
    return repo


def _scrape(server) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        return response.read().decode()


def _infer(client, model, value, size=2):
    tensor = httpclient.InferInput("INPUT0", [size], "FP32")
    tensor.set_data_from_numpy(np.full(size, value, np.float32))
    return client.infer(model, [tensor])


def _samples(text: str) -> dict[str, str]:
    return {line.rpartition(" ")[0]: line.rpartition(" ")[2] for line in text.splitlines()
            if line and not line.startswith("#")}


def test_families_values_and_order_after_a_known_pattern(tmp_path):
    options = ServeOptions(_repository(tmp_path), http_port=0, grpc_port=None, metrics_port=0, exit_timeout_secs=5,
                           python_isolation="thread", cache_config=["local,size=1048576"],
                           metrics_config=["summary_latencies=true"], metrics_interval_ms=100)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(3):
            _infer(client, "ident_cache", 1)
        _infer(client, "ident_cache", 2)
        _infer(client, "ident", 1)
        with pytest.raises(Exception, match="raised"):
            _infer(client, "raise", 1)
        client.close()
        text = _scrape(server)
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE nv_")]
    assert families == TRITON_FAMILIES
    assert all(line in text for line in TRITON_HELP)
    values = _samples(text)
    cached = '{model="ident_cache",version="1"}'
    # Triton 2.51's values for these requests
    assert [values[f"{name}{cached}"] for name in ("nv_inference_request_success", "nv_inference_count",
                                                   "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model",
                                                   "nv_cache_hit_summary_per_model_count",
                                                   "nv_cache_miss_summary_per_model_count")] == \
        ["4", "2", "2", "2", "2", "2"]
    assert [values[name] for name in ("nv_cache_num_entries", "nv_cache_num_hits", "nv_cache_num_misses",
                                      "nv_cache_num_lookups", "nv_cache_num_evictions",
                                      "nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes")] == \
        ["2", "2", "2", "4", "0", "0", "0"]
    assert 0 < float(values["nv_cache_util"]) < 1 and 0 <= float(values["nv_cpu_utilization"]) <= 1
    assert 0 < int(values["nv_cpu_memory_used_bytes"]) < int(values["nv_cpu_memory_total_bytes"])
    # the request summary is left out for a model using the cache
    assert f"nv_inference_request_summary_us_count{cached}" not in values
    # a request whose execute raised: a BACKEND failure that adds nothing to the request duration
    failed = '{model="raise",version="1"}'
    assert values['nv_inference_request_failure{model="raise",reason="BACKEND",version="1"}'] == "1"
    assert values[f"nv_inference_request_duration_us{failed}"] == "0"
    assert values[f"nv_inference_exec_count{failed}"] == "1"


def test_cache_families_without_a_server_cache_and_cpu_metrics_off(tmp_path):
    options = ServeOptions(_repository(tmp_path), http_port=0, grpc_port=None, metrics_port=0, exit_timeout_secs=5,
                           python_isolation="thread", allow_cpu_metrics=False)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(2):
            _infer(client, "ident_cache", 1)
        client.close()
        text = _scrape(server)
    values = _samples(text)
    cached = '{model="ident_cache",version="1"}'
    # as Triton 2.51: the model's cache counters are there, at 0; no cache-wide gauges, no CPU gauges
    assert [values[f"{name}{cached}"] for name in ("nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model",
                                                   "nv_inference_count")] == ["0", "0", "2"]
    assert "nv_cache_util" not in text and "nv_cpu_" not in text
    assert "nv_pinned_memory_pool_total_bytes 0" in text


@pytest.mark.parametrize("args, message", [
    (["--cache-config=local,size=8192", "--cache-config=redis,key=value"],
     "found multiple cache configurations, but only a single cache is currently supported"),
    (["--cache-config=local,foo=3"], "Failed to initialize LocalCache: config didn't contain a valid 'size' field."),
    (["--allow-cpu-metrics=maybe"], "invalid value for bool option: maybe"),
    (["--metrics-interval-ms=abc"], "Invalid option value. Got abc"),
])
def test_option_errors_in_tritonservers_words(tmp_path, args, message):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(tmp_path), *args],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 2 and message in process.stderr


def test_a_decoupled_model_with_the_cache_is_refused_in_tritons_words(tmp_path):
    repo = tmp_path / "repo"
    write_python_model(repo, "decoupled_cache", IO + "model_transaction_policy { decoupled: true }\n"
                       "response_cache { enable: true }\n", IDENTITY)
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=None, exit_timeout_secs=5,
                           python_isolation="thread", control_mode="explicit", cache_config=["local,size=10480"])
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(Exception) as caught:
            client.load_model("decoupled_cache")
        client.close()
    # L0_response_cache greps the server's answer for these words
    assert ("Response Cache does not currently support model decoupled_cache with 'decoupled' transaction "
            "policy. Please disable the response cache.") in str(caught.value)
