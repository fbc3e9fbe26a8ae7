"""Ragged batching, preserve_ordering and the response cache on a real server: real ONNX and
Python-backend models, the real tritonclient over HTTP and gRPC, statistics and metrics."""

from __future__ import annotations

import asyncio
import queue
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aiogrpcclient
import tritonclient.http as httpclient
from onnx import TensorProto as T
from onnx import helper

from helpers.serve_models import write_add_sub
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

RAGGED_CONFIG = """
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [
  { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "END" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "BEGIN0" data_type: TYPE_FP32
    source_input: "INPUT" },
  { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "MAXC" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE target_name: "ITEMS" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "ITEMS_FLAT" data_type: TYPE_INT32 source_input: "INPUT" }
]
output [
  { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUT_COUNT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUT_END" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUT_BEGIN" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "OUT_MAX" data_type: TYPE_INT64 dims: [ 1 ] },
  { name: "OUT_ITEMS" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "OUT_ITEMS_FLAT" data_type: TYPE_INT32 dims: [ 1 ] }
]
batch_output [ { target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 5000000 }  # the 3 requests sent together, however slow the machine
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def ragged_onnx(path: Path) -> None:
    """Per request: the sum of its elements (SUM) and its elements doubled (DOUBLED, scattered
    back); every batch input echoed as a [requests or items, 1] output so each request sees its own."""
    vi = helper.make_tensor_value_info
    inputs = [vi("INPUT", T.FLOAT, ["total"]), vi("COUNT", T.INT32, ["n"]), vi("END", T.INT32, ["n"]),
              vi("BEGIN0", T.FLOAT, ["n1"]), vi("MAXC", T.INT32, ["m"]), vi("ITEMS", T.INT32, ["items", 1]),
              vi("ITEMS_FLAT", T.INT32, ["items"])]
    outputs = [vi("SUM", T.FLOAT, ["n", 1]), vi("DOUBLED", T.FLOAT, ["total"]),
               vi("OUT_COUNT", T.INT32, ["n", 1]), vi("OUT_END", T.INT32, ["n", 1]),
               vi("OUT_BEGIN", T.FLOAT, ["n", 1]), vi("OUT_MAX", T.INT64, ["n", 1]),
               vi("OUT_ITEMS", T.INT32, ["items", 1]), vi("OUT_ITEMS_FLAT", T.INT32, ["items", 1])]

    def const(name, dtype, values, dims=None):
        return helper.make_tensor(name, dtype, [len(values)] if dims is None else dims, values)

    initializers = [const("zero", T.FLOAT, [0.0]), const("column", T.INT64, [-1, 1]), const("two", T.FLOAT, [2.0], []),
                    const("one", T.INT64, [1]), const("first", T.INT64, [0]), const("last", T.INT64, [-1])]
    node = helper.make_node
    nodes = [
        # SUM: a running sum with a leading 0, read at each request's end and start
        node("CumSum", ["INPUT", "first"], ["running"]),
        node("Concat", ["zero", "running"], ["padded"], axis=0),
        node("Sub", ["END", "COUNT"], ["start32"]),
        node("Cast", ["END"], ["end64"], to=T.INT64), node("Cast", ["start32"], ["start64"], to=T.INT64),
        node("Gather", ["padded", "end64"], ["upper"]), node("Gather", ["padded", "start64"], ["lower"]),
        node("Sub", ["upper", "lower"], ["sums"]), node("Reshape", ["sums", "column"], ["SUM"]),
        node("Mul", ["INPUT", "two"], ["DOUBLED"]),
        node("Reshape", ["COUNT", "column"], ["OUT_COUNT"]), node("Reshape", ["END", "column"], ["OUT_END"]),
        node("Slice", ["BEGIN0", "first", "last"], ["begins"]), node("Reshape", ["begins", "column"], ["OUT_BEGIN"]),
        node("Shape", ["COUNT"], ["requests"]), node("Concat", ["requests", "one"], ["per_request"], axis=0),
        node("Shape", ["MAXC"], ["max_shape"]), node("Expand", ["max_shape", "per_request"], ["OUT_MAX"]),
        node("Identity", ["ITEMS"], ["OUT_ITEMS"]), node("Reshape", ["ITEMS_FLAT", "column"], ["OUT_ITEMS_FLAT"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "ragged", inputs, outputs, initializer=initializers),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


RAGGED_PY_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "REQUESTS" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "SIZE" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 5000000 }  # the 3 requests sent together, however slow the machine
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
RAGGED_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            answers.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("REQUESTS", np.array([[len(requests)]], np.int32)),
                pb_utils.Tensor("SIZE", np.array([[x.size]], np.int32))]))
        return answers
'''
ORDERED_CONFIG = """
backend: "python"
max_batch_size: 1
input [ { name: "SECONDS" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "ECHO" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { preserve_ordering: true }
instance_group [ { kind: KIND_CPU count: 2 } ]
"""
ORDERED_PY = '''
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            time.sleep(float(seconds.reshape(-1)[0]))
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("ECHO", seconds)]))
        return answers
'''
STAGED_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 2, 6 ] }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
STAGED_PY = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        rows = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy().shape[0] for r in requests]
        time.sleep(0.6)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("BATCH", np.full([n, 1], sum(rows), np.int32))])
                for n in rows]
'''
LEVELS_PY = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.executions = 0

    def execute(self, requests):
        self.executions += 1
        rows = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy().shape[0] for r in requests]
        time.sleep(0.4)
        return [pb_utils.InferenceResponse([
            pb_utils.Tensor("BATCH", np.full([n, 1], sum(rows), np.int32)),
            pb_utils.Tensor("EXECUTION", np.full([n, 1], self.executions, np.int32))]) for n in rows]
'''
LEVELS_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "EXECUTION" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { %s }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
# level 2 (the default level, for priority 0) holds two requests; level 1 is unbounded
LEVEL_FULL = ("priority_levels: 2 default_priority_level: 2 "
              "priority_queue_policy { key: 2 value { max_queue_size: 2 } }")
ONE_LEVEL = "preferred_batch_size: [ 2, 6 ] priority_levels: 1 default_priority_level: 1"
CACHE_BYTES = 100  # three add_sub responses of 32 bytes (two FP32 [1, 4] outputs)


def write_python(repo: Path, name: str, config: str, source: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / "model.py").write_text(source)


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("extras") / "repo"
    ragged_onnx(repo / "ragged" / "1" / "model.onnx")
    (repo / "ragged" / "config.pbtxt").write_text(RAGGED_CONFIG)
    write_python(repo, "ragged_py", RAGGED_PY_CONFIG, RAGGED_PY)
    write_python(repo, "ordered", ORDERED_CONFIG, ORDERED_PY)
    write_python(repo, "staged", STAGED_CONFIG, STAGED_PY)
    write_python(repo, "level_full", LEVELS_CONFIG % LEVEL_FULL, LEVELS_PY)
    write_python(repo, "one_level", LEVELS_CONFIG % ONE_LEVEL, LEVELS_PY)
    write_add_sub(repo, "cached", extra="response_cache { enable: true }")
    write_add_sub(repo, "uncached")
    server = BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0,
                                           cache_config=[f"local,size={CACHE_BYTES}"], exit_timeout_secs=5,
                                           **transports))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def statistics(served, model: str) -> dict:
    return httpclient.InferenceServerClient(served.http_url).get_inference_statistics(model)["model_stats"][0]


def tensor(module, name: str, data: np.ndarray, datatype: str = "FP32"):
    infer_input = module.InferInput(name, list(data.shape), datatype)
    infer_input.set_data_from_numpy(data)
    return infer_input


def send_ragged_together(served, model: str, name: str, lengths: tuple[int, ...]) -> list:
    """One request per length, all in flight at once: the first and last over HTTP, the others
    over gRPC. Returns (input, result) per request, in the order of ``lengths``."""
    http = httpclient.InferenceServerClient(served.http_url, concurrency=len(lengths))
    grpc = grpcclient.InferenceServerClient(served.grpc_url)
    answers: queue.Queue = queue.Queue()
    pending = []
    for index, length in enumerate(lengths):
        data = np.arange(1, length + 1, dtype=np.float32).reshape(1, length) * (index + 1)
        if index in (0, len(lengths) - 1):
            pending.append((data, http.async_infer(model, [tensor(httpclient, name, data)])))
        else:
            grpc.async_infer(model, [tensor(grpcclient, name, data)],
                             lambda result, error, i=index: answers.put((i, result, error)))
            pending.append((data, None))
    from_grpc = {}
    for _ in range(len(lengths) - 2):
        index, result, error = answers.get(timeout=10)
        assert error is None, error
        from_grpc[index] = result
    return [(data, future.get_result() if future is not None else from_grpc[i])
            for i, (data, future) in enumerate(pending)]


def test_requests_of_different_lengths_share_one_execution_and_get_their_own_results(served):
    lengths = (3, 5, 2)
    results = send_ragged_together(served, "ragged", "INPUT", lengths)
    stats = statistics(served, "ragged")
    assert stats["execution_count"] == 1 and stats["inference_count"] == 3
    assert stats["batch_stats"][0]["batch_size"] == 3
    spans = []
    for (data, result), length in zip(results, lengths):
        assert result.as_numpy("SUM").tolist() == [[float(data.sum())]]
        doubled = result.as_numpy("DOUBLED")
        assert doubled.shape == (1, length) and np.array_equal(doubled, data * 2)  # scattered by input shape
        count, end = int(result.as_numpy("OUT_COUNT")[0, 0]), int(result.as_numpy("OUT_END")[0, 0])
        begin = float(result.as_numpy("OUT_BEGIN")[0, 0])
        assert count == length and begin == end - length  # WITH_ZERO starts where ACCUMULATED ended before
        assert result.as_numpy("OUT_MAX").tolist() == [[max(lengths)]]  # the shape of MAX_ELEMENT_COUNT_AS_SHAPE
        assert result.as_numpy("OUT_ITEMS").tolist() == [[length]]  # item shape without the batch dimension
        assert result.as_numpy("OUT_ITEMS_FLAT").tolist() == [[length]]
        spans.append((int(begin), end))
    assert sorted(spans)[0][0] == 0 and sorted(spans)[-1][1] == sum(lengths)
    assert all(a[1] == b[0] for a, b in zip(sorted(spans), sorted(spans)[1:]))  # the requests tile the batch


def test_python_model_gets_ragged_requests_in_one_execute(served):
    results = send_ragged_together(served, "ragged_py", "X", (4, 1, 6))
    assert [r.as_numpy("REQUESTS").tolist() for _, r in results] == [[[3]]] * 3
    assert [r.as_numpy("SIZE").tolist() for _, r in results] == [[[4]], [[1]], [[6]]]
    assert statistics(served, "ragged_py")["execution_count"] == 1


def test_preserve_ordering_delivers_in_queue_order_across_instances(served):
    async def run() -> list[int]:
        client = aiogrpcclient.InferenceServerClient(served.grpc_url)
        arrived: list[int] = []

        async def call(index: int, seconds: float) -> None:
            data = np.array([[seconds]], np.float32)
            result = await client.infer("ordered", [tensor(aiogrpcclient, "SECONDS", data)])
            assert np.array_equal(result.as_numpy("ECHO"), data)
            arrived.append(index)

        tasks = []
        for index, seconds in enumerate((0.8, 0.0, 0.0, 0.0)):  # the first is slow, on the first instance
            tasks.append(asyncio.ensure_future(call(index, seconds)))
            await asyncio.sleep(0.1)
        await asyncio.gather(*tasks)
        await client.close()
        return arrived

    assert asyncio.run(run()) == [0, 1, 2, 3]
    assert statistics(served, "ordered")["execution_count"] == 4


@pytest.mark.parametrize("rows,batches", [
    ((1, 1, 1, 1, 1, 1, 1), [1, 2, 2, 2, 2, 2, 2]),  # two batches wait per instance, each saturated at 2
    ((1, 3, 2, 2, 1), [1, 7, 7, 7, 1]),  # the waiting batch grows past the largest preferred size
])
def test_batches_formed_while_the_instance_is_busy_are_tritons(served, rows, batches):
    client = grpcclient.InferenceServerClient(served.grpc_url)
    answers = [queue.Queue() for _ in rows]
    for count, answer in zip(rows, answers):
        data = np.zeros((count, 1), np.float32)
        client.async_infer("staged", [tensor(grpcclient, "X", data)],
                           lambda result, error, answer=answer: answer.put((result, error)))
        time.sleep(0.03)
    seen = []
    for answer in answers:
        result, error = answer.get(timeout=20)
        assert error is None, error
        seen.append(int(result.as_numpy("BATCH")[0, 0]))
    assert seen == batches


def send_behind_a_blocker(served, model: str, sends: list[tuple[str, int, int]]) -> dict:
    """A batch of 8 rows, then, 0.1 s later while it runs, one request per (tag, rows, priority)
    in that order. Returns tag -> (execution, rows of the batch) or the refusal's message."""
    client = grpcclient.InferenceServerClient(served.grpc_url)
    answers: queue.Queue = queue.Queue()
    for index, (tag, rows, priority) in enumerate([("blocker", 8, 1)] + sends):
        data = np.zeros((rows, 1), np.float32)
        client.async_infer(model, [tensor(grpcclient, "X", data)], priority=priority, request_id=tag,
                           callback=lambda result, error, tag=tag: answers.put((tag, result, error)))
        time.sleep(0.1 if index == 0 else 0.02)
    seen = {}
    for _ in range(len(sends) + 1):
        tag, result, error = answers.get(timeout=20)
        seen[tag] = error.message() if error is not None else (
            int(result.as_numpy("EXECUTION")[0, 0]), int(result.as_numpy("BATCH")[0, 0]))
    first = seen["blocker"][0]
    return {tag: (a[0] - first, a[1]) if isinstance(a, tuple) else a for tag, a in seen.items()}


def test_a_full_priority_level_refuses_without_counting_a_failure(served):
    """Triton 2.51, observed with the same requests: c and e (priority 0: the default level 2)
    find level 2 full; d (level 1) joins a and b; no failure is counted for the refusals."""
    before = statistics(served, "level_full")
    seen = send_behind_a_blocker(served, "level_full",
                                 [("a", 1, 2), ("b", 1, 2), ("c", 1, 2), ("d", 1, 1), ("e", 1, 0)])
    assert seen == {"blocker": (0, 8), "a": (1, 3), "b": (1, 3), "d": (1, 3),
                    "c": "[request id: c] Exceeds maximum queue size",
                    "e": "[request id: e] Exceeds maximum queue size"}
    after = statistics(served, "level_full")
    assert after["execution_count"] - before["execution_count"] == 2
    assert after["inference_count"] - before["inference_count"] == 11
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 4
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] == 0
    assert {b["batch_size"]: b["compute_infer"]["count"] for b in after["batch_stats"]} == {3: 1, 8: 1}
    text = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_failure{model="level_full",reason="REJECTED",version="1"} 0' in text


def test_one_priority_level_stages_no_batches_while_the_instance_is_busy(served):
    """priority_levels 1 makes a priority queue, which Triton does not prefetch from: the seven
    requests queued behind a running batch leave as the largest preferred size, then the rest
    (the same preferred sizes without priority levels make 2, 2, 2, 1: the test above)."""
    seen = send_behind_a_blocker(served, "one_level", [(f"r{i}", 1, 0) for i in range(7)])
    assert seen == {"blocker": (0, 8), **{f"r{i}": (1, 6) for i in range(6)}, "r6": (2, 1)}


def add_sub_inputs(module, value: float) -> list:
    a = np.full((1, 4), value, np.float32)
    return [tensor(module, "INPUT0", a), tensor(module, "INPUT1", np.ones((1, 4), np.float32))]


def metric(served, name: str, model: str) -> float | None:
    text = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    prefix = f'{name}{{model="{model}",version="1"}} '
    values = [float(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix)]
    return values[0] if values else None


def test_repeated_request_is_a_cache_hit_and_different_bytes_a_miss(served):
    http = httpclient.InferenceServerClient(served.http_url)
    grpc = grpcclient.InferenceServerClient(served.grpc_url)
    first = http.infer("cached", add_sub_inputs(httpclient, 10.0))
    hit = grpc.infer("cached", add_sub_inputs(grpcclient, 10.0), request_id="again")
    assert hit.get_response().id == "again"
    for name, expected in (("OUTPUT0", 11.0), ("OUTPUT1", 9.0)):
        assert first.as_numpy(name).tolist() == hit.as_numpy(name).tolist() == [[expected] * 4]
    stats = statistics(served, "cached")
    inference = stats["inference_stats"]
    assert inference["cache_hit"]["count"] == 1 and inference["cache_miss"]["count"] == 1
    assert inference["success"]["count"] == 2 and stats["execution_count"] == 1 and stats["inference_count"] == 1
    assert inference["cache_hit"]["ns"] > 0 and inference["cache_miss"]["ns"] > 0
    other = http.infer("cached", add_sub_inputs(httpclient, 20.0))  # other bytes: a miss, the model runs
    assert other.as_numpy("OUTPUT0").tolist() == [[21.0] * 4]
    stats = statistics(served, "cached")
    assert stats["inference_stats"]["cache_miss"]["count"] == 2 and stats["execution_count"] == 2
    assert metric(served, "nv_cache_num_hits_per_model", "cached") == 1
    assert metric(served, "nv_cache_num_misses_per_model", "cached") == 2
    assert metric(served, "nv_cache_hit_duration_per_model", "cached") is not None
    assert metric(served, "nv_cache_miss_duration_per_model", "cached") is not None
    assert metric(served, "nv_inference_request_success", "cached") == 3
    assert metric(served, "nv_inference_exec_count", "cached") == 2


def test_least_recently_used_response_leaves_at_the_byte_bound(served):
    http = httpclient.InferenceServerClient(served.http_url)

    def executions_after(value: float) -> int:
        http.infer("cached", add_sub_inputs(httpclient, value))
        return statistics(served, "cached")["execution_count"]

    start = statistics(served, "cached")["execution_count"]
    assert [executions_after(v) for v in (101.0, 102.0, 103.0)] == [start + 1, start + 2, start + 3]  # cache full
    assert executions_after(101.0) == start + 3  # a hit; 101 is now the most recently used
    assert executions_after(104.0) == start + 4  # stored in place of 102, the least recently used
    assert executions_after(103.0) == start + 4  # still cached
    assert executions_after(102.0) == start + 5  # evicted: runs again (and now 101 leaves)
    assert executions_after(104.0) == start + 5


def test_model_without_response_cache_is_never_cached(served):
    http = httpclient.InferenceServerClient(served.http_url)
    for _ in range(2):
        http.infer("uncached", add_sub_inputs(httpclient, 5.0))
    stats = statistics(served, "uncached")
    assert stats["execution_count"] == 2
    assert stats["inference_stats"]["cache_hit"]["count"] == stats["inference_stats"]["cache_miss"]["count"] == 0
    assert metric(served, "nv_cache_num_hits_per_model", "uncached") is None  # no cache metrics for it
