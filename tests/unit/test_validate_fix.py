"""`tritonctl validate --fix` and `--diff`: what is left alone, what is kept, what the exit
status says, and a property test over mutated configs. The per-code fixes, validated clean
and served, are in tests/integration/serve/test_serve_fixed_configs.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.cli_runner import cli
from helpers.fix_cases import ONNX, identity_onnx
from tritonctl.repo_schema.fixes import fix_to_fixed_point
from tritonctl.repo_schema.fixes.engine import parse_state
from tritonctl.repo_schema.render.code_examples import working_directory
from tritonctl.repo_schema.validate import validate_paths

COMMENTED = '''# resnet, exported 2024-05-01
name: "m"   # must match the directory
backend: "onnxruntime"
max_batch_sise: 8  # keep in step with the client
input [
  {
    name: "INPUT0"
    data_type: TYPE_FLOAT32   # the camera sends float
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
'''

UNFIXABLE = "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n"  # IG03: drop gpus or use KIND_GPU? yours to say


def onnx_model(root: Path, config: str, name: str = "m") -> Path:
    model_dir = root / name
    identity_onnx(model_dir / "1" / "model.onnx")
    (model_dir / "config.pbtxt").write_bytes(config.encode())
    return model_dir


def frozen(path: Path) -> tuple:
    """Set an old mtime and an unusual mode; return what must not change."""
    os.chmod(path, 0o640)
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    stat = path.stat()
    return path.read_bytes(), stat.st_mtime_ns, stat.st_mode, stat.st_ino


@pytest.mark.parametrize("config, status", [
    (ONNX.format(name="m"), 0),  # nothing wrong
    (ONNX.format(name="m").replace("max_batch_size: 8", "max_batch_size: -1"), 1),  # TOP03: no unique fix
    (ONNX.format(name="m").replace("max_batch_size: 8", "max_batch_size: 8\nmax_batch_size: 4"), 1),  # TXT06
    (ONNX.format(name="m").replace("max_batch_size: 8", "max_batch_size: 0\n"
                                   "dynamic_batching { preferred_batch_size: [ 4 ] }"), 1),  # DB01, no max
    (ONNX.format(name="m").replace("input [", "zzqx_field: 3\ninput ["), 1),  # TXT02 with no candidate
    (ONNX.format(name="m").replace('backend: "onnxruntime"', 'backend: "tensorrtllm"'), 0),  # custom backend
])
def test_nothing_fixable_leaves_the_file_untouched(tmp_path, capsys, config, status):
    model_dir = onnx_model(tmp_path, config)
    before = frozen(model_dir / "config.pbtxt")
    with working_directory(tmp_path):
        code, out, err = cli(capsys, "validate", "--fix", "m")
    assert code == status
    assert "--- a/" not in out and "fixed 0 problems in 0 files" in err
    assert frozen_state(model_dir / "config.pbtxt") == before


def frozen_state(path: Path) -> tuple:
    stat = path.stat()
    return path.read_bytes(), stat.st_mtime_ns, stat.st_mode, stat.st_ino


def test_fix_keeps_comments_layout_and_crlf(tmp_path, capsys):
    config = COMMENTED.replace("\n", "\r\n")
    model_dir = onnx_model(tmp_path, config)
    os.chmod(model_dir / "config.pbtxt", 0o640)
    with working_directory(tmp_path):
        code, out, err = cli(capsys, "validate", "--fix", "m")
    assert code == 0, out + err
    fixed = (model_dir / "config.pbtxt").read_bytes().decode()
    assert fixed == config.replace("max_batch_sise", "max_batch_size").replace("TYPE_FLOAT32", "TYPE_FP32")
    assert (model_dir / "config.pbtxt").stat().st_mode & 0o777 == 0o640
    assert "-max_batch_sise: 8  # keep in step with the client\r\n+max_batch_size: 8  # keep" in out
    assert "fixed 2 problems in 1 file; remains: no problems in 1 model" in err


def test_diff_writes_nothing_and_exits_on_what_would_remain(tmp_path, capsys):
    fixable = onnx_model(tmp_path, COMMENTED, "m")
    both = onnx_model(tmp_path, COMMENTED.replace('name: "m"', 'name: "n"') + UNFIXABLE, "n")
    states = [frozen(d / "config.pbtxt") for d in (fixable, both)]
    with working_directory(tmp_path):
        code, out, err = cli(capsys, "validate", "--diff", "m")
        assert code == 0 and out.startswith("--- a/m/config.pbtxt\n+++ b/m/config.pbtxt\n@@ ")
        assert "would fix 2 problems in 1 file; would remain: no problems in 1 model" in err
        code, out, err = cli(capsys, "validate", "--diff", "n")
        assert code == 1 and "+max_batch_size: 8" in out and "would remain: 1 error in 1 model" in err
    assert [frozen_state(d / "config.pbtxt") for d in (fixable, both)] == states


def test_exit_status_after_fix_is_what_remains(tmp_path, capsys):
    model_dir = onnx_model(tmp_path, COMMENTED + UNFIXABLE)
    with working_directory(tmp_path):
        code, out, err = cli(capsys, "validate", "--fix", "m")
        assert code == 1
        assert out.index("+max_batch_size: 8") < out.index("error[IG03]")
        assert "fixed 2 problems in 1 file; remains: 1 error in 1 model" in err
        code, out, _ = cli(capsys, "validate", "m")
    assert code == 1 and re.findall(r"error\[(\w+)\]", out) == ["IG03"]
    assert "max_batch_size: 8  # keep in step" in (model_dir / "config.pbtxt").read_text()


def test_fix_with_json_keeps_standard_output_json(tmp_path, capsys):
    onnx_model(tmp_path, COMMENTED)
    with working_directory(tmp_path):
        code, out, err = cli(capsys, "validate", "--fix", "m", "--format", "json")
    assert code == 0
    assert json.loads(out)["summary"]["errors"] == 0
    assert err.startswith("--- a/m/config.pbtxt") and "fixed 2 problems" in err


def test_a_rename_that_would_duplicate_a_field_is_not_made(tmp_path, capsys):
    config = ONNX.format(name="m").replace("max_batch_size: 8", "max_batch_size: 8\nmax_batch_sise: 4")
    model_dir = onnx_model(tmp_path, config)
    before = frozen(model_dir / "config.pbtxt")
    with working_directory(tmp_path):
        code, _, _ = cli(capsys, "validate", "--fix", "m")
    assert code == 1 and frozen_state(model_dir / "config.pbtxt") == before


def test_a_field_after_a_missing_brace_is_not_renamed(tmp_path):
    # 'max_batch_size' belongs to ModelConfig: the input block lacks its '}', no rename fixes that.
    config = ONNX.format(name="m").replace("    dims: [ 4 ]\n  }\n]\noutput", "    dims: [ 4 ]\n"
                                           "  max_batch_sise: 2\n  }\n]\noutput", 1)
    model_dir = onnx_model(tmp_path, config)
    outcome = fix_to_fixed_point(lambda: validate_paths([model_dir]))
    assert outcome.changes == []


def test_repeated_batch_dim_without_a_model_file_is_left_alone(tmp_path):
    # A Python model has no shapes to confirm that the leading -1 is the batch dimension.
    model_dir = tmp_path / "m"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, r):\n        return r\n")
    (model_dir / "config.pbtxt").write_text(ONNX.format(name="m").replace('"onnxruntime"', '"python"')
                                            .replace("dims: [ 4 ]", "dims: [ -1, 3, 4 ]"))
    assert fix_to_fixed_point(lambda: validate_paths([model_dir])).changes == []


# -- property: --fix never breaks a config and is idempotent ------------------------------------

RICH = '''# a model with most kinds of fields
name: "m"
backend: "onnxruntime"
max_batch_size: 8
input [
  {
    name: "INPUT0"   # image
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 100
}
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
version_policy: { latest { num_versions: 1 } }
'''


def _near_miss(word: str, seed: int) -> str:
    i = seed % max(len(word), 1)
    return [word[:i] + word[i + 1:], word[:i] + word[i] + word[i:], word.upper(), word + "s",
            word[:i] + "_" + word[i:]][seed % 5]


def _mutate(text: str, op: str, seed: int) -> str:
    words = [m for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*|-?\d+|\"[^\"\n]*\"|[{}\[\]:,]", text)]
    if not words:
        return text
    m = words[seed % len(words)]
    start, end, word = m.start(), m.end(), m.group()
    lines = text.splitlines(keepends=True)
    line = seed % len(lines)
    if op == "misspell":
        return text[:start] + _near_miss(word, seed // 7) + text[end:]
    if op == "delete":
        return text[:start] + text[end:]
    if op == "quote":
        return text[:start] + f'"{word.strip(chr(34))}"' + text[end:]
    if op == "unquote":
        return text[:start] + word.strip('"') + text[end:]
    if op == "number":
        return text[:start] + str([-1, 0, 3, 16, 64][seed % 5]) + text[end:]
    if op == "duplicate_line":
        return "".join(lines[:line + 1] + [lines[line]] + lines[line + 1:])
    if op == "drop_line":
        return "".join(lines[:line] + lines[line + 1:])
    if op == "batch_dim":
        return text.replace("dims: [ ", "dims: [ -1, ", 1 + seed % 2)
    return text.replace('"m"', f'"{_near_miss("m_model", seed)}"', 1)  # rename


MUTATIONS = st.lists(st.tuples(st.sampled_from(["misspell", "delete", "quote", "unquote", "number",
                                                "duplicate_line", "drop_line", "batch_dim", "rename"]),
                               st.integers(0, 10_000)), min_size=1, max_size=4)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return onnx_model(tmp_path_factory.mktemp("prop"), RICH)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=MUTATIONS, crlf=st.booleans())
def test_fix_never_breaks_a_config_and_is_idempotent(model_dir, mutations, crlf):
    text = RICH
    for op, seed in mutations:
        text = _mutate(text, op, seed)
    if crlf:
        text = text.replace("\n", "\r\n")
    config = model_dir / "config.pbtxt"
    config.write_bytes(text.encode())

    outcome = fix_to_fixed_point(lambda: validate_paths([model_dir]))
    fixed = outcome.changes[0].after if outcome.changes else text
    old, new = parse_state(text), parse_state(fixed)
    if not old.errors:
        assert not new.errors, f"--fix broke a config that parsed:\n{outcome.diff()}"
    assert len(new.errors) <= len(old.errors) or new.stop > old.stop
    assert fixed.count("\r\n") == fixed.count("\n") if crlf else "\r" not in fixed

    config.write_bytes(fixed.encode())
    again = fix_to_fixed_point(lambda: validate_paths([model_dir]))
    assert again.changes == [], f"a second --fix changed more:\n{again.diff()}"


def test_docs_list_every_fixable_code():
    from tritonctl.repo_schema.diagnostics import all_codes

    docs = (Path(__file__).parents[2] / "docs" / "validate.md").read_text()
    section = docs.split("## Fixing: `--fix` and `--diff`")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| ([A-Z]+\d\d) \|", section, re.M))
    assert listed == {code for code, info in all_codes().items() if info.fix}


def test_plain_validate_says_how_many_problems_fix_can_fix(tmp_path, capsys):
    onnx_model(tmp_path, COMMENTED + UNFIXABLE)
    onnx_model(tmp_path, ONNX.format(name="clean"), "clean")
    with working_directory(tmp_path):
        code, _, err = cli(capsys, "validate", "m")
        assert code == 1 and err == "2 of these can be fixed with `tritonctl validate --fix` (preview: --diff)\n"
        code, _, err = cli(capsys, "validate", "clean")
        assert code == 0 and err == ""


def test_a_misspelling_is_fixed_only_to_the_one_nearest_name():
    from tritonctl.repo_schema.fixes.base import unique_candidate

    kinds = ["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"]
    assert unique_candidate("KIND_CPUU", kinds) == "KIND_CPU"  # KIND_GPU is two slips away
    assert unique_candidate("KIND_XPU", kinds) is None  # one slip from both KIND_GPU and KIND_CPU
    assert unique_candidate("TYPE_INT3", ["TYPE_INT32", "TYPE_INT8", "TYPE_FP32"]) is None
