"""A command whose library is not installed says in one line which install it needs, with no
traceback, and exits 1. Each case runs the real command line in a fresh Python where the
library cannot be imported (``sys.modules[name] = None``, as Python does for a module that
failed to import), the rest of tritonctl untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.build_models import dynamic_add_sub

ROOT = Path(__file__).parents[2]


def run_without(modules: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    blocked = "".join(f"sys.modules[{m!r}] = None; " for m in modules)
    code = f"import sys; {blocked}from tritonctl.cli.app import main; main()"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRITONCTL_KSERVE_PYTHON", None)  # export's check in this Python, where the modules are blocked
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def assert_one_line(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: {message}"


def test_serve(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    done = run_without(["orjson"], "serve", str(repo), "--http-port", "0", "--grpc-port", "0", "--metrics-port", "-1")
    assert_one_line(done, "tritonctl serve needs orjson: pip install orjson")


def test_perf():
    done = run_without(["tritonclient"], "perf", "-m", "simple", "-u", "127.0.0.1:9")
    assert_one_line(done, "tritonctl perf needs tritonclient: pip install tritonclient")


def test_analyze_says_so_before_measuring(tmp_path):
    """pandas only: without pyarrow a run keeps its CSV (tests/unit/analyzer/test_results_files.py)."""
    done = run_without(["pandas"], "analyze", str(tmp_path), "--model", "m")
    assert_one_line(done, "tritonctl analyze needs pandas: pip install pandas")


def test_build_from_pytorch_names_the_torch_extra(tmp_path):
    done = run_without(["torch"], "build", "mypkg.models:make", "--input", "x:fp32:4", "--repo", str(tmp_path),
                       "--name", "net")
    assert_one_line(done, "building from a PyTorch source needs torch: pip install 'tritonctl[torch]'")


def test_build_from_onnx_needs_onnxruntime(tmp_path):
    source = dynamic_add_sub(tmp_path / "add_sub.onnx")
    done = run_without(["onnxruntime"], "build", str(source), "--repo", str(tmp_path / "repo"), "--name", "m")
    assert_one_line(done, "tritonctl build needs onnxruntime: pip install onnxruntime")
    assert not (tmp_path / "repo").exists()


def test_a_library_missing_deeper_down_gets_the_same_line(tmp_path):
    """uvicorn serves the metrics port: it is imported only once the server starts."""
    repo = tmp_path / "repo"
    repo.mkdir()
    done = run_without(["uvicorn"], "serve", str(repo), "--http-port", "-1", "--grpc-port", "-1",
                       "--metrics-port", "0")
    assert_one_line(done, "tritonctl serve needs uvicorn: pip install uvicorn")


def test_validate_and_help_need_none_of_them(tmp_path):
    heavy = ["onnxruntime", "orjson", "uvicorn", "pandas", "pyarrow", "plotly", "torch", "grpc"]
    assert run_without(heavy, "--help").returncode == 0
    done = run_without(heavy, "validate", str(ROOT / "examples" / "model_repository"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_export_kserve_without_kserve():
    examples = ROOT / "examples" / "model_repository"
    done = run_without(["kserve"], "export", "kserve", str(examples), "--storage-uri", "gs://b/r")
    assert_one_line(done, "tritonctl export kserve (checking manifests against KServe's schema) needs kserve: "
                    "pip install 'tritonctl[export]'")
    assert done.stdout == ""
