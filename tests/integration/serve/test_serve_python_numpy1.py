"""Python models written for Triton's stub (numpy 1.x) run under the server's numpy 2: the names
NumPy 2.0 removed that they use (np.NINF, np.float_, np.product, ...) are there, as in L0_nan_inf's
model, over HTTP and gRPC on both transports."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.backends.numpy_compat import NUMPY1_NAMES, restore_numpy1_names
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            # L0_nan_inf's model writes np.NINF; the others are common in numpy 1.x code.
            out = np.array([np.NINF, np.PINF, np.product(x), np.float_(np.NaN).dtype.itemsize],
                           dtype=np.float_)
            assert np.alltrue(np.in1d([1.0], x)) == (1.0 in x)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out.astype(np.float32))]))
        return responses
'''
CONFIG = '''
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("numpy1") / "repo"
    (repo / "legacy" / "1").mkdir(parents=True)
    (repo / "legacy" / "1" / "model.py").write_text(MODEL)
    (repo / "legacy" / "config.pbtxt").write_text(textwrap.dedent(CONFIG))
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, **transports)) as server:
        yield server


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_numpy1_model_runs(served, module):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    tensor = module.InferInput("INPUT0", [3], "FP32")
    tensor.set_data_from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    result = client.infer("legacy", [tensor]).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(result, np.array([-np.inf, np.inf, 6.0, 8.0], np.float32))


def test_only_missing_names_are_restored_and_as_numpy_documents_them():
    restore_numpy1_names()
    assert restore_numpy1_names() == []  # idempotent
    assert np.NINF == -np.inf and np.float_ is np.float64 and np.string_ is np.bytes_
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":  # numpy 1.x keeps its own (deprecated) functions
        assert np.product is np.prod and np.round_ is np.round
    assert np.product(np.array([2, 3])) == 6 and np.round_(2.5) == 2.0
    assert np.trapz(np.array([1.0, 2.0, 3.0])) == 4.0
    with warnings.catch_warnings():  # numpy 1.x serves some of them through a deprecation shim, not in dir()
        warnings.simplefilter("ignore", DeprecationWarning)
        assert all(hasattr(np, name) for name, value in NUMPY1_NAMES.items() if value is not None)
