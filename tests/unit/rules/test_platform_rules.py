"""Platform, instance-group, version, warmup, parameter and optimization rules on real
repositories written to disk (the corpus covers the single-file cases)."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from helpers.corpus_harness import PYTHON_MODEL
from tritonctl.repo_schema import gpus
from tritonctl.repo_schema.validate import validate_paths

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
PYTHON = 'backend: "python"\nmax_batch_size: 8\n' + IO


def write_model(repo: Path, name: str, config: str, files: dict[str, str | bytes] | None = None) -> Path:
    model_dir = repo / name
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    for rel, content in (files if files is not None else {"1/model.py": PYTHON_MODEL}).items():
        target = model_dir / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    return model_dir


def findings(repo: Path, ignore: frozenset[str] = frozenset()) -> list[tuple[str, int | None, str]]:
    report = validate_paths([repo], ignore=ignore)
    return [(d.code, d.span.line if d.span else None, d.path.name if d.path else "") for d in report.diagnostics]


def codes(repo: Path, ignore: frozenset[str] = frozenset()) -> set[str]:
    return {code for code, _, _ in findings(repo, ignore)}


def onnx_identity(path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 4])])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


# --- GPU detection -----------------------------------------------------------------------

def test_nvidia_smi_listing_counts_devices_not_mig_slices():
    listing = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1111)\n"
               "  MIG 3g.40gb     Device  0: (UUID: MIG-aaaa)\n"
               "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2222)\n")
    assert gpus.parse_nvidia_smi_list(listing) == 2
    assert gpus.parse_nvidia_smi_list("") == 0


def test_cuda_visible_devices_narrows_the_count_like_cuda():
    assert gpus.visible_count(4, None) == 4
    assert gpus.visible_count(4, "2,3") == 2
    assert gpus.visible_count(2, "0,7,1") == 1  # CUDA stops at the first invalid id
    assert gpus.visible_count(4, "") == 0
    assert gpus.visible_count(1, "GPU-1111") == 1


def test_assume_gpus_overrides_detection(monkeypatch):
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "3")
    info = gpus.detect_gpus()
    assert (info.count, info.ids, info.source) == (3, [0, 1, 2], "TRITONCTL_ASSUME_GPUS=3")
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "0")
    assert gpus.detect_gpus().count == 0


def test_invalid_assume_gpus_falls_back_to_the_machine(monkeypatch):
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "many")
    assert gpus.assumed_gpus() is None
    assert gpus.detect_gpus().source != "TRITONCTL_ASSUME_GPUS=many"


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None or gpus.PROC_GPUS.exists(), reason="machine has a GPU")
def test_machine_without_driver_has_no_gpu(monkeypatch):
    monkeypatch.delenv(gpus.ASSUME_GPUS_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.detect_gpus() == gpus.GpuInfo(0, "no NVIDIA driver found")


# --- instance groups against the server's GPUs ------------------------------------------

GPU_GROUP = PYTHON + "instance_group [ { count: 1 kind: KIND_GPU } ]\n"


def test_kind_gpu_without_gpus_is_an_error_until_gpus_are_assumed(tmp_path, monkeypatch):
    write_model(tmp_path, "m", GPU_GROUP)
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "0")
    assert ("IG04", 6, "config.pbtxt") in findings(tmp_path)
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "1")
    assert findings(tmp_path) == []


def test_gpu_ids_are_checked_against_the_assumed_count(tmp_path, monkeypatch):
    write_model(tmp_path, "m", PYTHON + "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]\n")
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "1")
    assert codes(tmp_path) == {"IG05"}
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "2")
    assert codes(tmp_path) == set()


def test_kind_auto_is_fine_without_gpu(tmp_path, monkeypatch):
    write_model(tmp_path, "m", PYTHON + "instance_group [ { count: 2 kind: KIND_AUTO } ]\n")
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "0")
    assert codes(tmp_path) == set()


def test_tensorrt_without_groups_needs_a_gpu(tmp_path, monkeypatch):
    write_model(tmp_path, "m", 'platform: "tensorrt_plan"\nmax_batch_size: 8\n' + IO, {"1/model.plan": b"\0"})
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "0")
    assert "IG07" in codes(tmp_path)
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "1")
    assert "IG07" not in codes(tmp_path)


# --- version directories ---------------------------------------------------------------

def test_misnamed_version_folder_leaves_nothing_to_load(tmp_path):
    write_model(tmp_path, "m", PYTHON, {"v1/model.py": PYTHON_MODEL})
    found = findings(tmp_path)
    assert ("VP03", None, "config.pbtxt") in found
    assert ("VP50", None, "v1") in found


def test_leading_zero_and_suffixed_version_folders_warn(tmp_path):
    write_model(tmp_path, "m", PYTHON, {"1/model.py": PYTHON_MODEL, "01/model.py": PYTHON_MODEL,
                                        "1_old/model.py": PYTHON_MODEL, "warmup/": "", "configs/": ""})
    report = validate_paths([tmp_path])
    warned = {d.path.name: d.message for d in report.diagnostics if d.code == "VP50"}
    assert set(warned) == {"01", "1_old"}
    assert "leading zeros" in warned["01"]
    assert "collides with '1'" in warned["1_old"]
    assert report.errors == 0


def test_backend_that_cannot_be_detected(tmp_path):
    write_model(tmp_path, "m", "max_batch_size: 8\n" + IO, {"1/weights.bin": "x"})
    report = validate_paths([tmp_path])
    message = next(d.message for d in report.diagnostics if d.code == "PB08")
    assert "weights.bin" in message


# --- onnxruntime: accelerators and parameters with a real model ------------------------

ORT = 'backend: "onnxruntime"\nmax_batch_size: 8\n' + IO


@pytest.fixture
def ort_repo(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.ASSUME_GPUS_ENV, "1")

    def make(extra: str) -> Path:
        model_dir = write_model(tmp_path, "m", ORT + extra, {})
        onnx_identity(model_dir / "1" / "model.onnx")
        return tmp_path
    return make


def test_onnx_model_with_good_settings_is_clean(ort_repo):
    repo = ort_repo('parameters { key: "execution_mode" value: { string_value: "1" } }\n'
                    'parameters { key: "enable_mem_arena" value: { string_value: "OFF" } }\n'
                    'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" '
                    'parameters { key: "precision_mode" value: "FP16" } } ] } }\n')
    assert findings(repo) == []


def test_onnx_unknown_accelerator_and_parameter(ort_repo):
    repo = ort_repo('optimization { execution_accelerators {\n'
                    '  gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precison_mode" value: "FP16" } } ]\n'
                    '  cpu_execution_accelerator [ { name: "openvno" } ]\n} }\n')
    found = [(code, line) for code, line, _ in findings(repo)]
    assert sorted(found) == [("OPT02", 7), ("OPT02", 8)]


def test_onnx_parameter_values_and_typos(ort_repo):
    repo = ort_repo('parameters { key: "execution_mode" value: { string_value: "2" } }\n'
                    'parameters { key: "enable_mem_arna" value: { string_value: "1" } }\n')
    report = validate_paths([repo])
    by_code = {d.code: d for d in report.diagnostics}
    assert by_code["PAR02"].span.line == 6
    assert by_code["PAR50"].hint == "did you mean 'enable_mem_arena'?"


def test_onnx_gpu_accelerator_on_cpu_groups_and_graph_level(ort_repo):
    repo = ort_repo('instance_group [ { count: 1 kind: KIND_CPU } ]\n'
                    'optimization {\n  graph { level: 3 }\n'
                    '  execution_accelerators { gpu_execution_accelerator [ { name: "cuda" } ] }\n}\n')
    assert codes(repo) == {"IG53", "OPT52"}


# --- warmup, cache --------------------------------------------------------------------

def test_warmup_file_of_the_right_size_is_clean(tmp_path):
    config = PYTHON + ('model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value: '
                       '{ data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "input0.bin" } } } ]\n')
    write_model(tmp_path, "m", config, {"1/model.py": PYTHON_MODEL, "warmup/input0.bin": b"\0" * 16})
    assert findings(tmp_path) == []


def test_python_auto_complete_may_add_warmup_inputs(tmp_path):
    """Warmup inputs are checked against the config auto_complete_config completes."""
    hook = "\n    @staticmethod\n    def auto_complete_config(config):\n        %s\n        return config\n"
    adds = 'config.add_input({"name": "EXTRA", "data_type": "TYPE_FP32", "dims": [2]})'
    config = PYTHON + ('model_warmup [ { name: "w" batch_size: 1 inputs { key: "EXTRA" value: '
                       '{ data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } inputs { key: "INPUT0" value: '
                       '{ data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n')
    write_model(tmp_path, "adds", config, {"1/model.py": PYTHON_MODEL + hook % adds})
    write_model(tmp_path, "keeps", config, {"1/model.py": PYTHON_MODEL + hook % "pass"})
    found = {(d.model, d.code) for d in validate_paths([tmp_path]).diagnostics}
    assert ("adds", "WU06") not in found and ("keeps", "WU06") in found


def test_response_cache_warning_can_be_ignored(tmp_path):
    write_model(tmp_path, "m", PYTHON + "response_cache { enable: true }\n")
    assert codes(tmp_path) == {"RC50"}
    assert codes(tmp_path, ignore=frozenset({"RC50"})) == set()


def test_python_parameter_read_by_model_py_is_not_a_typo(tmp_path):
    code = PYTHON_MODEL + "\nKEY = 'EXECUTION_ENV_PTH'\n"
    write_model(tmp_path, "m", PYTHON + 'parameters { key: "EXECUTION_ENV_PTH" value: { string_value: "x" } }\n',
                {"1/model.py": code})
    assert codes(tmp_path) == set()


@pytest.mark.parametrize("runtime, expected", [("__invalid_runtime__", {"PB53"}), ("model.py", set()),
                                               ("libtriton_python.so", set())])
def test_a_runtime_that_names_no_library_is_flagged(tmp_path, runtime, expected):
    write_model(tmp_path, "m", PYTHON.replace('backend: "python"\n', f'backend: "python"\nruntime: "{runtime}"\n'))
    assert codes(tmp_path) & {"PB53", "PB06"} == expected


# The PyTorch backend's Python runtime (server qa/L0_pytorch_python_runtime: the config's platform
# line replaced by backend: "pytorch" and runtime: "model.py"): the Python backend runs the
# backend's model.py, which serves a torch.nn.Module from model.py or a TorchScript model.pt,
# passes the inputs in config order and reads NUM_THREADS and TORCH_COMPILE_OPTIONAL_PARAMETERS.
TORCH_RUNTIME = """name: "addsub"
backend: "pytorch"
runtime: "model.py"
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] optional: true }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_BF16 dims: [ 4 ] }
]
instance_group: [{ kind: KIND_MODEL }]
parameters: { key: "NUM_THREADS" value: { string_value: "4" } }
parameters: { key: "NUM_INTEROP_THREADS" value: { string_value: "2" } }
parameters: { key: "TORCH_COMPILE_OPTIONAL_PARAMETERS" value: { string_value: "{\\"disable\\": true}" } }
"""
TORCH_MODULE = "import torch\n\n\nclass AddSubNet(torch.nn.Module):\n    def forward(self, a, b):\n        return a + b, a - b\n"


@pytest.mark.parametrize("files", [{"1/model.py": TORCH_MODULE}, {"1/model.pt": b"PK"}])
def test_the_pytorch_python_runtime_serves_a_module_or_torchscript(tmp_path, files):
    write_model(tmp_path, "addsub", TORCH_RUNTIME, files)
    assert findings(tmp_path) == []
    # The same config on the C++ backend: model.pt, <name>__<index> names, no optional input,
    # no BF16, none of those parameters.
    write_model(tmp_path / "cpp", "addsub", TORCH_RUNTIME.replace('runtime: "model.py"\n', ""), files)
    assert {"IO13", "IO18", "PAR50"} <= codes(tmp_path / "cpp")


def test_the_pytorch_python_runtime_needs_one_of_its_files(tmp_path):
    write_model(tmp_path, "addsub", TORCH_RUNTIME, {"1/weights.bin": b""})
    report = validate_paths([tmp_path])
    [missing] = [d for d in report.diagnostics if d.code == "PB10"]
    assert missing.message == ("version 1 of model 'addsub' has none of model.pt, model.py, the files the pytorch "
                               "backend's Python runtime (runtime: \"model.py\") loads (it holds: weights.bin)")
    assert (missing.span.line, missing.span.col) == (3, 10)


def test_the_pytorch_python_runtime_parameters_are_checked(tmp_path):
    config = TORCH_RUNTIME.replace('string_value: "4"', 'string_value: "four"').replace(
        "NUM_INTEROP_THREADS", "NUM_INTEROP_THREAD").replace('{\\"disable\\": true}', '{\\"model\\": 1}')
    write_model(tmp_path, "addsub", config, {"1/model.py": TORCH_MODULE})
    report = validate_paths([tmp_path])
    found = [(d.code, d.span.line, d.message) for d in report.diagnostics]
    assert found == [
        ("PAR02", 13, "parameter 'NUM_THREADS' is 'four'; the pytorch backend's Python runtime expects a whole "
                      "number"),
        ("PAR50", 14, "the pytorch backend's Python runtime does not read parameter 'NUM_INTEROP_THREAD', so it "
                      "has no effect"),
        ("PAR02", 15, "parameter 'TORCH_COMPILE_OPTIONAL_PARAMETERS' is '{\"model\": 1}'; the pytorch backend's "
                      "Python runtime expects a JSON object of torch.compile() arguments other than 'model'"),
    ]


def test_python_backend_with_platform_pytorch_points_at_the_pytorch_runtime(tmp_path):
    # python_backend's examples/pytorch_platform_handler: Triton 2.51's Python backend ignores
    # platform and refuses the module ("has no attribute 'TritonPythonModel'").
    config = 'name: "resnet50_pytorch"\nbackend: "python"\nplatform: "pytorch"\nmax_batch_size: 128\n' + IO
    write_model(tmp_path, "resnet50_pytorch", config, {"1/model.py": TORCH_MODULE})
    [load] = validate_paths([tmp_path]).diagnostics
    assert load.code == "PY01" and 'backend: "pytorch" and runtime: "model.py"' in load.hint
