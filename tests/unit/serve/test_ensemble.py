"""Ensembles as a dataflow over the composing models' own schedulers, with real onnxruntime and
Python-backend steps."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers.serve_models import loaded_server, write_add_sub
from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.backends import registry
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.types import InferRequest, InferTensor, RequestedOutput

# A Python model without batching: Y = X * 10, and an error for a negative first element.
SCALE = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x.flat[0] < 0:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            else:
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 10)]))
        return out
"""
SCALE_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1, 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1, 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    maps = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += " " + " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1 {maps} }}'


def write_ensemble(repo: Path, name: str, inputs: list[str], outputs: list[str], steps: list[str]) -> None:
    (repo / name / "1").mkdir(parents=True)
    tensors = lambda names: ", ".join(f'{{ name: "{n}" data_type: TYPE_FP32 dims: [ 4 ] }}' for n in names)  # noqa: E731
    (repo / name / "config.pbtxt").write_text(
        f'platform: "ensemble"\nmax_batch_size: 8\ninput [ {tensors(inputs)} ]\noutput [ {tensors(outputs)} ]\n'
        f'ensemble_scheduling {{ step [ {", ".join(steps)} ] }}\n')


@pytest.fixture
def server(tmp_path):
    repo = tmp_path / "repo"
    write_add_sub(repo, extra="dynamic_batching { max_queue_delay_microseconds: 300000 preferred_batch_size: [ 4 ] }")
    (repo / "scale" / "1").mkdir(parents=True)
    (repo / "scale" / "1" / "model.py").write_text(textwrap.dedent(SCALE))
    (repo / "scale" / "config.pbtxt").write_text(SCALE_CONFIG)
    # SUM = A + B, DIFF = A - B, then SCALED = (A + B) * 10 and TWICE = DIFF + DIFF, in parallel
    write_ensemble(repo, "pipeline", ["A", "B"], ["SUM", "SCALED", "TWICE"], [
        step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "SUM", "OUTPUT1": "DIFF"}),
        step("scale", {"X": "SUM"}, {"Y": "SCALED"}),
        step("add_sub", {"INPUT0": "DIFF", "INPUT1": "DIFF"}, {"OUTPUT0": "TWICE"})])
    # an ensemble whose step is another ensemble (loaded after it, whatever the name order)
    write_ensemble(repo, "a_outer", ["P", "Q"], ["R"], [
        step("pipeline", {"A": "P", "B": "Q"}, {"SCALED": "R"})])
    with loaded_server(repo) as server:
        yield server


def submit(server, model: str, inputs: dict[str, np.ndarray], outputs: list[str] | None = None):
    done, box = threading.Event(), {}

    def complete(response, error):
        box.update(response=response, error=error)
        done.set()

    requested = None if outputs is None else [RequestedOutput(n) for n in outputs]
    server.submit(InferRequest(model, {n: InferTensor(n, "FP32", a) for n, a in inputs.items()},
                               requested_outputs=requested, complete=complete))
    return done, box


def result(done, box) -> dict[str, np.ndarray]:
    assert done.wait(5)
    if box["error"] is not None:
        raise box["error"]
    return {t.name: t.data for t in box["response"].outputs}


def test_steps_run_as_a_dataflow_and_only_requested_outputs_return(server):
    assert {r["name"]: r["state"] for r in server.manager.index()} == {
        "a_outer": "READY", "add_sub": "READY", "pipeline": "READY", "scale": "READY"}
    a = np.array([[1, 2, 3, 4]], np.float32)
    b = np.ones((1, 4), np.float32)
    out = result(*submit(server, "pipeline", {"A": a, "B": b}))
    assert list(out) == ["SUM", "SCALED", "TWICE"]
    assert out["SUM"].tolist() == (a + b).tolist() and out["SCALED"].tolist() == ((a + b) * 10).tolist()
    assert out["TWICE"].tolist() == (2 * (a - b)).tolist()
    only = result(*submit(server, "pipeline", {"A": a, "B": b}, ["TWICE"]))
    assert list(only) == ["TWICE"]
    nested = result(*submit(server, "a_outer", {"P": a, "Q": b}))
    assert nested["R"].tolist() == ((a + b) * 10).tolist()
    assert server.model_metadata("pipeline")["platform"] == "ensemble"


@pytest.mark.parametrize("outputs", [["TWICE"], ["SCALED"], ["SUM"]])
def test_requests_tritons_pruning_would_starve_are_answered_with_a_warning(server, outputs, caplog):
    """Triton prunes the step making SUM and DIFF when SUM is an ensemble output left out, though
    a step consumes it, and answers with its deadlock error; here the request is answered and the
    log says what Triton would do."""
    a = np.ones((1, 4), np.float32)
    assert list(result(*submit(server, "pipeline", {"A": a, "B": a}, outputs))) == outputs
    warnings = [r.getMessage() for r in caplog.records if "unexpected deadlock" in r.getMessage()]
    assert len(warnings) == 1 and f"a request for {outputs[0]} runs here, but Triton answers it" in warnings[0]
    caplog.clear()
    result(*submit(server, "pipeline", {"A": a, "B": a}, outputs))
    assert not [r for r in caplog.records if "unexpected deadlock" in r.getMessage()]  # once per set of outputs


def test_requests_tritons_pruning_serves_too_log_nothing(server, caplog):
    a = np.ones((1, 4), np.float32)
    result(*submit(server, "pipeline", {"A": a, "B": a}, ["SUM", "TWICE"]))
    result(*submit(server, "pipeline", {"A": a, "B": a}))
    assert not [r for r in caplog.records if "unexpected deadlock" in r.getMessage()]


def test_ensemble_traffic_is_batched_by_the_composing_models_batcher(server):
    rows = [np.full((1, 4), i, np.float32) for i in range(4)]
    pending = [submit(server, "pipeline", {"A": r, "B": r}, ["SUM", "TWICE"]) for r in rows]
    for row, (done, box) in zip(rows, pending):
        out = result(done, box)
        assert out["SUM"].tolist() == (row * 2).tolist() and out["TWICE"].tolist() == [[0.0] * 4]
    stats = server.statistics("add_sub")["model_stats"][0]
    # both add_sub steps of the four requests: 8 inferences in 2 batches of 4
    assert stats["inference_count"] == 8 and stats["execution_count"] == 2
    ensemble = server.statistics("pipeline")["model_stats"][0]["inference_stats"]
    assert ensemble["success"]["count"] == 4


def test_a_failing_step_fails_the_request_with_the_steps_error(server):
    a = np.array([[-5, 0, 0, 0]], np.float32)
    with pytest.raises(ServeError) as raised:
        result(*submit(server, "pipeline", {"A": a, "B": np.zeros((1, 4), np.float32)}))
    assert raised.value.status is Status.INTERNAL
    assert raised.value.message == "in ensemble 'pipeline', negative input"
    stats = server.statistics("pipeline")["model_stats"][0]["inference_stats"]
    # Triton 2.51 counts a failed ensemble request once when it answers the error and once more when it
    # releases the request, which it never does while a step runs: TWICE still waits in add_sub's batcher
    assert stats["fail"]["count"] == 1
    with pytest.raises(ServeError) as raised:  # checked against the ensemble's own config first
        submit(server, "pipeline", {"A": np.zeros((1, 3), np.float32), "B": np.zeros((1, 3), np.float32)})
    assert "unexpected shape for input 'A' for model 'pipeline'. Expected [-1,4], got [1,3]. " in raised.value.message


def test_an_ensemble_whose_step_model_is_missing_does_not_load(tmp_path):
    repo = tmp_path / "repo"
    write_ensemble(repo, "orphan", ["A"], ["B"], [step("absent", {"X": "A"}, {"Y": "B"})])
    manager = ModelManager(repo, registry())
    manager.load_all()
    (row,) = manager.index()
    assert row["state"] == "UNAVAILABLE" and "absent" in row["reason"]


def test_poll_loads_a_new_ensemble_after_its_new_step_model(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    manager = ModelManager(repo, registry(), control_mode="poll")
    manager.load_all()
    write_add_sub(repo, "z_add_sub")
    write_ensemble(repo, "a_sum", ["A", "B"], ["S"], [
        step("z_add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "S"})])
    manager.poll()
    try:
        assert {r["name"]: r["state"] for r in manager.index()} == {"a_sum": "READY", "z_add_sub": "READY"}
    finally:
        manager.stop(5)
