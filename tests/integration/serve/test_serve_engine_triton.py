"""``tritonctl serve --engine triton``: validate the repository, then run a real tritonserver with the
same options (the Triton 2.51 of ../shared/anchors: CPU, Python backend), forwarding signals and
exiting with its status."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from helpers.triton_anchor import tritonserver_wrapper, unavailable_reason
from tritonctl.analyzer.engine import free_ports
from tritonctl.serve.tritonserver import TritonserverOptions, exit_status, tritonserver_command

EXAMPLES = Path(__file__).parents[3] / "examples" / "model_repository"
REASON = unavailable_reason()
needs_triton = [pytest.mark.triton, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def tritonctl(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tritonctl", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_every_serve_option_maps_to_its_tritonserver_flag(tmp_path):
    options = TritonserverOptions(
        tmp_path, host="0.0.0.0", http_port=9000, grpc_port=None, metrics_port=9002, control_mode="explicit",
        load_models=["a", "b"], strict_readiness=False, exit_timeout_secs=2.6, model_config_name="h100",
        http_max_input_size=1 << 20, cache_config=["local,size=1048576"], trace_config=["level=TIMESTAMPS"],
        metrics_config=["summary_latencies=true"], http_header_forward_pattern="my_.*", grpc_header_forward_pattern="(?-i)X.*",
        http_restricted_api=["inference:k=v", "health:k2=v2"], grpc_restricted_protocol=["model-repository:a=b"],
        log_verbose=1, log_format="ISO8601", extra_args=["--backend-directory=/opt/b"])
    assert tritonserver_command("/bin/tritonserver", options) == [
        "/bin/tritonserver", f"--model-repository={tmp_path}",
        "--http-port=9000", "--http-address=0.0.0.0", "--allow-grpc=false",
        "--metrics-port=9002", "--metrics-address=0.0.0.0",
        "--model-control-mode=explicit", "--load-model=a", "--load-model=b",
        "--strict-readiness=false", "--exit-timeout-secs=3", "--model-config-name=h100",
        "--http-max-input-size=1048576", "--cache-config=local,size=1048576", "--trace-config=level=TIMESTAMPS",
        "--metrics-config=summary_latencies=true",
        "--http-header-forward-pattern=my_.*", "--grpc-header-forward-pattern=(?-i)X.*",
        "--http-restricted-api=inference:k=v", "--http-restricted-api=health:k2=v2",
        "--grpc-restricted-protocol=model-repository:a=b", "--log-verbose=1",
        "--log-format=ISO8601", "--backend-directory=/opt/b"]
    # Defaults are left to tritonserver; poll mode passes whole seconds, never less than one.
    poll = tritonserver_command("t", TritonserverOptions(tmp_path, control_mode="poll", repository_poll_secs=0.5))
    assert "--repository-poll-secs=1" in poll and not any(a.startswith(("--http-max-input-size", "--http-header",
                                                                           "--grpc-header")) for a in poll)
    assert exit_status(-signal.SIGTERM) == 128 + signal.SIGTERM and exit_status(3) == 3


def test_no_tritonserver_is_a_clear_error(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no tritonserver on PATH
    process = tritonctl(str(EXAMPLES), "--engine", "triton", env=env)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "needs a tritonserver binary, and none is on PATH" in err
    process = tritonctl(str(EXAMPLES), "--engine", "triton", "--tritonserver", str(tmp_path / "nope"))
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "not an executable file" in err


def test_triton_options_need_engine_triton():
    process = tritonctl(str(EXAMPLES), "--triton-arg=--log-info=true")
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "go with --engine triton" in err


def test_a_repository_with_errors_does_not_start_tritonserver(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo)
    config = repo / "add_sub" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 8", "max_batch_size: -8"))
    started = tmp_path / "started"
    binary = tmp_path / "tritonserver"  # records that it ran; the start must never get this far
    binary.write_text(f"#!/bin/sh\ntouch {started}\n")
    binary.chmod(0o755)
    process = tritonctl(str(repo), "--engine", "triton", "--tritonserver", str(binary))
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    assert "max_batch_size" in err and "config.pbtxt:" in err  # the diagnostic, with its location
    assert "tritonserver was not started" in err and not started.exists()
    # In explicit mode only the models loaded at start count: another model's error does not stop it.
    shutil.copytree(EXAMPLES / "add_sub", repo / "good")
    (repo / "good" / "config.pbtxt").write_text((EXAMPLES / "add_sub" / "config.pbtxt").read_text())
    process = tritonctl(str(repo), "--engine", "triton", "--tritonserver", str(binary),
                        "--model-control-mode", "explicit", "--load-model", "good")
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and started.exists(), err


def test_flags_passed_through_as_tritonserver_spells_them(tmp_path):
    """The flags that map onto tritonserver's own without a field of their own: the rate limiter's,
    --no-exit-on-error, --strict-model-config, --backend-directory, --backend-config, the logging
    options, --id, and tritonserver's tuning options (which take effect there)."""
    argv = tmp_path / "argv"
    binary = tmp_path / "tritonserver"  # writes its arguments, one a line, and exits 0
    binary.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {argv}\n')
    binary.chmod(0o755)
    process = tritonctl(str(EXAMPLES), "--engine", "triton", "--tritonserver", str(binary),
                        "--rate-limit", "execution_count", "--rate-limit-resource", "R1:4",
                        "--rate-limit-resource", "R2:1:0", "--no-exit-on-error", "--strict-model-config",
                        "--backend-directory", str(tmp_path), "--backend-config=python,shm-default-byte-size=1024",
                        f"--log-file={tmp_path}/t.log", "--log-info=false", "--id=edge",
                        "--pinned-memory-pool-byte-size=0", "--trace-file=/tmp/t.json")
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    passed = argv.read_text().splitlines()
    assert {"--rate-limit=execution_count", "--rate-limit-resource=R1:4", "--rate-limit-resource=R2:1:0",
            "--exit-on-error=false", "--strict-model-config=true", f"--backend-directory={tmp_path}",
            "--backend-config=python,shm-default-byte-size=1024", f"--log-file={tmp_path}/t.log", "--log-info=false",
            "--id=edge", "--pinned-memory-pool-byte-size=0", "--trace-config=triton,file=/tmp/t.json"} <= set(passed)
    process = tritonctl(str(EXAMPLES), "--engine", "triton", "--tritonserver", str(binary))
    process.communicate(timeout=120)
    assert not any(a.startswith("--rate-limit") for a in argv.read_text().splitlines())  # off: tritonserver's default


@pytest.mark.parametrize("_", [pytest.param(None, marks=needs_triton, id="anchor")])
def test_serves_with_tritonserver_forwards_sigterm_and_exits_with_its_status(tmp_path, _):
    http, grpc, metrics = free_ports(3)
    process = tritonctl(str(EXAMPLES), "--engine", "triton", "--tritonserver", str(tritonserver_wrapper(tmp_path)),
                        "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                        "--exit-timeout-secs", "5")
    try:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{http}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if client.is_model_ready("add_sub"):
                    break
            except Exception:  # not listening yet
                pass
            time.sleep(0.5)
        assert process.poll() is None, process.communicate()[1]
        a, b = np.arange(4, dtype=np.float32)[None], np.ones((1, 4), np.float32)
        for module, url in ((httpclient, f"127.0.0.1:{http}"), (grpcclient, f"127.0.0.1:{grpc}")):
            inputs = [module.InferInput("INPUT0", [1, 4], "FP32"), module.InferInput("INPUT1", [1, 4], "FP32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b)
            with module.InferenceServerClient(url) as infer_client:
                result = infer_client.infer("add_sub", inputs)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        # tritonserver waits for open HTTP connections until its exit timeout, then exits 1.
        client.close()
        # The server is tritonserver itself: its own metrics, on the metrics port.
        metrics_text = subprocess.run(["curl", "-s", f"http://127.0.0.1:{metrics}/metrics"], capture_output=True,
                                      text=True, timeout=30).stdout
        assert 'nv_inference_request_success{model="add_sub",version="1"} 2' in metrics_text
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err[-2000:]
    assert "validated" in err and "--model-repository=" in err
