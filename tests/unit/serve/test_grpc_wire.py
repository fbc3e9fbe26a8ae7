"""The gRPC wire helpers that take tensor bytes out of a ModelInferRequest and write them into a
ModelInferResponse without protobuf's copies: what protobuf reads back is what was sent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from tritonctl.serve.grpc.wire import join_response, split_request

names = st.text(max_size=12)
blobs = st.binary(max_size=600)


@st.composite
def requests(draw) -> service_pb2.ModelInferRequest:
    message = service_pb2.ModelInferRequest(model_name=draw(names), model_version=draw(names), id=draw(names))
    for key, value in draw(st.dictionaries(names, st.integers(-2**63, 2**63 - 1), max_size=3)).items():
        message.parameters[key].int64_param = value
    for _ in range(draw(st.integers(0, 3))):
        message.inputs.add(name=draw(names), datatype="UINT8", shape=draw(st.lists(st.integers(0, 2**40), max_size=3)))
    for _ in range(draw(st.integers(0, 2))):
        message.outputs.add(name=draw(names))
    message.raw_input_contents.extend(draw(st.lists(blobs, max_size=4)))
    return message


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(requests())
def test_split_request_takes_out_exactly_the_raw_contents(message):
    payload = message.SerializeToString()
    rest, raw = split_request(payload)
    assert [bytes(view) for view in raw] == list(message.raw_input_contents)
    without = service_pb2.ModelInferRequest()
    without.CopyFrom(message)
    del without.raw_input_contents[:]
    assert service_pb2.ModelInferRequest.FromString(rest) == without
    if raw:  # views of the received bytes, not copies
        assert all(view.obj is payload for view in raw)


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(st.binary(max_size=200))
def test_split_request_never_raises_on_garbage(payload):
    result = split_request(payload)
    assert result is None or isinstance(result[1], list)


def test_a_truncated_message_is_left_to_protobuf():
    payload = service_pb2.ModelInferRequest(model_name="m", raw_input_contents=[b"x" * 100]).SerializeToString()
    assert split_request(payload[:-1]) is None


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(names, st.lists(blobs, max_size=4))
def test_join_response_reads_back_as_the_message_with_its_raw_contents(name, raw):
    message = service_pb2.ModelInferResponse(model_name=name, model_version="1")
    message.outputs.add(name="OUT", datatype="UINT8", shape=[1])
    joined = service_pb2.ModelInferResponse.FromString(join_response(message.SerializeToString(),
                                                                     [memoryview(b) for b in raw]))
    expected = service_pb2.ModelInferResponse()
    expected.CopyFrom(message)
    expected.raw_output_contents.extend(raw)
    assert joined == expected
