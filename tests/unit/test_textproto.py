"""The position-tracking parser accepts exactly what protobuf's text_format accepts."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from helpers.corpus_harness import cases
from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.schema import model_config_pb2

ModelConfig = model_config_pb2().ModelConfig

SAME_AS_PROTOBUF = [
    'name: "m" max_batch_size: 8',
    "max_batch_size: 0x10",
    "max_batch_size: 010",
    "input [ { name: 'a' data_type: TYPE_FP32 dims: [ 1, -1 ] }, { name: \"b\" data_type: 8 dims: 3 dims: 4 } ]",
    "input { name: \"a\" } input < name: \"b\" >; output: { name: \"c\" },",
    'output { name: "o" label_filename: "a" "b" }',
    'parameters { key: "k" value { string_value: "v\\n\\x41" } }',
    'parameters [ { key: "a", value: { string_value: "1" } }, { key: "b" value { string_value: "2" } } ]',
    "dynamic_batching { preferred_batch_size: [ ] max_queue_delay_microseconds: 18446744073709551615 }",
    "sequence_batching { direct { minimum_slot_utilization: 0.5 } control_input [ { name: \"S\" control "
    "[ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1e0 ] } ] } ] }",
    "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] passive: true } ]",
    "model_transaction_policy { decoupled: True }",
    "response_cache { enable: t }",
    "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 input_map { key: \"x\" value: \"y\" } } ] }",
    "# only a comment\n",
    "",
]

REJECTED_BY_BOTH = [
    ("max_batch: 8", "TXT02"),
    ('max_batch_size: "8"', "TXT03"),
    ("max_batch_size: 1.5", "TXT03"),
    ("max_batch_size: 2147483648", "TXT03"),
    ("dynamic_batching { max_queue_delay_microseconds: -5 }", "TXT03"),
    ("input { data_type: TYPE_FLOAT32 }", "TXT04"),
    ("input { data_type: FP32 }", "TXT04"),
    ('input { data_type: "TYPE_FP32" }', "TXT04"),
    ("dynamic_batching { } sequence_batching { }", "TXT05"),
    ("version_policy { latest { } all { } }", "TXT05"),
    ('name: "a" name: "b"', "TXT06"),
    ('parameters { key: "k" value: "v" }', "TXT03"),
    ("max_batch_size: ${mbs}", "TXT11"),
    ("input { name: \"a\"", "TXT01"),
    ("input { name: \"a\" ]", "TXT01"),
    ("}", "TXT01"),
    ("max_batch_size 8", "TXT01"),
    ('name: "unterminated', "TXT01"),
    ("name: [ \"a\" ]", "TXT03"),
]


@pytest.mark.parametrize("text", SAME_AS_PROTOBUF)
def test_accepts_what_protobuf_accepts(text):
    result = textproto.parse(text, ModelConfig)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    assert result.message == text_format.Parse(text, ModelConfig())


@pytest.mark.parametrize("text,code", REJECTED_BY_BOTH)
def test_rejects_what_protobuf_rejects(text, code):
    with pytest.raises(text_format.ParseError):
        text_format.Parse(text, ModelConfig())
    result = textproto.parse(text, ModelConfig)
    assert any(d.severity.value == "error" for d in result.diagnostics)
    assert code in {d.code for d in result.diagnostics}
    # An unfilled placeholder leaves its field unset and the rest to be checked (TXT11);
    # any other error stops the checks of this config.
    assert result.ok == (code == "TXT11")


@pytest.mark.parametrize("case", cases("valid") + cases("invalid"), ids=lambda c: c.id)
def test_corpus_agrees_with_protobuf(case):
    result = textproto.parse(case.text, ModelConfig)
    try:
        expected = text_format.Parse(case.text, ModelConfig())
    except text_format.ParseError:
        assert not result.ok
        return
    # protobuf accepts it: so must we, with the same message (warnings allowed)
    assert result.ok, [(d.code, str(d.span), d.message) for d in result.diagnostics]
    assert result.message == expected


def test_positions_point_at_values_and_names():
    text = 'name: "m"\ninput [\n  { name: "a" dims: [ 4, -1 ] }\n]\nparameters { key: "k" value { string_value: "v" } }\n'
    smap = textproto.parse(text, ModelConfig).sourcemap
    assert str(smap.locate(("input", 0, "dims", 1))) == "3:26"
    assert str(smap.locate(("input", 0, "name"), part="key")) == "3:5"
    assert str(smap.locate(("parameters", "k", "value", "string_value"))) == "5:45"
    # a field that was not written falls back to its enclosing block
    assert str(smap.locate(("input", 0, "data_type"))) == "3:3"


def test_unknown_field_suggests_the_right_name():
    result = textproto.parse('inputs [ { name: "x" datatype: TYPE_FP32 shape: [ 1 ] } ]', ModelConfig)
    (diag,) = result.diagnostics  # unknown top-level field: its block is skipped whole
    assert diag.code == "TXT02" and "did you mean 'input'" in diag.hint
    result = textproto.parse('input [ { name: "x" datatype: TYPE_FP32 shape: [ 1 ] } ]', ModelConfig)
    hints = {d.hint for d in result.diagnostics}
    assert "did you mean 'data_type'?" in hints and "did you mean 'dims'?" in hints


def test_enum_suggestions():
    for written, meant in [("FP32", "TYPE_FP32"), ("TYPE_FLOAT32", "TYPE_FP32"), ("TYPE_BYTES", "TYPE_STRING"),
                           ("type_fp16", "TYPE_FP16"), ("KIND_CUDA", "KIND_GPU")]:
        field = "kind" if meant.startswith("KIND") else "data_type"
        block = "instance_group" if field == "kind" else "input"
        result = textproto.parse(f"{block} {{ {field}: {written} }}", ModelConfig)
        assert result.diagnostics[0].hint == f"did you mean {meant}?", written


def test_unclosed_brace_points_at_the_opening_one():
    text = 'name: "m"\ninput {\n  name: "a"\n\noutput { name: "b" }\n'
    result = textproto.parse(text, ModelConfig)
    codes = [(d.code, str(d.span)) for d in result.diagnostics]
    assert ("TXT01", "2:7") in codes
    misplaced = next(d for d in result.diagnostics if d.code == "TXT02")
    assert "'{' opened at 2:7 missing its '}'" in misplaced.hint


def test_reports_every_problem_not_just_the_first():
    text = "max_batch: 1\nfoo: 2\ninput { data_type: FP32 }\n"
    result = textproto.parse(text, ModelConfig)
    assert [(d.code, str(d.span)) for d in result.diagnostics] == [
        ("TXT02", "1:1"), ("TXT02", "2:1"), ("TXT04", "3:20")]


def test_placeholder_in_string_is_a_warning_only():
    result = textproto.parse('name: "${model}"', ModelConfig)
    assert result.ok and [d.code for d in result.diagnostics] == ["TXT51"]


def test_duplicate_map_key_warns_and_last_wins():
    text = 'parameters { key: "k" value { string_value: "1" } }\nparameters { key: "k" value { string_value: "2" } }'
    result = textproto.parse(text, ModelConfig)
    assert result.ok and [d.code for d in result.diagnostics] == ["TXT52"]
    assert result.message.parameters["k"].string_value == "2"
