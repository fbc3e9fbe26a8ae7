"""The ONNX models the onnx package ships with its backend test data (onnx/backend/test/data:
`simple`, `pytorch-converted`, `pytorch-operator`, each with inputs and expected outputs),
taken through what a user does with a model file: `generate` writes its repository entry,
`validate` checks it, `serve` answers it over HTTP and gRPC.

- validate reports ORT06/ORT07 for exactly the models a real onnxruntime session refuses to
  load for want of an implementation (operator versions older than opset 7 that it lacks, and
  operator domains it does not implement);
- every other model serves, and its outputs over both protocols are the test data's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import numpy_helper
from tritonclient.utils import np_to_triton_dtype

from tritonctl.repo_schema.generate import config_from_model_file, write_model_entry
from tritonctl.repo_schema.validate import validate_paths
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

ort = pytest.importorskip("onnxruntime")

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
MODELS = sorted(p.parent for kind in ("simple", "pytorch-converted", "pytorch-operator")
                for p in (DATA / kind).glob("*/model.onnx"))
# What onnxruntime says when it has no kernel for a node; other load failures (a missing locale
# for StringNormalizer) depend on the machine, not on the model.
NOT_IMPLEMENTED = ("NOT_IMPLEMENTED", "is not a registered function/op")

pytestmark = pytest.mark.skipif(not MODELS, reason=f"the onnx package ships no test models at {DATA}")


def _onnxruntime_refusal(model_dir: Path) -> str | None:
    """Why onnxruntime, in this process, cannot load the model or run its first test case; None
    when it can. Some kernels fail only when they run (an older onnxruntime's StringNormalizer
    without the en_US.UTF-8 locale on the machine)."""
    try:
        session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
        session.run(None, _cases(model_dir)[0])
    except Exception as exc:  # onnxruntime raises its own exception types per status
        return str(exc)
    return None


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("onnx_shipped") / "repo"
    for model_dir in MODELS:
        generated = config_from_model_file(model_dir / "model.onnx")
        generated.config.name = model_dir.name
        write_model_entry(generated, model_dir / "model.onnx", repo)
    return repo


@pytest.fixture(scope="module")
def refused(repository) -> dict[str, str]:
    """Model name -> onnxruntime's refusal, for the models it cannot load or run here."""
    found = {}
    for model_dir in MODELS:
        reason = _onnxruntime_refusal(model_dir)
        if reason is not None:
            found[model_dir.name] = reason
    return found


def test_validate_flags_exactly_the_models_onnxruntime_cannot_run(repository, refused):
    diagnostics = validate_paths([repository]).diagnostics
    flagged = {d.model for d in diagnostics if d.code in ("ORT06", "ORT07")}
    others = [f"{d.model}: {d.code} {d.message}" for d in diagnostics
              if d.code not in ("ORT06", "ORT07") and d.severity == "error"]
    assert others == []
    unimplemented = {name for name, reason in refused.items() if any(s in reason for s in NOT_IMPLEMENTED)}
    assert unimplemented, "onnx ships old-opset models onnxruntime refuses; none was refused"
    assert flagged == unimplemented
    # Old opsets onnxruntime still runs (Relu-6, Softmax-1, ...) are not reported.
    loadable_old = [m.name for m in MODELS if m.name not in refused
                    and any(o.domain in ("", "ai.onnx") and o.version < 7 for o in onnx.load(
                        m / "model.onnx", load_external_data=False).opset_import)]
    assert loadable_old and not flagged & set(loadable_old)


def _tensors(test_dir: Path, kind: str) -> list[onnx.TensorProto]:
    files = sorted(test_dir.glob(f"{kind}_*.pb"), key=lambda f: int(f.stem.rsplit("_", 1)[1]))
    tensors = []
    for file in files:
        tensor = onnx.TensorProto()
        tensor.ParseFromString(file.read_bytes())
        tensors.append(tensor)
    return tensors


def _cases(model_dir: Path):
    """(input name -> array, output name -> array) of the model's first test data set."""
    model = onnx.load(model_dir / "model.onnx", load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in initializers]
    test_dir = sorted(model_dir.glob("test_data_set_*"))[0]
    inputs = {t.name or input_names[k]: numpy_helper.to_array(t) for k, t in enumerate(_tensors(test_dir, "input"))}
    outputs = {t.name or model.graph.output[k].name: numpy_helper.to_array(t)
               for k, t in enumerate(_tensors(test_dir, "output"))}
    return inputs, outputs


def _infer(module, client, name: str, inputs: dict, outputs: dict) -> dict:
    tensors = []
    for input_name, array in inputs.items():
        tensor = module.InferInput(input_name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = client.infer(name, tensors, outputs=[module.InferRequestedOutput(n) for n in outputs])
    return {n: result.as_numpy(n) for n in outputs}


def _same(got: np.ndarray, expected: np.ndarray) -> bool:
    if got is None or got.shape != expected.shape:
        return False
    if expected.dtype == object:
        return [v.decode() if isinstance(v, bytes) else v for v in got.ravel()] == list(expected.ravel())
    return np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-3, atol=1e-4, equal_nan=True)


def test_served_outputs_are_the_test_data(repository, refused, transports):
    servable = [m for m in MODELS if m.name not in refused]
    options = ServeOptions(repository, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=[m.name for m in servable], exit_timeout_secs=5, **transports)
    wrong = []
    with BackgroundServer(options) as server, httpclient.InferenceServerClient(server.http_url) as http:
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            for model_dir in servable:
                inputs, expected = _cases(model_dir)
                for protocol, module, client in (("http", httpclient, http), ("grpc", grpcclient, grpc)):
                    got = _infer(module, client, model_dir.name, inputs, expected)
                    wrong += [f"{model_dir.name} {protocol} {n}" for n in expected if not _same(got[n], expected[n])]
        finally:
            grpc.close()
    assert len(servable) > 90
    assert wrong == []
