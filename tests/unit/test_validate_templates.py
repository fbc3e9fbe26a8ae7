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


# tensorrtllm_backend's all_models/bert templates write a string parameter's placeholder
# without quotes; tools/fill_template.py puts the value in as it is, so the filled config is
# no valid text format ("Expected string, got: /").
UNQUOTED = '''backend: "python"
max_batch_size: 8
parameters {
  key: "engine_dir"
  value: {
    string_value: ${engine_dir}
  }
}
input [ { name: "x" data_type: TYPE_FP32 dims: [ 0 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''


def test_an_unquoted_string_placeholder_says_to_quote_it(work, capsys):
    Path("t.pbtxt").write_text(UNQUOTED)
    _, found, _ = _run(capsys, "t.pbtxt")
    [placeholder] = [d for d in found if d["code"] == "TXT11"]
    assert (placeholder["line"], placeholder["column"]) == (6, 19)
    assert placeholder["hint"].startswith('quote it (string_value: "${engine_dir}")')
    code, found, _ = _run(capsys, "t.pbtxt", "--set", "engine_dir=/engines/bert")
    assert code == 1
    [filled] = [d for d in found if d["code"] == "TXT03"]
    assert filled["message"] == ("'string_value' needs a quoted string, but the template's ${engine_dir} is not in "
                                 "quotes and was filled with /engines/bert")
    assert (filled["line"], filled["column"], filled["end_column"]) == (6, 19, 32)
    assert filled["hint"].startswith('quote the placeholder in the template: string_value: "${engine_dir}"')
    # A quoted value fills it; then the rest of the file is checked (dims: [ 0 ] is IO04).
    code, found, _ = _run(capsys, "t.pbtxt", "--set", 'engine_dir="/engines/bert"')
    assert code == 1 and [d["code"] for d in found if d["severity"] == "error"] == ["IO04"]


def test_a_fill_that_is_no_value_of_its_field_is_named(work, capsys):
    Path("t.pbtxt").write_text(TEMPLATE)
    args = [a.replace("instance_count=2", "instance_count=2 3") for a in FILLED]
    code, found, _ = _run(capsys, "t.pbtxt", *args)
    bad = [(d["code"], d["line"], d["column"], d["message"]) for d in found if d["severity"] == "error"]
    assert code == 1 and bad == [("TXT03", 12, 27, "'count' cannot hold '2 3', the value ${instance_count} was "
                                                    "filled with")]
    # In a list, a fill may hold several items.
    text = 'backend: "python"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ ${d}, 4 ] } ]\n'
    filled = textproto.parse(text, model_config_pb2().ModelConfig, None, {"d": "1, 2"})
    assert filled.ok and list(filled.message.input[0].dims) == [1, 2, 4]


@given(st.text(alphabet=string.ascii_letters + string.digits + "-_./ :{}[]\"'#,", max_size=16))
def test_any_fill_of_an_unquoted_string_placeholder_is_reported_where_it_was(value):
    """Whatever is filled in, parsing never raises and every diagnostic lies in the original
    text; a fill that is one quoted string gives a string, anything else a TXT03 at the placeholder."""
    message = model_config_pb2().ModelConfig
    result = textproto.parse(UNQUOTED, message, None, {"engine_dir": value})
    lines = UNQUOTED.splitlines()
    for diagnostic in result.diagnostics:
        span = diagnostic.span
        assert 1 <= span.line <= len(lines) and 1 <= span.col <= len(lines[span.line - 1]) + 1
    at_placeholder = [d for d in result.diagnostics if (d.span.line, d.span.col) == (6, 19)]
    if result.ok:
        assert result.message.parameters["engine_dir"].string_value == textproto.c_unescape(value[1:-1]).decode()
    else:
        assert at_placeholder, result.diagnostics
