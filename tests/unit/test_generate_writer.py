"""The pbtxt writer: Triton's documented style, and a lossless round trip through
protobuf's text_format and through tritonctl's own parser."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor

from helpers.corpus_harness import CORPUS
from test_generate_autocomplete import fixture_model, make_onnx
from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.autocomplete import effective_config
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.writer import to_pbtxt


def ModelConfig():
    return model_config_pb2().ModelConfig()


def parse_text_format(text: str):
    message = ModelConfig()
    text_format.Parse(text, message)
    return message


def assert_round_trips(message) -> str:
    text = to_pbtxt(message)
    assert parse_text_format(text) == message, text
    ours = textproto.parse(text, model_config_pb2().ModelConfig)
    errors = [d.message for d in ours.diagnostics if d.severity.value == "error"]
    assert ours.ok and not errors, errors
    assert ours.message == message, text
    assert to_pbtxt(parse_text_format(text)) == text  # canonical: writing again changes nothing
    return text


def test_documented_style():
    config = parse_text_format('''
        name: "resnet" backend: "onnxruntime" max_batch_size: 8
        input { name: "x" data_type: TYPE_FP32 dims: 3 dims: 224 dims: 224 }
        output { name: "y" data_type: TYPE_FP32 dims: [1000] }
        dynamic_batching { preferred_batch_size: [4, 8] }
        instance_group { kind: KIND_CPU count: 2 }
        parameters { key: "intra_op_thread_count" value { string_value: "4" } }''')
    assert to_pbtxt(config, header="written by tritonctl generate") == '''\
# written by tritonctl generate
name: "resnet"
backend: "onnxruntime"
max_batch_size: 8
input [
  {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
}
instance_group [
  {
    kind: KIND_CPU
    count: 2
  }
]
parameters { key: "intra_op_thread_count" value { string_value: "4" } }
'''


def test_defaults_are_left_out_but_presence_is_kept():
    config = parse_text_format('''
        max_batch_size: 0 name: ""
        input { name: "s" data_type: TYPE_STRING dims: [1] reshape { } }
        dynamic_batching { }
        optimization { input_pinned_memory { enable: false } }
        response_cache { enable: false }
        version_policy { all { } }''')
    text = assert_round_trips(config)
    assert "max_batch_size" not in text and "name: \"\"" not in text
    assert "reshape { shape: [ ] }" in text
    assert "dynamic_batching { }" in text
    assert "input_pinned_memory { enable: false }" in text
    assert "version_policy {\n  all { }\n}" in text


def test_strings_are_escaped():
    config = ModelConfig()
    config.name = 'quote " backslash \\ newline \n tab \t bell \x07 unicode é'
    config.parameters["path with \"quotes\""].string_value = "${NOT_A_PLACEHOLDER}".replace("$", "")
    text = assert_round_trips(config)
    assert '\\"' in text and "\\n" in text and "é" in text and "\n" not in text.splitlines()[0]


def test_floats_keep_their_value():
    config = parse_text_format('''
        sequence_batching {
          direct { minimum_slot_utilization: 0.1 }
          control_input { name: "c" control { kind: CONTROL_SEQUENCE_READY fp32_false_true: [0, 1.5] } }
        }
        model_metrics { metric_control { metric_identifier { family: "f" }
                                         histogram_options { buckets: [1e-7, 0.3, 5, inf] } } }''')
    text = assert_round_trips(config)
    assert "minimum_slot_utilization: 0.1\n" in text
    assert "buckets: [ 1e-07, 0.3, 5.0, inf ]" in text


def test_long_map_values_get_their_own_block():
    config = parse_text_format('''
        dynamic_batching { priority_levels: 2 priority_queue_policy { key: 1 value {
          timeout_action: DELAY default_timeout_microseconds: 100000 allow_timeout_override: true max_queue_size: 8 } } }''')
    text = assert_round_trips(config)
    assert "  priority_queue_policy {\n    key: 1\n    value {\n      timeout_action: DELAY\n" in text


VALID_CORPUS = sorted((CORPUS / "valid").glob("*.pbtxt"))


@pytest.mark.parametrize("path", VALID_CORPUS, ids=lambda p: p.stem)
def test_every_valid_corpus_config_round_trips(path: Path):
    assert_round_trips(parse_text_format(path.read_text()))


def _random_value(fd, rng: random.Random):
    kind = fd.type
    if kind == FieldDescriptor.TYPE_ENUM:
        return rng.choice(fd.enum_type.values).number
    if kind == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind == FieldDescriptor.TYPE_STRING:
        return rng.choice(["x", "INPUT__0", "a b", 'q"u\\o', "é\n", "", "${v}", "8.6"])
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return rng.choice([0.0, 0.1, -2.5, 1e-9, 3.0e12, float("inf")])
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64):
        return rng.choice([0, 1, 7, 4294967295])
    return rng.choice([0, 1, -1, 16, 2147483647, -2147483648])


def _fill(message, rng: random.Random, depth: int = 0) -> None:
    """Set a random subset of fields, recursively, respecting oneofs."""
    for fd in message.DESCRIPTOR.fields:
        if rng.random() < 0.5 or depth > 4:
            continue
        if fd.containing_oneof is not None and message.WhichOneof(fd.containing_oneof.name):
            continue
        container = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            for _ in range(rng.randint(1, 2)):
                key = _random_value(fd.message_type.fields_by_name["key"], rng)
                if value_fd.type == FieldDescriptor.TYPE_MESSAGE:
                    _fill(container[key], rng, depth + 1)
                else:
                    container[key] = _random_value(value_fd, rng)
        elif fd.is_repeated and fd.type == FieldDescriptor.TYPE_MESSAGE:
            for _ in range(rng.randint(1, 2)):
                _fill(container.add(), rng, depth + 1)
        elif fd.is_repeated:
            container.extend(_random_value(fd, rng) for _ in range(rng.randint(1, 3)))
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            container.SetInParent()
            _fill(container, rng, depth + 1)
        else:
            setattr(message, fd.name, _random_value(fd, rng))


@pytest.mark.parametrize("seed", range(40))
def test_random_configs_round_trip(seed):
    config = ModelConfig()
    _fill(config, random.Random(seed))
    assert_round_trips(config)


def test_effective_configs_round_trip(tmp_path):
    from onnx import TensorProto

    config, _ = effective_config(fixture_model(tmp_path / "fixture"), gpus=[0, 1])
    assert_round_trips(config)
    make_onnx(tmp_path / "scalars" / "1" / "model.onnx",
              {"s": (TensorProto.STRING, ["n"]), "h": (TensorProto.FLOAT16, ["n", 2])},
              {"y": (TensorProto.FLOAT16, ["n", 2])})
    config, _ = effective_config(tmp_path / "scalars")
    text = assert_round_trips(config)
    assert "reshape { shape: [ ] }" in text
