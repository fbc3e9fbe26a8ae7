"""Template configs (TensorRT-LLM's ${...} placeholders): each placeholder is one
diagnostic, the rest is still checked, and --set fills them with positions kept."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from helpers.cli_runner import cli
from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.render.code_examples import working_directory
from tritonctl.repo_schema.schema import model_config_pb2

TEMPLATE = '''name: "llm"
backend: "python"
max_batch_size: ${triton_max_batch_size}
model_transaction_policy { decoupled: ${decoupled_mode} }
dynamic_batching {
  preferred_batch_size: [ ${triton_max_batch_size} ]
  max_queue_delay_microseconds: ${max_queue_delay_microseconds}
}
input [ { name: "ids" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true },
        { name: "len" data_type: TYPE_INT32 dims: [ 1 ] reshape: { shape: [ ] } } ]
output [ { name: "out" data_type: ${logits_datatype} dims: [ -1, -1 ] } ]
instance_group [ { count: ${instance_count} kind: KIND_CPU } ]
parameters { key: "engine_dir" value { string_value: "${engine_dir}" } }
parameters { key: "max_beam_width" value { string_value: "${max_beam_width}" } }
parameters: { key: "tokenizer" value: { string_value: "${tokenizer_dir}/tokenizer.json" } }
'''
FILLED = ["--set", "triton_max_batch_size=64", "--set", "decoupled_mode=false",
          "--set", "max_queue_delay_microseconds=100", "--set", "instance_count=2",
          "--set", "logits_datatype=TYPE_FP32"]


def _run(capsys, *args) -> tuple[int, list[dict], str]:
    code, out, err = cli(capsys, "validate", *args, "--format", "json")
    return code, json.loads(out)["diagnostics"], err


@pytest.fixture
def work(tmp_path: Path):
    with working_directory(tmp_path):
        yield tmp_path


def test_each_placeholder_is_one_error_and_the_rest_is_checked(work, capsys):
    # A real problem after the placeholders: CUDA graphs on the python backend (OPT50).
    Path("t.pbtxt").write_text(TEMPLATE + "optimization { cuda { graphs: true } }\n")
    code, found, _ = _run(capsys, "t.pbtxt")
    assert code == 1
    placeholders = [(d["line"], d["column"]) for d in found if d["code"] == "TXT11"]
    assert placeholders == [(3, 17), (4, 39), (6, 27), (7, 33), (11, 35), (12, 27)]
    # Nothing about the unset fields (no "max_batch_size is 0" for the batching fields); the
    # problem after them is found.
    assert {d["code"] for d in found} - {"TXT11", "TXT51", "TXT53", "REPO54"} == {"OPT50"}, found
    Path("t.pbtxt").write_text(TEMPLATE.replace("KIND_CPU", "KIND_CPU gpus: [ 0 ]"))
    code, found, _ = _run(capsys, "t.pbtxt")
    assert "IG03" in [d["code"] for d in found]


def test_parameters_left_as_placeholders_are_one_note(work, capsys):
    Path("t.pbtxt").write_text(TEMPLATE)
    _, found, _ = _run(capsys, "t.pbtxt", *FILLED)
    note = [d for d in found if d["code"] == "TXT53"]
    assert len(note) == 1 and note[0]["severity"] == "info" and note[0]["line"] == 13
    assert note[0]["message"].endswith("read as unset by TensorRT-LLM's models: engine_dir, max_beam_width")
    # A placeholder inside a longer string is still a warning.
    assert [(d["code"], d["line"]) for d in found if d["code"] == "TXT51"] == [("TXT51", 15)]


def test_set_fills_placeholders_and_keeps_positions(work, capsys):
    Path("t.pbtxt").write_text(TEMPLATE)
    code, found, err = _run(capsys, "t.pbtxt", *FILLED, "--set", "tokenizer_dir=/models/tok")
    assert code == 0 and err == "", found
    assert [d["code"] for d in found if d["severity"] != "info"] == []
    # A filled value that is wrong is reported at the placeholder in the original file.
    args = [a.replace("instance_count=2", "instance_count=-3") for a in FILLED]
    code, found, _ = _run(capsys, "t.pbtxt", *args)
    count = [d for d in found if d["code"] == "IG50"]
    assert code == 0 and [(d["line"], d["column"], d["end_column"]) for d in count] == [(12, 27, 44)]
    args = [a.replace("triton_max_batch_size=64", "triton_max_batch_size=-1") for a in FILLED]
    code, found, _ = _run(capsys, "t.pbtxt", *args)
    assert code == 1 and [(d["code"], d["line"], d["column"]) for d in found if d["code"] == "TOP03"] == \
        [("TOP03", 3, 17)]


def test_positions_after_a_fill_on_the_same_line(work, capsys):
    Path("t.pbtxt").write_text('backend: "python"\nmax_batch_size: ${n} input [ { name: "x" data_type: TYPE_FP32 '
                               'dims: [ 0 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n')
    code, found, _ = _run(capsys, "t.pbtxt", "--set", "n=123456")
    bad = [d for d in found if d["code"] == "IO04"]
    line = Path("t.pbtxt").read_text().splitlines()[1]
    assert code == 1 and [(d["line"], d["column"]) for d in bad] == [(2, line.index("[ 0") + 3)]


def test_set_usage(work, capsys):
    Path("t.pbtxt").write_text(TEMPLATE)
    code, _, err = cli(capsys, "validate", "t.pbtxt", "--set", "novalue")
    assert code == 2 and "NAME=VALUE" in err
    code, _, err = _run(capsys, "t.pbtxt", *FILLED, "--set", "unused_name=1")
    assert "--set unused_name: no ${unused_name} placeholder" in err


def test_set_in_a_repository(work, capsys):
    model = Path("repo/llm")
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    (model / "config.pbtxt").write_text(TEMPLATE)
    assert _run(capsys, "repo")[0] == 1
    code, found, _ = _run(capsys, "repo", *FILLED)
    assert code == 0, found


VALUE = st.text(alphabet=string.ascii_letters + string.digits + "-_./ ", max_size=12)


@given(st.fixed_dictionaries({}, optional={"a": VALUE, "long_name": VALUE,
                                          "b": st.integers(0, 10**9).map(str)}), st.integers(0, 40))
def test_positions_map_back_to_the_original_text(values, pad):
    """Whatever is filled in, every field's position points at the same place of the original."""
    text = ' ' * pad + 'name: "${a}"\nmax_batch_size: ${b}\nbackend: "$long_name"\nruntime: "x${a}y"\n'
    message = model_config_pb2().ModelConfig
    plain = textproto.parse(text, message, None)
    filled = textproto.parse(text, message, None, values)
    assert filled.filled == set(values) & {"a", "b", "long_name"}
    for key in (("name",), ("backend",), ("runtime",)):
        assert plain.sourcemap.entries[key] == filled.sourcemap.entries[key]
    assert plain.sourcemap.locate(("max_batch_size",), "key") == filled.sourcemap.locate(("max_batch_size",), "key")
    for diagnostic in filled.diagnostics:
        assert 1 <= diagnostic.span.line <= 4


def test_set_is_refused_with_fix(work, capsys):
    Path("t.pbtxt").write_text(TEMPLATE)
    before = Path("t.pbtxt").read_bytes()
    code, _, err = cli(capsys, "validate", "t.pbtxt", "--fix", *FILLED)
    assert code == 2 and "--set cannot be combined with --fix" in err
    assert Path("t.pbtxt").read_bytes() == before
