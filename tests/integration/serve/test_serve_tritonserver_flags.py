"""``tritonctl serve`` takes a tritonserver command line as it is written: boolean options with a
value (``--strict-model-config=false``, ``--exit-on-error false``), ``--disable-auto-complete-config``,
``--allow-http`` / ``--allow-grpc``, and ``--backend-config`` (whose ``default-max-batch-size`` sets
what onnxruntime's auto-complete gives a model that can batch)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tritonclient.http as httpclient
from hypothesis import given
from hypothesis import strategies as st

from helpers.serve_models import write_add_sub, write_onnx_only
from tritonctl.cli.errors import CliError
from tritonctl.cli.serve import tritonserver_spellings
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
])
def test_tritonserver_spellings_become_this_commands(given_args, expected):
    assert tritonserver_spellings(given_args) == expected


def test_a_boolean_value_tritonserver_refuses_is_refused_in_its_words():
    with pytest.raises(CliError, match="invalid value for bool option: maybe"):
        tritonserver_spellings(["--exit-on-error=maybe"])


@given(st.lists(st.sampled_from(["--exit-on-error", "--strict-model-config=off", "--allow-http", "true", "0",
                                 "--strict-readiness=", "repo", "--http-port=1", "--disable-auto-complete-config"]),
                max_size=6))
def test_any_command_line_is_rewritten_or_refused(args):
    try:
        rewritten = tritonserver_spellings(args)
    except CliError as exc:
        assert "invalid value for bool option" in str(exc)
        return
    assert not any(a.startswith(("--exit-on-error=", "--strict-model-config=", "--strict-readiness=", "--allow-"))
                   or a == "--disable-auto-complete-config" for a in rewritten)


def test_a_tritonserver_command_line_serves_as_written(tmp_path):
    """--strict-model-config=true with --exit-on-error=false: a model without its config fails to
    load, the others serve; --allow-grpc=false turns gRPC off."""
    repo = tmp_path / "repo"
    write_onnx_only(repo)
    write_add_sub(repo)
    process = subprocess.Popen([sys.executable, "-m", "tritonctl", "serve", f"--model-repository={repo}",
                                "--strict-model-config=true", "--exit-on-error=false", "--allow-grpc=false",
                                "--http-port=0", "--metrics-port=-1", "--strict-readiness=false"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "serving " in line:
                break
        log = "".join(lines)
        assert "gRPC None" in log, log
        port = int(log.split("HTTP ")[-1].split(",")[0])
        with httpclient.InferenceServerClient(f"127.0.0.1:{port}") as client:
            assert client.is_server_ready()
            assert client.is_model_ready("add_sub") and not client.is_model_ready("onnx_only")
    finally:
        process.terminate()
        process.communicate(timeout=60)


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
