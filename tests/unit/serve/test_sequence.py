"""The sequence batcher on its own: control tensors, implicit state values, options, and the real
scheduler with its worker threads running batches on a recording instance."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from helpers.sequence_models import STATE_CONFIG, state_onnx

from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.backend_api import BackendLoadError, InstanceSpec
from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend
from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.sequence import SequenceOptions, SequenceScheduler
from tritonctl.serve.core.sequence_state import SequenceControls, SequenceState, keep_states, read_states
from tritonctl.serve.core.stats import ModelStats
from tritonctl.serve.core.types import InferRequest, InferResponse, InferTensor

CONTROLS = """
control_input [
  { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
  { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
  { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ -1.5, 2.5 ] } ] },
  { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: %s } ] }
]
"""


def config(sequence: str = "", max_batch_size: int = 4, corrid: str = "TYPE_UINT64"):
    text = (f'name: "m" max_batch_size: {max_batch_size} input [ {{ name: "X" data_type: TYPE_INT32 dims: [ 1 ] }} ] '
            f"sequence_batching {{ {CONTROLS % corrid} {sequence} }}")
    return text_format.Parse(text, model_config_pb2().ModelConfig())


def values(tensors) -> dict:
    return {name: t.data.reshape(-1)[0] for name, t in tensors.items()}


# ---- controls and state ---------------------------------------------------------------------------
def test_controls_carry_each_kinds_false_and_true_values():
    controls = SequenceControls(config())
    start = controls.tensors(True, False, True, 42)
    assert values(start) == {"START": 1, "END": False, "READY": 2.5, "CORRID": 42}
    assert {n: (t.datatype, t.data.shape) for n, t in start.items()} == {
        "START": ("INT32", (1, 1)), "END": ("BOOL", (1, 1)), "READY": ("FP32", (1, 1)), "CORRID": ("UINT64", (1, 1))}
    assert values(controls.tensors(False, True, True, 42))["END"] == True  # noqa: E712 (a numpy bool)
    filler = values(controls.tensors(False, False, False, None))
    assert filler == {"START": 0, "END": False, "READY": -1.5, "CORRID": 0}
    assert SequenceControls(config(max_batch_size=0)).tensors(True, True, True, 7)["START"].data.shape == (1,)


def test_correlation_id_control_types():
    wide = 2 ** 64 - 1
    assert values(SequenceControls(config(corrid="TYPE_INT32")).tensors(True, False, True, wide))["CORRID"] == -1
    text = SequenceControls(config(corrid="TYPE_STRING"))
    assert values(text.tensors(True, False, True, "session-a"))["CORRID"] == b"session-a"
    assert values(text.tensors(True, False, True, 7))["CORRID"] == b"7"
    assert values(text.tensors(False, False, False, None))["CORRID"] == b""
    text.check_id("fine")
    SequenceControls(config()).check_id(7)
    with pytest.raises(ServeError) as caught:
        SequenceControls(config()).check_id("session-a")
    assert caught.value.status is Status.INVALID_ARG
    assert caught.value.message == ("sequence batching control 'CORRID' data-type is 'BYTES', but model 'm' "
                                    "expects 'UINT64'")
    with pytest.raises(ServeError) as caught:
        text.check_id(7)
    assert caught.value.message == ("sequence batching control 'CORRID' data-type is 'UINT64', but model 'm' "
                                    "expects 'BYTES'")


def test_control_without_values_is_a_load_error():
    broken = text_format.Parse('name: "m" sequence_batching { control_input [ { name: "S" control [ '
                               '{ kind: CONTROL_SEQUENCE_START } ] } ] }', model_config_pb2().ModelConfig())
    with pytest.raises(BackendLoadError, match="must specify either 'int32_false_true'"):
        SequenceControls(broken)


def state_config(state: str, max_batch_size: int = 4):
    return text_format.Parse(f'name: "m" max_batch_size: {max_batch_size} sequence_batching {{ state [ {state} ] }}',
                             model_config_pb2().ModelConfig())


def test_initial_states_zeros_files_and_strings(tmp_path: Path):
    (tmp_path / "initial_state").mkdir()
    np.array([7, 8], "<i4").tofile(tmp_path / "initial_state" / "two.bin")
    (tmp_path / "initial_state" / "text.bin").write_bytes(b"\x02\x00\x00\x00hi")
    specs = read_states(state_config(
        '{ input_name: "A" output_name: "A_OUT" data_type: TYPE_FP32 dims: [ -1, 3 ] },'
        '{ input_name: "B" output_name: "B_OUT" data_type: TYPE_INT32 dims: [ 2 ] initial_state { data_type: '
        'TYPE_INT32 dims: [ 2 ] data_file: "two.bin" name: "b" } },'
        '{ input_name: "C" output_name: "C_OUT" data_type: TYPE_STRING dims: [ 1 ] initial_state { data_type: '
        'TYPE_STRING dims: [ 1 ] data_file: "text.bin" name: "c" } }'), tmp_path)
    a, b, c = (s.initial for s in specs)
    assert a.shape == (1, 1, 3) and a.dtype == np.float32 and not a.any()  # a variable dim starts as 1
    assert b.tolist() == [[7, 8]] and b.dtype == np.int32
    assert c.tolist() == [[b"hi"]]
    unbatched = read_states(state_config('{ input_name: "A" output_name: "O" data_type: TYPE_INT64 dims: [ 2 ] }',
                                         max_batch_size=0), tmp_path)
    assert unbatched[0].initial.shape == (2,)


def test_short_initial_state_file_is_tritons_load_error(tmp_path: Path):
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "short.bin").write_bytes(b"\0" * 4)
    with pytest.raises(BackendLoadError) as caught:
        read_states(state_config('{ input_name: "S" output_name: "O" data_type: TYPE_INT32 dims: [ 2 ] initial_state {'
                                 ' data_type: TYPE_INT32 dims: [ 2 ] data_file: "short.bin" name: "s" } }'), tmp_path)
    assert str(caught.value) == "initial_state setting expects 8 bytes, but the data provided from short.bin" \
                                "only has 4 bytes."


def test_each_sequence_keeps_its_rows_of_the_state_output(tmp_path: Path):
    specs = read_states(state_config('{ input_name: "S" output_name: "S_OUT" data_type: TYPE_INT32 dims: [ 1 ] }'),
                        tmp_path)
    first, second = SequenceState(specs), SequenceState(specs)
    batch = [InferRequest("m", {}, state=first), InferRequest("m", {}, padding=True),
             InferRequest("m", {}, state=second)]
    keep_states(batch, {"S_OUT": np.array([[5], [6], [7]], np.int32)}, batching=True)
    assert first.values["S"].tolist() == [[5]] and second.values["S"].tolist() == [[7]]
    assert SequenceState.blank(specs, ((1, 1),)).values["S"].tolist() == [[0]]


def test_options_follow_tritons_defaults():
    direct = SequenceOptions.from_config(config("max_sequence_idle_microseconds: 0"))
    assert (direct.strategy, direct.slots_per_instance, direct.idle_ns) == ("direct", 4, 1_000_000_000)
    oldest = SequenceOptions.from_config(config("oldest { max_candidate_sequences: 7 preferred_batch_size: [ 4, 2 ] }"))
    assert (oldest.strategy, oldest.slots_per_instance, oldest.preferred_sizes) == ("oldest", 7, (2, 4))
    assert SequenceOptions.from_config(config(max_batch_size=0)).slots_per_instance == 1
    assert SequenceOptions.from_config(config("iterative_sequence: true")).iterative
    with pytest.raises(BackendLoadError, match="iterative sequences with the direct strategy"):
        SequenceOptions.from_config(config("iterative_sequence: true oldest { }"))


def test_onnxruntime_checks_controls_and_states_against_the_model(tmp_path: Path):
    state_onnx(tmp_path / "1" / "model.onnx")
    good = STATE_CONFIG.format(name="s", initial="", strategy="direct { }")

    def load(text: str):
        parsed = text_format.Parse(text, model_config_pb2().ModelConfig())
        return OnnxRuntimeBackend(parsed, tmp_path / "1", InstanceSpec("s_0", "KIND_CPU"))

    load(good).close()
    cases = {
        good.replace("control_input [", 'control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START '
                                        'int32_false_true: [ 0, 1 ] } ] },'):
            "configuration specified sequence control 'START', but model does not provide that input",
        good.replace("data_type: TYPE_UINT64 } ] } ]", "data_type: TYPE_INT64 } ] } ]"):
            "unable to load model 's', sequence control 'CORRID', the model expects data-type TYPE_UINT64 but the "
            "model configuration specifies data-type TYPE_INT64",
        good.replace('output_name: "STATE_OUT"', 'output_name: "NEXT_STATE"'):
            "unable to load model 's', configuration specified state output 'NEXT_STATE', but the model provides "
            "outputs ['CORRID_OUT', 'OUTPUT', 'STATE_OUT']",
    }
    for text, message in cases.items():
        with pytest.raises(BackendLoadError) as caught:
            load(text)
        assert str(caught.value) == message


# ---- the scheduler with real worker threads -------------------------------------------------------
class Recorder:
    """Runs a batch: records (sequence id or 'pad', X, READY) per row, answers each request."""

    def __init__(self):
        self.batches: list[list] = []
        self.gate = threading.Event()
        self.gate.set()

    def run(self, _instance, batch: list[InferRequest]) -> None:
        self.gate.wait(5)
        self.batches.append([("pad" if r.padding else r.sequence_id, int(r.inputs["X"].data.reshape(-1)[0]),
                              float(r.inputs["READY"].data.reshape(-1)[0])) for r in batch])
        for request in batch:
            request.finish(InferResponse("m", "1", request.id, []))


class Outcomes:
    def __init__(self):
        self.done: dict[str, ServeError | None] = {}
        self.cond = threading.Condition()

    def wait_for(self, count: int, timeout: float = 5) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.done) >= count, timeout)

    def request(self, cid, x: int, start: bool = False, end: bool = False, batch: int = 1) -> InferRequest:
        name = f"{cid}:{x}"

        def complete(_response, error):
            with self.cond:
                self.done[name] = error
                self.cond.notify_all()

        request = InferRequest("m", {"X": InferTensor("X", "INT32", np.full((batch, 1), x, np.int32))}, id=name,
                               sequence_id=cid, sequence_start=start, sequence_end=end, complete=complete)
        request.batch_size = batch
        return request


@pytest.fixture
def make_scheduler():
    made: list[SequenceScheduler] = []

    def make(sequence: str = "", max_batch_size: int = 4, instances: int = 1, recorder: Recorder | None = None):
        recorder = recorder or Recorder()
        scheduler = SequenceScheduler("m", config(sequence, max_batch_size), Path("."), [object()] * instances,
                                      recorder.run, ModelStats("m", "1"))
        made.append(scheduler)
        return scheduler, recorder

    yield make
    for scheduler in made:
        if not scheduler.stop(5):
            scheduler.fail_queued(ServeError(Status.UNAVAILABLE, "stopped"))


def test_direct_keeps_each_sequence_in_its_row_and_fills_idle_rows(make_scheduler):
    scheduler, recorder = make_scheduler()
    outcomes = Outcomes()
    steps = [(1, 10, True, False), (2, 20, True, False), (2, 21, False, False), (1, 11, False, True),
             (2, 22, False, True)]
    for count, (cid, x, start, end) in enumerate(steps, 1):
        scheduler.enqueue(outcomes.request(cid, x, start, end))
        assert outcomes.wait_for(count)
    assert recorder.batches == [[(1, 10, 2.5)], [("pad", 0, -1.5), (2, 20, 2.5)], [("pad", 0, -1.5), (2, 21, 2.5)],
                                [(1, 11, 2.5)], [("pad", 0, -1.5), (2, 22, 2.5)]]
    assert scheduler.stats.pending == 0


def test_ready_sequences_run_together(make_scheduler):
    scheduler, recorder = make_scheduler()
    recorder.gate.clear()
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(1, 10, start=True))
    time.sleep(0.05)  # 1:10 is running (held at the gate); the next requests queue behind it
    for request in (outcomes.request(1, 11, end=True), outcomes.request(2, 20, start=True, end=True),
                    outcomes.request(3, 30, start=True, end=True)):
        scheduler.enqueue(request)
    recorder.gate.set()
    assert outcomes.wait_for(4)
    assert recorder.batches == [[(1, 10, 2.5)], [(1, 11, 2.5), (2, 20, 2.5), (3, 30, 2.5)]]


def test_sequences_beyond_the_slots_wait_in_the_backlog(make_scheduler):
    scheduler, recorder = make_scheduler(max_batch_size=1)
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(101, 1, start=True))
    scheduler.enqueue(outcomes.request(102, 5, start=True))
    scheduler.enqueue(outcomes.request(102, 6, end=True))
    assert outcomes.wait_for(1)
    time.sleep(0.05)
    assert len(outcomes.done) == 1  # 102 has no slot while 101 holds the only one
    scheduler.enqueue(outcomes.request(101, 2, end=True))
    assert outcomes.wait_for(4)
    assert [b[0][:2] for b in recorder.batches] == [(101, 1), (101, 2), (102, 5), (102, 6)]


def test_idle_sequence_loses_its_slot(make_scheduler):
    scheduler, recorder = make_scheduler("max_sequence_idle_microseconds: 100000", max_batch_size=1)
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(7, 1, start=True))
    scheduler.enqueue(outcomes.request(8, 2, start=True, end=True))  # backlogged behind sequence 7
    assert outcomes.wait_for(2)  # 7 idled out and freed the slot for 8
    with pytest.raises(ServeError) as caught:
        scheduler.enqueue(outcomes.request(7, 3))
    assert caught.value.message == ("inference request for sequence 7 to model 'm' must specify the START flag on "
                                    "the first request of the sequence")
    assert [b[0][:2] for b in recorder.batches] == [(7, 1), (8, 2)]


def test_requests_refused_with_tritons_texts(make_scheduler):
    scheduler, _ = make_scheduler()
    outcomes = Outcomes()
    cases = [(outcomes.request(0, 1, start=True), "inference request to model 'm' must specify a non-zero or "
                                                  "non-empty correlation ID"),
             (outcomes.request("", 1, start=True), "inference request to model 'm' must specify a non-zero or "
                                                   "non-empty correlation ID"),
             (outcomes.request(5, 1, start=True, batch=2), "inference request to model 'm' must specify batch-size "
                                                          "1 due to requirements of sequence batcher"),
             (outcomes.request(37469245, 1), "inference request for sequence 37469245 to model 'm' must specify the "
                                             "START flag on the first request of the sequence")]
    for request, message in cases:
        with pytest.raises(ServeError) as caught:
            scheduler.enqueue(request)
        assert caught.value.status is Status.INVALID_ARG and caught.value.message == message


def test_cancelled_request_ends_its_sequence(make_scheduler):
    scheduler, recorder = make_scheduler()
    recorder.gate.clear()
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(1, 1, start=True))
    time.sleep(0.05)
    gone = outcomes.request(1, 2)
    scheduler.enqueue(gone)
    scheduler.enqueue(outcomes.request(1, 3))
    gone.cancelled = True
    recorder.gate.set()
    assert outcomes.wait_for(3)
    assert outcomes.done["1:2"].status is Status.CANCELLED and outcomes.done["1:3"].status is Status.CANCELLED
    assert recorder.batches == [[(1, 1, 2.5)]]
    assert scheduler.stats.failures == {"CANCELED": 2} and scheduler.stats.pending == 0
    with pytest.raises(ServeError, match="must specify the START flag"):
        scheduler.enqueue(outcomes.request(1, 4))


def test_minimum_slot_utilization_holds_the_batch_back(make_scheduler):
    scheduler, recorder = make_scheduler("direct { max_queue_delay_microseconds: 5000000 "
                                         "minimum_slot_utilization: 0.5 }")
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(1, 10, start=True, end=True))
    time.sleep(0.2)
    assert recorder.batches == []  # 1 of 4 slots ready: it waits for a second one (or 5 s)
    scheduler.enqueue(outcomes.request(2, 20, start=True, end=True))
    assert outcomes.wait_for(2)
    assert recorder.batches == [[(1, 10, 2.5), (2, 20, 2.5)]]


def test_oldest_batches_the_next_request_of_each_sequence(make_scheduler):
    scheduler, recorder = make_scheduler("oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] "
                                         "max_queue_delay_microseconds: 5000000 }")
    recorder.gate.clear()
    outcomes = Outcomes()
    for request in (outcomes.request(1, 10, start=True), outcomes.request(1, 11, end=True),
                    outcomes.request(2, 20, start=True), outcomes.request(2, 21, end=True)):
        scheduler.enqueue(request)
    recorder.gate.set()
    assert outcomes.wait_for(4)
    # One request per sequence is in the dynamic batcher at a time: 10 and 20 form the preferred
    # batch; 11 and 21 follow once their predecessors finished.
    assert recorder.batches == [[(1, 10, 2.5), (2, 20, 2.5)], [(1, 11, 2.5), (2, 21, 2.5)]]


def test_stop_runs_what_the_slots_hold_and_fails_the_backlog(make_scheduler):
    scheduler, recorder = make_scheduler(max_batch_size=1)
    recorder.gate.clear()
    outcomes = Outcomes()
    scheduler.enqueue(outcomes.request(1, 1, start=True))
    scheduler.enqueue(outcomes.request(1, 2))
    scheduler.enqueue(outcomes.request(2, 5, start=True))  # no slot: backlog
    recorder.gate.set()
    assert scheduler.stop(5) is False  # the backlog never got a slot
    scheduler.fail_queued(ServeError(Status.UNAVAILABLE, "model 'm' was unloaded"))
    assert outcomes.wait_for(3)
    assert outcomes.done["1:1"] is None and outcomes.done["1:2"] is None
    assert outcomes.done["2:5"].message == "model 'm' was unloaded"
    with pytest.raises(ServeError) as caught:
        scheduler.enqueue(outcomes.request(1, 3))
    assert caught.value.status is Status.UNAVAILABLE and "stopped accepting" in caught.value.message
