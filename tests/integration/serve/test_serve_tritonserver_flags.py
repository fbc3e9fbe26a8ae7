"""``tritonctl serve`` takes a tritonserver command line as it is written: boolean options with a
value (``--strict-model-config=false``, ``--exit-on-error false``), ``--disable-auto-complete-config``,
``--allow-http`` / ``--allow-grpc``, the endpoint addresses, the deprecated trace and cache options,
the logging options, ``--id``, tuning options that mean nothing here (taken, reported), and
``--backend-config`` (whose ``default-max-batch-size`` sets what onnxruntime's auto-complete gives a
model that can batch); what it cannot honour (SSL, SageMaker) is refused."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import tritonclient.http as httpclient
from hypothesis import given
from hypothesis import strategies as st

from helpers.serve_models import write_add_sub, write_onnx_only
from tritonctl.analyzer.engine import free_ports
from tritonctl.cli.errors import CliError
from tritonctl.cli.tritonserver_flags import rewrite
from tritonctl.serve.core.backend_config import BackendConfigError, parse_backend_config
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


@pytest.mark.parametrize("given_args, expected", [
    (["--strict-model-config=false"], ["--no-strict-model-config"]),
    (["--strict-model-config=True"], ["--strict-model-config"]),
    (["--exit-on-error", "false", "repo"], ["--no-exit-on-error", "repo"]),
    (["--strict-readiness=0"], ["--no-strict-readiness"]),
    (["--strict-model-config", "repo"], ["--strict-model-config", "repo"]),
    (["--disable-auto-complete-config"], ["--strict-model-config"]),
    (["--allow-http=false", "--http-port=9000"], ["--http-port=9000", "--http-port=-1"]),
    (["--allow-grpc", "off", "--allow-http=true"], ["--grpc-port=-1"]),
    (["--model-repository=/m", "--log-verbose=1"], ["--model-repository=/m", "--log-verbose=1"]),
    (["--http-address=0.0.0.0", "--grpc-address", "0.0.0.0", "--host=127.0.0.1"],
     ["--host=127.0.0.1", "--host=0.0.0.0"]),
    (["--trace-file=/t.json", "--trace-level=TIMESTAMPS", "--trace-rate", "10", "--response-cache-byte-size=64"],
     ["--trace-config=triton,file=/t.json", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=10",
      "--cache-config=local,size=64"]),
    (["--pinned-memory-pool-byte-size=0", "--grpc-keepalive-time", "7200000", "--grpc-use-ssl=false"],
     ["--without-effect=--pinned-memory-pool-byte-size=0", "--without-effect=--grpc-keepalive-time=7200000"]),
])
def test_tritonserver_spellings_become_this_commands(given_args, expected):
    assert rewrite(given_args) == expected


@pytest.mark.parametrize("args, message", [
    (["--exit-on-error=maybe"], "invalid value for bool option: maybe"),
    (["--grpc-use-ssl=true"], "--grpc-use-ssl: this server does not have gRPC over SSL/TLS"),
    (["--allow-sagemaker", "1"], "this server does not have the SageMaker endpoint"),
    (["--http-address=0.0.0.0", "--metrics-address=127.0.0.1"], "this server listens on one address"),
    (["--model-load-thread-count"], "option '--model-load-thread-count' requires a value"),
])
def test_what_cannot_be_honoured_is_refused_in_words(args, message):
    with pytest.raises(CliError, match=message):
        rewrite(args)


@given(st.lists(st.sampled_from(["--exit-on-error", "--strict-model-config=off", "--allow-http", "true", "0",
                                 "--strict-readiness=", "repo", "--http-port=1", "--disable-auto-complete-config"]),
                max_size=6))
def test_any_command_line_is_rewritten_or_refused(args):
    try:
        rewritten = rewrite(args)
    except CliError as exc:
        assert "invalid value for bool option" in str(exc)
        return
    assert not any(a.startswith(("--exit-on-error=", "--strict-model-config=", "--strict-readiness=", "--allow-"))
                   or a == "--disable-auto-complete-config" for a in rewritten)


def test_a_tritonserver_command_line_serves_as_written(tmp_path):
    """--strict-model-config=true with --exit-on-error=false: a model without its config fails to
    load, the others serve; --allow-grpc=false turns gRPC off; the log goes to --log-file without
    its INFO records; --id names the server; a tuning option is taken."""
    repo = tmp_path / "repo"
    write_onnx_only(repo)
    write_add_sub(repo)
    log_file = tmp_path / "server.log"
    (port,) = free_ports(1)
    process = subprocess.Popen([sys.executable, "-m", "tritonctl", "serve", f"--model-repository={repo}",
                                "--strict-model-config=true", "--exit-on-error=false", "--allow-grpc=false",
                                f"--http-port={port}", "--metrics-port=-1", "--strict-readiness=false", "--id=edge-7",
                                f"--log-file={log_file}", "--log-info=false", "--buffer-manager-thread-count=4"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if client.is_server_ready():
                    break
            except Exception:  # not listening yet
                time.sleep(0.2)
        assert client.get_server_metadata()["name"] == "edge-7"
        assert client.is_model_ready("add_sub") and not client.is_model_ready("onnx_only")
        assert client.get_log_settings()["log_file"] == str(log_file)
        client.close()
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=60)
    log = log_file.read_text()
    assert "E tritonctl.serve]" in log and " I tritonctl.serve]" not in log, log  # the failed load; no INFO
    assert "W tritonctl.serve] --buffer-manager-thread-count=4: a tritonserver option without effect" in log
    assert "tritonctl.serve]" not in output  # the log went to the file


@pytest.mark.parametrize("backend_config, max_batch_size", [
    ([], 4), (["default-max-batch-size=0"], 0), (["onnxruntime,default-max-batch-size=16"], 16),
    (["default-max-batch-size=2", "onnxruntime,default-max-batch-size=8", "python,shm-default-byte-size=1048576"], 8),
])
def test_default_max_batch_size_sets_what_onnxruntime_auto_complete_gives(tmp_path, backend_config, max_batch_size):
    write_onnx_only(tmp_path / "repo")
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=None, metrics_port=None, exit_timeout_secs=5,
                           backend_config=backend_config)
    with BackgroundServer(options) as server:
        with httpclient.InferenceServerClient(server.http_url) as client:
            config = client.get_model_config("onnx_only")
    assert config.get("max_batch_size", 0) == max_batch_size
    assert ("dynamic_batching" in config) is (max_batch_size > 1)


@pytest.mark.parametrize("value, message", [
    (",default-max-batch-size=1", "No backend specified. --backend-config option format is"),
    ("python", "--backend-config option format is '<backend name>,<setting>=<value>'. Got python"),
    ("default-max-batch-size=-1", "default-max-batch-size takes a non-negative integer, got '-1'"),
])
def test_backend_config_refusals(tmp_path, value, message):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(tmp_path), f"--backend-config={value}"],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 2 and message in process.stderr


@given(st.text(alphabet=st.sampled_from("ab,=-1 default-max-batch-size"), max_size=30))
def test_any_backend_config_value_is_taken_or_refused_in_words(text):
    try:
        config = parse_backend_config([text])
    except BackendConfigError as exc:
        assert "--backend-config" in str(exc)
        return
    (backend, setting, value), = config.settings
    assert text == (f"{backend}," if backend else "") + f"{setting}={value}"
