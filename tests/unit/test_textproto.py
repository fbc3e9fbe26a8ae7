"""The position-tracking parser accepts exactly what protobuf's text_format accepts."""

from __future__ import annotations

import pytest
from google.protobuf import text_encoding, text_format
from hypothesis import given
from hypothesis import strategies as st

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


# Triton reads config.pbtxt with protobuf's C++ TextFormat. Where Python's text_format is
# laxer or stricter than it, the parser follows the C++ one.
REJECTED_BY_TRITON = [
    ('name: "a\\q"', "TXT01", "1:9"),  # an escape the C++ tokenizer does not know
    ('name: "a\\xZ"', "TXT01", "1:9"),
    ('name: "a\\u12"', "TXT01", "1:9"),
    ("max_batch_size: 09", "TXT01", "1:17"),  # a leading zero makes it octal
    ("dynamic_batching { max_queue_delay_microseconds: -0 }", "TXT03", "1:50"),  # no '-' before an unsigned
    ("sequence_batching { direct { minimum_slot_utilization: 010 } }", "TXT03", "1:56"),  # no octal float
]

ACCEPTED_BY_TRITON = [
    ("input { dims: [ - 1, -\n  # a comment\n 2 ] }", lambda m: list(m.input[0].dims) == [-1, -2]),
    ("dynamic_batching { priority_levels: 2 } instance_group { kind: - 0 }",
     lambda m: m.instance_group[0].kind == 0),
    ('name: "\\u00e9\\?\\ud83d\\ude00\\101"', lambda m: m.name == "\u00e9?\U0001F600A"),
]


@pytest.mark.parametrize("text,code,where", REJECTED_BY_TRITON)
def test_rejects_what_triton_rejects(text, code, where):
    result = textproto.parse(text, ModelConfig)
    assert not result.ok
    assert [(d.code, str(d.span)) for d in result.diagnostics] == [(code, where)]


@pytest.mark.parametrize("text,check", ACCEPTED_BY_TRITON)
def test_accepts_what_triton_accepts(text, check):
    result = textproto.parse(text, ModelConfig)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    assert check(result.message)


@pytest.mark.parametrize("text,where", [("input { dims: [ 4, ] }", "1:18"),
                                        ('input [ { name: "a" }, ]', "1:22")])
def test_a_trailing_comma_in_a_list_is_named(text, where):
    (diag,) = textproto.parse(text, ModelConfig).diagnostics
    assert (diag.code, str(diag.span)) == ("TXT01", where)
    assert "no trailing comma" in diag.hint


@given(st.text(max_size=30), st.booleans())
def test_strings_protobuf_writes_read_back_unchanged(value, as_utf8):
    escaped = text_encoding.CEscape(value, as_utf8=as_utf8)
    result = textproto.parse(f'name: "{escaped}"', ModelConfig)
    assert result.ok and result.message.name == value


@given(st.characters(codec="ascii"))
def test_an_escape_is_refused_exactly_when_protobuf_knows_no_such_escape(char):
    body = "\\" + char + "0041"
    known = char in "abfnrtv\\?'\"01234567u" or char in "xX"
    try:
        textproto.c_unescape(body)
    except textproto.BadEscape:
        assert not known
    else:
        assert known


def test_a_map_entry_without_a_key_gets_the_default_key_as_in_protobuf():
    text = ("parameters: {}\nmetric_tags: {}\ncc_model_filenames { value: \"a.plan\" }\n"
            "dynamic_batching { priority_queue_policy: {} }\n")
    result = textproto.parse(text, ModelConfig)
    assert result.ok and result.message == text_format.Parse(text, ModelConfig())
    assert [(d.code, d.severity.value, str(d.span)) for d in result.diagnostics] == [
        ("TXT07", "warning", "1:13"), ("TXT07", "warning", "2:14"), ("TXT07", "warning", "3:20"),
        ("TXT07", "warning", "4:43")]
