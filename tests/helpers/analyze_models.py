"""Model directories for the analyze tests, made in code (onnx.helper): tiny, so loads are instant."""

from __future__ import annotations

from pathlib import Path

from helpers.serve_models import add_sub_onnx, write_add_sub

# Short windows with a wide stability band: these tests are about what analyze does with its
# measurements, not about their precision (the 100 ms windows of a tiny model hold hundreds of
# requests). FAST for AnalyzeOptions, FAST_ARGS for the command line.
FAST = {"measurement_interval_ms": 100.0, "stability_percentage": 50.0, "max_trials": 4}
FAST_ARGS = ["-p", "100", "-s", "50", "-r", "4"]


def onnx_model(repo: Path, name: str = "add_sub", config: str | None = "") -> Path:
    """An add/sub ONNX model ([batch, 4] inputs); ``config`` None leaves out config.pbtxt (auto-complete),
    "" writes the usual one (max_batch_size 8, one CPU instance, no dynamic batching)."""
    if config is None:
        model_dir = repo / name
        add_sub_onnx(model_dir / "1" / "model.onnx")
        return model_dir
    return write_add_sub(repo, name, extra=config)


ADD_SUB_ENSEMBLE = """name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "IN0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "IN1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{ step [ {{
  model_name: "{step}" model_version: -1
  input_map {{ key: "INPUT0" value: "IN0" }} input_map {{ key: "INPUT1" value: "IN1" }}
  output_map {{ key: "OUTPUT0" value: "OUT" }}
}} ] }}
"""


def add_sub_ensemble(repo: Path, name: str, step: str) -> Path:
    """An ensemble ``name`` (max_batch_size 8) whose one step is the add/sub model ``step``."""
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(ADD_SUB_ENSEMBLE.format(name=name, step=step))
    return model_dir


def fixed_batch_model(repo: Path, name: str = "fixed") -> Path:
    """A model without a batch dimension (max_batch_size 0): only instances can be tuned."""
    model_dir = repo / name
    add_sub_onnx(model_dir / "1" / "model.onnx", batch=False)
    return model_dir


MLP_CONFIG = """name: "mlp"
backend: "onnxruntime"
max_batch_size: 32
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def mlp_model(repo: Path, name: str = "mlp") -> Path:
    """The 256-1024-1024-256 MLP (Gemm+Relu, Gemm+Relu, Gemm; seeded random weights) with one CPU
    instance and no dynamic batcher: every request runs alone, though batching pays about 4x here."""
    import numpy as np
    from onnx import TensorProto, checker, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    dims = [256, 1024, 1024, 256]
    weights, nodes, x = [], [], "INPUT0"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        weights += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"W{i}"),
                    numpy_helper.from_array((rng.standard_normal(b) * 0.01).astype(np.float32), f"B{i}")]
        last = i == len(dims) - 2
        gemm = "OUTPUT0" if last else f"g{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], [gemm]))
        if not last:
            nodes.append(helper.make_node("Relu", [gemm], [f"h{i}"]))
            x = f"h{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 256])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 256])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    checker.check_model(model)
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    save(model, str(model_dir / "1" / "model.onnx"))
    (model_dir / "config.pbtxt").write_text(MLP_CONFIG.replace('"mlp"', f'"{name}"'))
    return model_dir


PIPE_ENSEMBLE = """name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ 256 ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "pre" model_version: -1 input_map {{ key: "INPUT0" value: "INPUT" }}
     output_map {{ key: "OUTPUT0" value: "hidden" }} }},
  {{ model_name: "post" model_version: -1 input_map {{ key: "INPUT0" value: "hidden" }}
     output_map {{ key: "OUTPUT0" value: "OUTPUT" }} }}
] }}
"""

PIPE_BLS_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "bls_composing_models" value: { string_value: "pre,post" } }
"""

# pre, then post, each called with the request's whole batch.
PIPE_BLS = '''
import triton_python_backend_utils as pb_utils


def call(model, array):
    request = pb_utils.InferenceRequest(model_name=model, inputs=[pb_utils.Tensor("INPUT0", array)],
                                        requested_output_names=["OUTPUT0"])
    response = request.exec()
    if response.has_error():
        raise pb_utils.TritonModelException(response.error().message())
    return pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            hidden = call("pre", pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy())
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", call("post", hidden))]))
        return responses
'''


def pipeline_repository(repo: Path) -> Path:
    """Two steps, ``pre`` and ``post`` (the 256-1024-1024-256 MLP, max_batch_size 8, one CPU
    instance, no dynamic batcher), an ensemble ``pipe`` (max_batch_size 8) running pre then post,
    and ``bls``, a Python model that calls pre then post through BLS (its config names them)."""
    for name in ("pre", "post"):
        mlp_model(repo, name)
        config = repo / name / "config.pbtxt"
        config.write_text(config.read_text().replace("max_batch_size: 32", "max_batch_size: 8"))
    (repo / "pipe" / "1").mkdir(parents=True)
    (repo / "pipe" / "config.pbtxt").write_text(PIPE_ENSEMBLE.format(name="pipe"))
    (repo / "bls" / "1").mkdir(parents=True)
    (repo / "bls" / "1" / "model.py").write_text(PIPE_BLS)
    (repo / "bls" / "config.pbtxt").write_text(PIPE_BLS_CONFIG.replace("{name}", "bls"))
    return repo
