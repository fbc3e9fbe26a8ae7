"""IO and batch-IO rules on cases the python-backend corpus cannot express:
backend-specific checks (TensorRT, PyTorch, ONNX Runtime) and rule helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonctl.repo_schema.diagnostics import Severity, all_codes
from tritonctl.repo_schema.rules.io import element_count
from tritonctl.repo_schema.validate import validate_paths

IO_GROUPS = ("IO", "BIO", "DB", "SB", "ST")


def validate_model(tmp_path: Path, config: str, files: dict[str, str | bytes] | None = None):
    """Write model 'm' (config plus files) into a repository and validate it."""
    model_dir = tmp_path / "repo" / "m"
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    for name, content in (files or {"1/model.py": "class TritonPythonModel:\n    pass\n"}).items():
        target = model_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return validate_paths([tmp_path / "repo"]).diagnostics


def found(diagnostics, code: str) -> list[tuple[int, int]]:
    return [(d.span.line, d.span.col) for d in diagnostics if d.code == code and d.span]


def at(config: str, line: int, token: str, nth: int = 1) -> tuple[int, int]:
    """line:col of the nth occurrence of ``token`` on 1-based ``line`` of ``config``."""
    text, col = config.splitlines()[line - 1], -1
    for _ in range(nth):
        col = text.index(token, col + 1)
    return line, col + 1


def test_optional_input_is_refused_by_pytorch(tmp_path):
    config = """platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
    diagnostics = validate_model(tmp_path, config, {"1/model.pt": b""})
    assert found(diagnostics, "IO13") == [at(config, 3, "true")]


def test_optional_input_is_accepted_by_python(tmp_path):
    diagnostics = validate_model(tmp_path, """backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    assert not [d for d in diagnostics if d.code in ("IO13", "IO14")]


def test_onnxruntime_refuses_optional_input_with_batching_and_ragged(tmp_path):
    config = """backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] optional: true allow_ragged_batch: true } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
    diagnostics = validate_model(tmp_path, config, {"1/model.onnx": b""})
    assert found(diagnostics, "IO14") == [at(config, 3, "true"), at(config, 3, "true", 2)]
    messages = [d.message for d in diagnostics if d.code == "IO14"]
    assert "max_batch_size: 4" in messages[0] and "allow_ragged_batch" in messages[1]


def test_tensorrt_data_types_and_ragged_non_linear_io(tmp_path):
    config = """platform: "tensorrt_plan"
max_batch_size: 4
input [
  { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] is_non_linear_format_io: true allow_ragged_batch: true },
  { name: "IDS" data_type: TYPE_UINT64 dims: [ 4 ] }
]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 4 ] } ]
"""
    diagnostics = validate_model(tmp_path, config, {"1/model.plan": b""})
    assert found(diagnostics, "IO15") == [at(config, 4, "true", 2)]
    assert found(diagnostics, "IO18") == [at(config, 5, "TYPE_UINT64"), at(config, 7, "TYPE_STRING")]
    hint = next(d.hint for d in diagnostics if d.code == "IO18")
    assert "TYPE_INT64" in hint and "TYPE_UINT64" not in hint


def test_tensorrt_batch_output_cannot_target_a_shape_tensor(tmp_path):
    config = """platform: "tensorrt_plan"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "SHAPE" data_type: TYPE_INT64 dims: [ 2 ] is_shape_tensor: true } ]
batch_output [ { target_name: "SHAPE" source_input: "INPUT0" } ]
"""
    diagnostics = validate_model(tmp_path, config, {"1/model.plan": b""})
    assert found(diagnostics, "BIO07") == [at(config, 5, '"SHAPE"')]
    assert not found(diagnostics, "IO11")  # shape tensors are fine on tensorrt_plan


def test_non_linear_io_needs_three_dims_on_tensorrt(tmp_path):
    config = """platform: "tensorrt_plan"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8, 8 ] is_non_linear_format_io: true } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
    diagnostics = validate_model(tmp_path, config, {"1/model.plan": b""})
    assert found(diagnostics, "IO12") == [at(config, 3, "[ 8, 8 ]")]
    assert "needs 3 dims, not 2" in next(d.message for d in diagnostics if d.code == "IO12")


def test_variable_first_dimension_alone_is_not_a_repeated_batch(tmp_path):
    # Box counts, sequence lengths, image sizes: without a model file showing the batch twice
    # (tests/unit/test_model_files_onnx.py), a leading -1 is legitimate.
    config = """backend: "python"
max_batch_size: 16
input [ { name: "input_1" data_type: TYPE_FP32 dims: [ -1, 3, 512, 864 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 768 ] } ]
"""
    assert not [d for d in validate_model(tmp_path, config) if d.code.startswith("IO")]


def test_label_file_in_a_model_subdirectory_is_found(tmp_path):
    diagnostics = validate_model(tmp_path, """backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels/classes.txt" } ]
""", {"1/model.py": "", "labels/classes.txt": "cat\ndog\n"})
    assert not found(diagnostics, "IO16")


def test_unnamed_entries_are_named_by_position(tmp_path):
    diagnostics = validate_model(tmp_path, """backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { data_type: TYPE_FP32 } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    messages = {d.code: d.message for d in diagnostics}
    assert messages["IO01"] == "input #2 has no name"
    assert messages["IO03"] == "input #2 has no dims"


@pytest.mark.parametrize("dims, expected", [
    ([4, 4], 16), ([], 1), ([2, -1, 3], -1), ([1], 1),
])
def test_element_count_follows_triton(dims, expected):
    assert element_count(dims) == expected


def test_element_count_overflow_is_detected():
    with pytest.raises(OverflowError):
        element_count([2**32, 2**32])


def test_codes_are_registered_with_rule_ids_and_severities():
    codes = {c: info for c, info in all_codes().items() if c.rstrip("0123456789") in IO_GROUPS}
    assert len(codes) >= 55
    for code, info in codes.items():
        number = int(code[len(code.rstrip("0123456789")):])
        assert info.explanation and info.title, code
        if number >= 50:
            assert info.severity in (Severity.WARNING, Severity.INFO), code
        else:
            assert info.triton_rule == f"{code.rstrip('0123456789')}-{number:02d}", code
            assert info.severity is Severity.ERROR, code
