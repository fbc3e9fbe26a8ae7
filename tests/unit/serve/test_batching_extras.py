"""Ragged batching arithmetic, preserve_ordering and the response cache, each on its own: the
real scheduler with worker threads, the real cache, the real model manager."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf import text_format

from helpers.serve_models import write_add_sub
from tritonctl.repo_schema.diagnostics import Severity
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.validate import validate_paths
from tritonctl.serve.core.cache import (CacheConfigError, ResponseCache, parse_cache_config, request_key,
                                        response_bytes)
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.backends import registry
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.ragged import RaggedLayout, batch_input_value, scatter, scatter_shapes
from tritonctl.serve.core.scheduler import BatchingOptions, QueuePolicy
from tritonctl.serve.core.types import InferRequest, InferResponse, InferTensor, RequestedOutput

I32 = np.dtype(np.int32)


# ---- batch inputs and outputs (Triton's backend input collector / output responder) ----------
@pytest.mark.parametrize("kind, expected", [
    ("BATCH_ELEMENT_COUNT", [3, 5, 2]),
    ("BATCH_ACCUMULATED_ELEMENT_COUNT", [3, 8, 10]),
    ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", [0, 3, 8, 10]),
])
def test_element_counts_per_request(kind, expected):
    value = batch_input_value(kind, [(1, 3), (1, 5), (1, 2)], I32)
    assert value.dtype == I32 and value.tolist() == expected


def test_element_count_counts_the_batch_dimension_too():
    # A request of batch size 2 with 3 elements each holds 6 elements (GetElementCount of its shape).
    assert batch_input_value("BATCH_ELEMENT_COUNT", [(2, 3), (1, 4)], np.dtype(np.float32)).tolist() == [6.0, 4.0]


def test_max_element_count_is_carried_by_the_shape():
    value = batch_input_value("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", [(1, 3), (1, 5), (1, 2)], I32)
    assert value.shape == (5,)


def test_item_shape_is_one_row_per_batch_item_as_in_tritons_proto_example():
    # model_config.proto: a batch-2 input of shape [3, 1] and a batch-1 input of shape [2, 2]
    shapes = [(2, 3, 1), (1, 2, 2)]
    items = batch_input_value("BATCH_ITEM_SHAPE", shapes, I32)
    assert items.shape == (3, 2) and items.tolist() == [[3, 1], [3, 1], [2, 2]]
    flat = batch_input_value("BATCH_ITEM_SHAPE_FLATTEN", shapes, I32)
    assert flat.shape == (6,) and flat.tolist() == [3, 1, 3, 1, 2, 2]


def test_unknown_kind_and_mixed_ranks_are_refused():
    with pytest.raises(ServeError, match="unknown batch input kind"):
        batch_input_value("BATCH_SOMETHING", [(1, 2)], I32)
    with pytest.raises(ServeError, match="one rank"):
        batch_input_value("BATCH_ITEM_SHAPE", [(1, 2), (1, 2, 2)], I32)


def test_scatter_cuts_the_output_after_each_requests_input_shape():
    shapes = scatter_shapes((-1, -1), [(1, 3), (1, 5), (1, 2)], "OUT", "IN")
    assert shapes == [(1, 3), (1, 5), (1, 2)]
    pieces = scatter(np.arange(10, dtype=np.float32), shapes, "OUT", "m")
    assert [p.tolist() for p in pieces] == [[[0, 1, 2]], [[3, 4, 5, 6, 7]], [[8, 9]]]
    assert scatter_shapes((-1, 4), [(2, 7)], "OUT", "IN") == [(2, 4)]  # fixed dims stay


def test_scatter_errors_name_the_output():
    with pytest.raises(ServeError, match="batch output 'OUT' has a variable dimension 2"):
        scatter_shapes((-1, -1, -1), [(1, 3)], "OUT", "IN")
    with pytest.raises(ServeError, match="produced 4 elements for batch output 'OUT'"):
        scatter(np.zeros(4), [(1, 3), (1, 2)], "OUT", "m")


def parse_config(text: str):
    return text_format.Parse(text, model_config_pb2().ModelConfig())


def test_layout_reads_ragged_inputs_batch_inputs_and_outputs_from_the_config():
    config = parse_config('''
        name: "m" max_batch_size: 4
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true },
                { name: "FIXED" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
        batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "OFFSETS"
                        data_type: TYPE_FP32 source_input: "IN" } ]
        batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "IN" } ]''')
    layout = RaggedLayout(config)
    assert layout.inputs == {"IN"}
    batch = [InferRequest("m", {"IN": InferTensor("IN", "FP32", np.ones((1, n), np.float32))}) for n in (2, 4)]
    tensors = layout.batch_input_tensors(batch)
    assert tensors["OFFSETS"].dtype == np.float32 and tensors["OFFSETS"].tolist() == [0, 2, 6]
    assert layout.model_input([r.inputs["IN"].data for r in batch]).shape == (6,)
    assert [p.shape for p in layout.scatter("OUT", np.arange(6.0), batch)] == [(1, 2), (1, 4)]


# ---- the scheduler: ragged shape keys and preserve_ordering ----------------------------------
class SleepingInstance:
    """Runs each request of a batch by sleeping the seconds its input X holds; records batches."""

    def __init__(self):
        self.batches: list[list[str]] = []
        self.lock = threading.Lock()

    def run(self, _instance, batch: list[InferRequest]) -> None:
        with self.lock:
            self.batches.append([r.id for r in batch])
        time.sleep(max(float(r.inputs["X"].data.reshape(-1)[0]) for r in batch))
        for request in batch:
            request.finish(InferResponse("m", "1", request.id, []))


def request(request_id: str, width: int, order: list, done: threading.Event, expected: int,
            seconds: float = 0.0) -> InferRequest:
    data = np.full((1, width), seconds, np.float32)

    def complete(_response, error):
        order.append((request_id, error))
        if len(order) == expected:
            done.set()
    return InferRequest("m", {"X": InferTensor("X", "FP32", data)}, id=request_id, complete=complete)


@pytest.mark.parametrize("ragged, batches", [(frozenset({"X"}), 1), (frozenset(), 3)])
def test_ragged_inputs_batch_whatever_their_shapes(scheduler_factory, ragged, batches):
    instance = SleepingInstance()
    options = BatchingOptions(enabled=True, max_batch_size=8, preferred_sizes=(8,),
                              max_queue_delay_ns=100_000_000, ragged_inputs=ragged)
    scheduler = scheduler_factory(options, instance)
    order: list = []
    done = threading.Event()
    for i, width in enumerate((3, 5, 2)):
        scheduler.enqueue(request(str(i), width, order, done, 3))
    assert done.wait(5)
    assert len(instance.batches) == batches
    assert sorted(i for b in instance.batches for i in b) == ["0", "1", "2"]


@pytest.mark.parametrize("preserve", [True, False])
def test_preserve_ordering_holds_a_fast_batch_behind_a_slow_one(scheduler_factory, preserve):
    instance = SleepingInstance()
    options = BatchingOptions(enabled=True, max_batch_size=1, preferred_sizes=(1,), preserve_ordering=preserve)
    scheduler = scheduler_factory(options, instance, count=2)
    order: list = []
    done = threading.Event()
    scheduler.enqueue(request("slow", 1, order, done, 3, seconds=0.4))
    time.sleep(0.05)  # "slow" is running on the first instance
    scheduler.enqueue(request("fast", 1, order, done, 3))
    scheduler.enqueue(request("fast2", 1, order, done, 3))
    assert done.wait(5)
    finished = [request_id for request_id, _ in order]
    if preserve:
        assert finished == ["slow", "fast", "fast2"]
    else:
        assert finished == ["fast", "fast2", "slow"]  # the second instance overtook
    assert all(error is None for _, error in order)


def test_preserve_ordering_answers_requests_that_never_leave_the_queue_at_once(scheduler_factory):
    instance = SleepingInstance()
    options = BatchingOptions(enabled=True, max_batch_size=1, preferred_sizes=(1,), preserve_ordering=True,
                              default_policy=QueuePolicy(default_timeout_us=50_000))
    scheduler = scheduler_factory(options, instance, count=2)
    order: list = []
    done = threading.Event()
    scheduler.enqueue(request("slow", 1, order, done, 3, seconds=0.5))
    time.sleep(0.05)
    scheduler.enqueue(request("medium", 1, order, done, 3, seconds=0.2))
    time.sleep(0.05)  # both instances are busy; "late" times out in the queue
    scheduler.enqueue(request("late", 1, order, done, 3))
    assert done.wait(5)
    assert [r for r, _ in order] == ["late", "slow", "medium"]  # "medium" waited for "slow"
    assert order[0][1].message == "Request timeout expired"


# ---- the response cache --------------------------------------------------------------------
def cache_request(values, name: str = "INPUT0", datatype: str = "FP32", outputs=None) -> InferRequest:
    data = np.asarray(values)
    return InferRequest("m", {name: InferTensor(name, datatype, data)}, requested_outputs=outputs)


def test_key_covers_bytes_shape_datatype_model_version_and_requested_outputs():
    base = request_key("m", "1", cache_request(np.zeros((1, 4), np.float32)))
    assert base == request_key("m", "1", cache_request(np.zeros((1, 4), np.float32)))
    others = [
        request_key("m", "1", cache_request(np.ones((1, 4), np.float32))),
        request_key("m", "1", cache_request(np.zeros((2, 2), np.float32))),
        request_key("m", "1", cache_request(np.zeros((1, 4), np.int32), datatype="INT32")),
        request_key("m", "2", cache_request(np.zeros((1, 4), np.float32))),
        request_key("n", "1", cache_request(np.zeros((1, 4), np.float32))),
        request_key("m", "1", cache_request(np.zeros((1, 4), np.float32), name="INPUT1")),
        request_key("m", "1", cache_request(np.zeros((1, 4), np.float32), outputs=[RequestedOutput("OUTPUT0")])),
    ]
    assert base not in others and len(set(others)) == len(others)
    text = cache_request(np.array([[b"ab", b"c"]], dtype=object), datatype="BYTES")
    split = cache_request(np.array([[b"a", b"bc"]], dtype=object), datatype="BYTES")
    assert request_key("m", "1", text) != request_key("m", "1", split)


def outputs(value: float, width: int = 4) -> list[InferTensor]:
    return [InferTensor("OUTPUT0", "FP32", np.full((1, width), value, np.float32))]


def test_lru_evicts_the_least_recently_used_entry_at_the_byte_bound():
    cache = ResponseCache(3 * 16 + 8)  # room for three 16-byte entries
    for key in (b"a", b"b", b"c"):
        assert cache.insert(key, outputs(1.0))
    assert cache.used == 48 and response_bytes(outputs(1.0)) == 16
    assert cache.lookup(b"a") is not None  # "a" is now the most recently used
    assert cache.insert(b"d", outputs(2.0))
    assert cache.lookup(b"b") is None and len(cache) == 3 and cache.used == 48
    assert all(cache.lookup(k) is not None for k in (b"a", b"c", b"d"))
    assert not cache.insert(b"a", outputs(3.0))  # already there: not stored again, not a miss
    assert cache.insert(b"big", outputs(1.0, width=100))  # larger than the cache: never stored
    assert cache.lookup(b"big") is None and cache.used == 48


def test_stored_outputs_are_copies():
    cache = ResponseCache(1024)
    produced = outputs(1.0)
    cache.insert(b"k", produced)
    produced[0].data[:] = 7.0
    assert cache.lookup(b"k")[0].data.tolist() == [[1.0] * 4]


@pytest.mark.parametrize("values, size", [([], None), (["local,size=1048576"], 1048576),
                                          (["local,size=10", "local,size=2048"], 2048)])
def test_cache_config_is_parsed_as_tritonserver_does(values, size):
    assert parse_cache_config(values) == size


@pytest.mark.parametrize("value, message", [
    ("size=100", "No cache specified"),
    ("local,size", "option format is '<cache name>,<setting>=<value>'"),
    ("redis,host=localhost", "cache implementation 'redis' is not available"),
    ("local,bytes=10", "Failed to initialize LocalCache: config didn't contain a valid 'size' field"),
    ("local,size=ten", "whole number of bytes, got 'ten'"),
    ("local,size=0", "must be positive"),
])
def test_bad_cache_config_says_what_to_write(value, message):
    with pytest.raises(CacheConfigError, match=message):
        parse_cache_config([value])


def test_model_with_cache_on_a_server_without_one_loads_and_runs_uncached(tmp_path):
    write_add_sub(tmp_path, "cached", extra="response_cache { enable: true }")
    write_add_sub(tmp_path, "plain")
    without = ModelManager(tmp_path, registry())
    without.load_all()
    # served uncached, but its cache metrics are published (all 0), as Triton 2.51 does
    assert without.get("cached").response_cache is None and without.get("cached").stats.cache_enabled
    cache = ResponseCache(1 << 20)
    with_cache = ModelManager(tmp_path, registry(), response_cache=cache)
    with_cache.load_all()
    assert with_cache.get("cached").response_cache is cache and with_cache.get("cached").stats.cache_enabled
    assert with_cache.get("plain").response_cache is None and not with_cache.get("plain").stats.cache_enabled
    without.stop(5)
    with_cache.stop(5)


def test_serve_command_takes_cache_config_and_refuses_a_bad_one(tmp_path):
    def tritonctl(*args):
        return subprocess.run([sys.executable, "-m", "tritonctl", *args], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "COLUMNS": "200"})

    shown = tritonctl("serve", "--help")
    assert shown.returncode == 0 and "--cache-config" in shown.stdout and "local,size=BYTES" in shown.stdout
    refused = tritonctl("serve", str(tmp_path), "--cache-config", "local,size=0")
    assert refused.returncode == 2
    assert "--cache-config local,size= must be positive, got 0" in refused.stderr


RAGGED_ORT_CONFIG = """
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_FP32 source_input: "INPUT" } ]
output [ { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "SEEN" data_type: TYPE_FP32 dims: [ 1 ] } ]
batch_output [ { target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
dynamic_batching { }
"""


def ragged_model_dir(root: Path, input_shape: list) -> Path:
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["INPUT", "INPUT"], ["DOUBLED"]),
             helper.make_node("Unsqueeze", ["COUNT", "axis"], ["SEEN"])]
    graph = helper.make_graph(nodes, "ragged", [vi("INPUT", TensorProto.FLOAT, input_shape),
                                                vi("COUNT", TensorProto.FLOAT, ["n"])],
                              [vi("DOUBLED", TensorProto.FLOAT, input_shape), vi("SEEN", TensorProto.FLOAT, ["n", 1])],
                              initializer=[helper.make_tensor("axis", TensorProto.INT64, [1], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model_dir = root / "ragged"
    (model_dir / "1").mkdir(parents=True)
    onnx.save(model, str(model_dir / "1" / "model.onnx"))
    (model_dir / "config.pbtxt").write_text(RAGGED_ORT_CONFIG)
    return model_dir


def test_ragged_onnx_input_must_be_one_dimensional_and_batch_outputs_keep_their_own_shape(tmp_path):
    clean = validate_paths([ragged_model_dir(tmp_path / "a", ["total"])]).diagnostics
    assert [d for d in clean if d.severity is Severity.ERROR] == []
    wrong = validate_paths([ragged_model_dir(tmp_path / "b", ["batch", "n"])]).diagnostics
    errors = [d for d in wrong if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["ORT05"]
    assert "configuration expects model provides input with shape [-1]" in errors[0].message
