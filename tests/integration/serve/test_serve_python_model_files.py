"""A Python model imports the files beside it as in Triton, whose stub imports ``model.py`` as
``<version>.model`` with the version and model directories on sys.path: ``import helper`` and
``from . import helper`` (Triton's qa/python_models/multi_file), a package of its own, a module in
the model directory; two models with a helper of the same name each get their own. In stub
processes and in the server's process, and in `validate`, which runs auto_complete_config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from helpers.cli_runner import cli
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

import file1
import shared
from . import file2
from .tools import inner
from .tools.inner import WORD


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        from . import file2 as again
        config.add_output({"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]})
        config.add_output({"name": again.EXTRA_OUTPUT, "data_type": "TYPE_STRING", "dims": [1]})
        return config

    def execute(self, requests):
        seen = {"file1": file1.NAME, "file2": file2.NAME, "inner": inner.NAME, "word": WORD, "shared": shared.NAME,
                "module": __name__.rpartition(".")[2]}
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(seen)], object))])
                for _ in requests]
'''


def write_model(repo: Path, name: str) -> None:
    version = repo / name / "1"
    (version / "tools").mkdir(parents=True)
    (version / "model.py").write_text(MODEL)
    (version / "file1.py").write_text(f"NAME = 'file1 of {name}'\n")
    (version / "file2.py").write_text(f"NAME = 'file2 of {name}'\nEXTRA_OUTPUT = 'OUT2'\n")
    (version / "tools" / "__init__.py").write_text("")
    (version / "tools" / "inner.py").write_text(f"from ..file1 import NAME as FIRST\nNAME = 'inner of {name}'\n"
                                                  "WORD = FIRST.split()[0]\n")
    (repo / name / "shared.py").write_text(f"NAME = 'shared of {name}'\n")
    (repo / name / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: 0\n'
                                             'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\n')


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("model_files")
    for name in ("first", "second"):
        write_model(repo, name)
    return repo


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_model_imports_its_own_files_both_ways(repo, isolation):
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, exit_timeout_secs=5,
                           python_isolation=isolation)
    with BackgroundServer(options) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for name in ("first", "second"):
            tensor = grpcclient.InferInput("IN", [1], "INT32")
            tensor.set_data_from_numpy(np.array([1], np.int32))
            seen = json.loads(client.infer(name, [tensor]).as_numpy("OUT")[0])
            assert seen == {"file1": f"file1 of {name}", "file2": f"file2 of {name}", "inner": f"inner of {name}",
                            "word": "file1", "shared": f"shared of {name}", "module": "model"}
            outputs = [t.name for t in client.get_model_config(name).config.output]
            assert outputs == ["OUT", "OUT2"]  # auto_complete_config's relative import worked too


def test_validate_runs_auto_complete_config_with_the_same_imports(repo, capsys):
    code, out, err = cli(capsys, "validate", str(repo))
    assert code == 0 and "no problems in 2 models" in out.lower(), out + err  # not AC52, "it imports 'shared'"
