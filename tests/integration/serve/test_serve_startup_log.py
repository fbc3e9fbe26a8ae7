"""`tritonctl serve` says at startup which HTTP and gRPC transport it runs, and, where it runs
the Python ones because the C++ ones were not built, how to get them. The command runs in a
subprocess; "not built" is made by leaving the compiled modules unimportable
(``sys.modules[name] = None``), as on a machine whose install found neither library."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tritonctl.optional import onnxruntime_conflict
from tritonctl.serve.grpc import native as grpc_native
from tritonctl.serve.http import native as http_native

ROOT = Path(__file__).parents[3]
NATIVE = ["tritonctl.serve.grpc._native", "tritonctl.serve.http._native"]


def inherited_path() -> list[str]:
    """This process's PYTHONPATH entries (where the dependencies may live), kept after the test's own."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def startup_lines(repo: Path | None, blocked: list[str], path: list[Path] = (), extra: list[str] = ()) -> list[str]:
    """The log up to the line that says the server is serving; the server is then stopped.
    ``repo``: the REPOSITORY argument (None: none given); ``path``: more entries for PYTHONPATH;
    ``extra``: more flags."""
    code = "import sys; " + "".join(f"sys.modules[{m!r}] = None; " for m in blocked)
    code += "from tritonctl.cli.app import main; main()"
    process = subprocess.Popen([sys.executable, "-c", code, "serve", *([str(repo)] if repo else []), "--http-port", "0",
                                "--grpc-port", "0",
                                "--metrics-port", "-1", *extra],
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [ROOT, *path, *inherited_path()]))),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if " serving " in line:
                break
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert any(" serving " in line for line in lines), lines
    return lines


@pytest.mark.timeout(90)
def test_the_transports_it_runs(tmp_path):
    lines = startup_lines(tmp_path, [])
    http = "libevent (C++ transport)" if http_native.available() else "uvicorn (Python transport)"
    grpc = "gRPC C++ (C++ transport)" if grpc_native.available() else "grpc.aio (Python transport)"
    assert f"transports: HTTP over {http}, gRPC over {grpc}" in "\n".join(lines)


@pytest.mark.timeout(90)
def test_the_repository_can_be_named_as_tritonserver_names_it(tmp_path):
    (tmp_path / "models").mkdir()
    lines = startup_lines(None, [], extra=["--model-repository", str(tmp_path / "models")])
    assert f"serving {tmp_path / 'models'}: HTTP " in lines[-1]


def test_serve_takes_one_repository(tmp_path, capsys):
    from tritonctl.cli.app import main

    with pytest.raises(SystemExit) as caught:
        main(["serve", str(tmp_path), "--model-store", str(tmp_path)])
    assert caught.value.code == 2
    assert "serve takes one model repository, got 2" in capsys.readouterr().err


@pytest.mark.timeout(90)
def test_python_transports_say_how_to_get_the_cpp_ones(tmp_path):
    lines = startup_lines(tmp_path, NATIVE)
    text = "\n".join(lines)
    assert "transports: HTTP over uvicorn (Python transport), gRPC over grpc.aio (Python transport)" in text
    for protocol, package in (("HTTP", "libevent-dev"), ("gRPC", "libgrpc++-dev")):
        hint = next(line for line in lines if f"] {protocol}: the C++ transport is not built" in line)
        assert f"apt-get install {package} pkg-config g++" in hint
        assert "reinstall tritonctl from source (pip install -e . in a checkout" in hint
    # the line the analyzer's subprocess engine reads the ports from is unchanged
    from tritonctl.analyzer.engine import SERVING_LINE

    assert SERVING_LINE.search(lines[-1]), lines[-1]


@pytest.mark.timeout(90)
def test_onnxruntime_beside_onnxruntime_gpu_is_a_warning_with_the_fix(tmp_path):
    """Installed distributions are what importlib.metadata finds on the path: a dist-info
    directory records onnxruntime-gpu as installed beside this environment's onnxruntime."""
    site = tmp_path / "site"
    record = site / "onnxruntime_gpu-1.32.0.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.32.0\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    warning = [line for line in startup_lines(repo, [], [site]) if "onnxruntime-gpu" in line]
    assert len(warning) == 1 and " W " in warning[0]
    assert "pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps onnxruntime-gpu" in warning[0]
    if onnxruntime_conflict() is None:  # this environment has one of them only
        assert not [line for line in startup_lines(repo, []) if "onnxruntime-gpu" in line]


def test_a_model_that_fails_at_start_ends_the_server_unless_asked_not_to(tmp_path):
    """tritonserver's --exit-on-error (default true), as its QA runs expect of a broken model."""
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: 0\n')
    (tmp_path / "broken" / "1" / "model.py").write_text("raise RuntimeError('broken on purpose')\n")
    command = [sys.executable, "-m", "tritonctl", "serve", str(tmp_path), "--http-port", "0", "--grpc-port", "0",
               "--metrics-port", "-1"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *inherited_path()]))
    ended = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert ended.returncode == 1
    assert "failed to load all models ('broken' did not load)" in ended.stderr + ended.stdout
    lines = startup_lines(tmp_path, [], extra=["--no-exit-on-error"])
    assert any("load failed for model 'broken'" in line for line in lines) and " serving " in lines[-1]
