"""A Python model's model.py is the module ``model`` to its own code, as in Triton's stub, where
Triton's QA models run their checks with ``unittest.main("model", exit=False)`` inside execute or
initialize; several models, all named model.py, each see their own module."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# As Triton's QA models: a unittest.TestCase in model.py, run from execute; OUTPUT0 = success.
# Each model's test checks its own NAME, read through `import model`, also from a thread.
UNITTEST_MODEL = '''
import threading
import unittest
import numpy as np
import triton_python_backend_utils as pb_utils

NAME = "{name}"

class OwnModuleTest(unittest.TestCase):
    def test_import_model_is_this_file(self):
        import model
        self.assertEqual(model.NAME, "{name}")
        self.assertIs(model.OwnModuleTest, OwnModuleTest)

    def test_a_thread_of_the_model_sees_it_too(self):
        seen = []
        def look():
            import model
            seen.append(model.NAME)
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
        self.assertEqual(seen, ["{name}"])

class TritonPythonModel:
    def initialize(self, args):
        from model import NAME as own
        self.initialized_as = own

    def execute(self, requests):
        responses = []
        for _ in requests:
            test = unittest.main("model", exit=False)
            ok = test.result.wasSuccessful() and test.result.testsRun == 2 and self.initialized_as == NAME
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", np.array([ok], dtype=np.float16))]))
        return responses
'''

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP16 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 2 }} ]
"""

NAMES = ("unittest_a", "unittest_b")


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("own_module") / "repo"
    for name in NAMES:
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(UNITTEST_MODEL.format(name=name))
        (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def run(module, url: str, name: str) -> list:
    tensor = module.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([1], np.float32))
    return module.InferenceServerClient(url).infer(name, [tensor]).as_numpy("OUTPUT0").tolist()


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_unittest_main_model_runs_the_models_own_tests(served, module):
    url = served.http_url if module is httpclient else served.grpc_url
    for name in NAMES:
        assert run(module, url, name) == [1.0]


def test_models_named_model_py_each_see_their_own_module_at_the_same_time(served):
    results: dict = {}

    def call(name: str, index: int) -> None:
        results[(name, index)] = run(grpcclient, served.grpc_url, name)

    threads = [threading.Thread(target=call, args=(name, i)) for name in NAMES for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {(name, i): [1.0] for name in NAMES for i in range(4)}


def test_code_outside_the_models_sees_neither_module_model_nor_a_changed_argv(served):
    assert sys.argv[0] != "" and len(sys.argv) >= 1
    with pytest.raises(AttributeError, match="only that model's code"):
        import model

        model.NAME  # noqa: B018
