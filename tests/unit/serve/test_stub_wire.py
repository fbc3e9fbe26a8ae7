"""The protocol between the server and a Python model's stub process: tensors of every datatype
cross unchanged (property-based), after their message on the socket or, when larger, in shared
memory; the reader's arrays are writable views (a file is gone at once), control messages keep
their framing, and a dead peer reads as None."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tritonctl.serve.stub import wire

NUMERIC = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, np.float32, np.float64]
PREFIX = f"tritonctl-test-{os.getpid()}-"


def numeric_arrays():
    return st.sampled_from(NUMERIC).flatmap(lambda dtype: hnp.arrays(
        dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
        elements=None if dtype not in (np.float16, np.float32, np.float64) else
        st.floats(allow_nan=False, width=np.dtype(dtype).itemsize * 8)))


def bytes_arrays():
    return hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4).flatmap(
        lambda shape: st.lists(st.binary(max_size=20), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
        .map(lambda items: np.array(items + [b""], dtype=object)[:-1].reshape(shape)))


def crossed(metas: list, where) -> list:
    """What the reader of a message gets: inline bytes go through a real socket pair."""
    left, right = socket.socketpair()
    try:
        wire.Channel(left).send({"op": "x", "shm": where})
        message = wire.Channel(right).receive()
    finally:
        left.close()
        right.close()
    assert isinstance(where, str) == isinstance(message["shm"], str)
    return wire.unpack(metas, message["shm"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(numeric_arrays(), bytes_arrays()), max_size=5), st.booleans())
def test_tensors_cross_unchanged(arrays, large):
    if large:  # past the inline limit: a shared-memory file
        arrays = arrays + [np.zeros(wire.INLINE_BYTES // 8 + 1, np.float64)]
    tensors = [(f"T{i}", array) for i, array in enumerate(arrays)]
    metas, where = wire.pack(tensors, PREFIX)
    assert isinstance(where, str) == large
    back = crossed(metas, where)
    assert not isinstance(where, str) or not os.path.exists(where)  # the reader unlinks the file at once
    assert [name for name, _ in back] == [name for name, _ in tensors]
    for (_, sent), (_, got) in zip(tensors, back):
        assert got.shape == sent.shape and got.dtype == sent.dtype
        assert got.tolist() == sent.tolist()


def test_text_elements_arrive_as_bytes_and_arrays_are_writable():
    metas, path = wire.pack([("S", np.array(["é", "b"], dtype=object)), ("F", np.arange(4, dtype=np.float32))],
                            PREFIX)
    (_, text), (_, floats) = crossed(metas, path)
    assert text.tolist() == ["é".encode(), b"b"]
    floats += 1  # the model may change its inputs in place
    assert floats.tolist() == [1, 2, 3, 4]
    big = np.arange(wire.INLINE_BYTES, dtype=np.int32)
    metas, path = wire.pack([("BIG", big)], PREFIX)
    (_, got), = crossed(metas, path)
    got += 1  # a copy-on-write mapping of the file
    assert np.array_equal(got, big + 1)


def test_bytes_elements_that_are_not_bytes_arrive_as_their_str():
    """As Triton writes BYTES (L0_parameters' model answers ints, floats and bools this way)."""
    metas, path = wire.pack([("V", np.array([1, 123.123, True, 1 << 40, "x"], dtype=object))], PREFIX)
    assert wire.unpack(metas, path)[0][1].tolist() == [b"1", b"123.123", b"True", str(1 << 40).encode(), b"x"]


def test_groups_share_one_layout():
    groups = [[("A", np.ones(3, np.int32))], None, [], [("B", np.zeros((2, 2), np.float64)), ("C", np.array([b"x"],
                                                                                                          object))]]
    metas, path = wire.pack_groups(groups, PREFIX)
    back = wire.unpack_groups(metas, path)
    assert back[1] is None and back[2] == []
    assert back[0][0][1].tolist() == [1, 1, 1] and back[3][1][1].tolist() == [b"x"]


def test_leftovers_of_an_instance_are_removed():
    _, path = wire.pack([("A", np.ones(wire.INLINE_BYTES))], PREFIX + "gone-")
    assert os.path.exists(path)
    wire.remove_leftovers(PREFIX + "gone-")
    assert not os.path.exists(path)


def test_messages_keep_their_framing_and_a_closed_peer_reads_none():
    left, right = socket.socketpair()
    sender, receiver = wire.Channel(left), wire.Channel(right)
    big = {"op": "x", "data": "y" * 3_000_000}
    writer = threading.Thread(target=lambda: (sender.send({"op": "a", "n": 1}), sender.send(big)))
    writer.start()  # the big one fills the socket's buffer: it is read meanwhile
    assert receiver.receive() == {"op": "a", "n": 1}
    assert receiver.receive() == big
    writer.join()
    sender.close()
    assert receiver.receive() is None


def test_the_stub_imports_only_the_standard_library_and_numpy():
    """What ``serve.stub.main`` loads, checked in a fresh interpreter: none of tritonctl's other
    dependencies (a model's EXECUTION_ENV_PATH Python need not have them)."""
    code = ("import sys\n"
            "from tritonctl.serve.stub import main\n"
            "main.pb_utils = main.load_pb_utils()\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'google', 'grpc', 'tritonclient', 'onnx', "
            "'onnxruntime', 'typer', 'uvicorn', 'starlette', 'torch', 'rich', 'click'})\n"
            "ours = sorted(m for m in sys.modules if m.startswith('tritonctl'))\n"
            "print(heavy, ours)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, ours = out.strip().split("] [")
    assert heavy == "["
    assert set(ours.rstrip("]").replace("'", "").split(", ")) == {
        "tritonctl", "tritonctl.serve", "tritonctl.serve.stub", "tritonctl.serve.stub.wire",
        "tritonctl.serve.stub.errors", "tritonctl.serve.stub.main", "tritonctl.repo_schema", "tritonctl.repo_schema.datatypes",
        "tritonctl.repo_schema.pb_config", "tritonctl.serve.stub.readiness", "tritonctl.serve.stub.dlpack",
        "tritonctl.optional"}
