"""Dynamic batching rules that depend on files around the config (custom batching
library) or on the backend's auto-complete."""

from __future__ import annotations

from pathlib import Path

from tritonctl.repo_schema.validate import validate_paths

BASE = """backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { }
"""


def strategy(path: str) -> str:
    return BASE + f'parameters {{ key: "TRITON_BATCH_STRATEGY_PATH" value {{ string_value: "{path}" }} }}\n'


def validate(root: Path, config: str, files: tuple[str, ...] = ()) -> list:
    model_dir = root / "models" / "m"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model_dir / "config.pbtxt").write_text(config)
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"\x7fELF")
    return validate_paths([root / "models"]).diagnostics


def db06(diagnostics) -> list[str]:
    return [d.message for d in diagnostics if d.code == "DB06"]


def test_batching_library_next_to_the_config_is_found(tmp_path):
    assert db06(validate(tmp_path, strategy("libvolume.so"), ("models/m/libvolume.so",))) == []


def test_batching_library_relative_to_the_server_directory_is_found(tmp_path):
    # Triton's own tests name the library relative to where the server starts: models/<m>/lib.so
    assert db06(validate(tmp_path, strategy("models/m/libvolume.so"), ("models/m/libvolume.so",))) == []


def test_missing_batching_library_is_reported(tmp_path):
    assert db06(validate(tmp_path, strategy("libvolume.so"))) == [
        "TRITON_BATCH_STRATEGY_PATH 'libvolume.so' does not exist"]


def test_absolute_library_path_outside_the_repository_is_left_to_the_server(tmp_path):
    assert db06(validate(tmp_path, strategy("/opt/tritonserver/lib/libvolume.so"))) == []


def test_absolute_library_path_inside_the_repository_must_exist(tmp_path):
    library = (tmp_path / "models" / "m" / "missing.so").resolve()
    assert db06(validate(tmp_path, strategy(str(library)))) == [
        f"TRITON_BATCH_STRATEGY_PATH '{library}' does not exist"]


def test_preferred_size_without_max_batch_size_explains_auto_complete(tmp_path):
    config = BASE.replace("max_batch_size: 8\n", "").replace("dynamic_batching { }",
                                                              "dynamic_batching { preferred_batch_size: [ 4 ] }")
    db01 = [d for d in validate(tmp_path, config) if d.code == "DB01"]
    assert [d.message for d in db01] == ["preferred_batch_size 4 exceeds max_batch_size 0"]
    assert "set max_batch_size explicitly" in db01[0].hint


def test_no_batching_warning_when_onnxruntime_may_fill_max_batch_size(tmp_path):
    # Without inputs and outputs the ONNX Runtime backend auto-completes max_batch_size.
    config = 'backend: "onnxruntime"\ndynamic_batching { }\n'
    model_dir = tmp_path / "models" / "m"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(config)
    assert not [d for d in validate_paths([tmp_path / "models"]).diagnostics if d.code == "DB50"]


def test_no_batching_warning_points_at_dynamic_batching(tmp_path):
    config = BASE.replace("max_batch_size: 8", "max_batch_size: 0")
    db50 = [d for d in validate(tmp_path, config) if d.code == "DB50"]
    assert [(d.span.line, d.span.col) for d in db50] == [(6, 1)]
