"""The load API with model files in the request (``file:<version>/<name>`` parameters), as Triton's
qa/L0_lifecycle test_file_override and test_file_override_security use it, over HTTP and gRPC with
the real clients: no files without a config; a model of a new name from the files alone; the
repository's model replaced by them and back; paths that leave the model directory refused; the
files gone with the model."""

from __future__ import annotations

import glob
import json
import os
import tempfile
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import add_sub_onnx
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

NAME = "onnx_float32_float32_float32"
OVERRIDE = "override_model_float32_float32_float32"
CONFIG = f'''
name: "{NAME}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
'''


def override_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tritonctl-override-*")))


@pytest.fixture
def server(tmp_path, transports):
    add_sub_onnx(tmp_path / "repo" / NAME / "3" / "model.onnx")  # version 3 only, as in Triton's test
    (tmp_path / "repo" / NAME / "config.pbtxt").write_text(CONFIG)
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=[NAME], **transports)
    with BackgroundServer(options) as running:
        yield running


def ready(client, name: str) -> list[bool]:
    return [client.is_model_ready(name, str(version)) for version in (1, 2, 3)]


def adds(module, client, name: str, version: str) -> bool:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    inputs = [module.InferInput(n, [2, 4], "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(x)
    return np.array_equal(client.infer(name, inputs, model_version=version).as_numpy("OUTPUT0"), x + x)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_file_override_as_tritons_lifecycle_test(server, module, tmp_path):
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    content = (tmp_path / "repo" / NAME / "3" / "model.onnx").read_bytes()
    files = {"file:1/model.onnx": content}
    before = override_dirs()
    assert ready(client, NAME) == [False, False, True]

    with pytest.raises(InferenceServerException, match=f"failed to load '{NAME}', failed to poll from model "
                                                       "repository"):
        client.load_model(NAME, files=files)  # files need a config
    assert ready(client, NAME) == [False, False, True] and adds(module, client, NAME, "3")

    config = json.dumps({"backend": "onnxruntime"})
    client.load_model(OVERRIDE, config=config, files=files)  # a name the repository does not have
    assert ready(client, NAME) == [False, False, True] and ready(client, OVERRIDE) == [True, False, False]
    assert adds(module, client, OVERRIDE, "1")

    client.load_model(NAME, config=config, files=files)  # the repository's model, from the files
    assert ready(client, NAME) == [True, False, False] and adds(module, client, NAME, "1")
    assert len(override_dirs() - before) == 2

    client.load_model(NAME)  # back to the repository's files
    client.unload_model(OVERRIDE)
    assert ready(client, NAME) == [False, False, True] and adds(module, client, NAME, "3")
    assert not client.is_model_ready(OVERRIDE)
    assert override_dirs() - before == set()  # each model's files went with it


@pytest.mark.parametrize("path", ["../../root/new_dir/test.txt", "../escape_symlink/new_dir/test.txt",
                                  "/etc/tritonctl-test.txt", "1/../../outside.txt"])
def test_a_file_path_that_leaves_the_model_directory_is_refused(server, path):
    client = httpclient.InferenceServerClient(server.http_url)
    before = override_dirs()
    with pytest.raises(InferenceServerException, match="failed to load"):
        client.load_model("new_model", config=json.dumps({"backend": "onnxruntime"}),
                          files={f"file:{path}": b"This shouldn't exist"})
    assert override_dirs() == before and not client.is_model_ready("new_model")


def test_file_contents_must_be_base64_over_http(server):
    body = json.dumps({"parameters": {"config": json.dumps({"backend": "onnxruntime"}),
                                      "file:1/model.onnx": "not base64!"}}).encode()
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/{NAME}/load", data=body,
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "File parameter 'file:1/model.onnx' must hold the file's bytes in base64" in \
        json.loads(refused.value.read())["error"]
    assert httpclient.InferenceServerClient(server.http_url).is_model_ready(NAME, "3")


def test_a_model_from_files_that_fails_to_load_leaves_the_serving_one_and_no_files(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    before = override_dirs()
    with pytest.raises(InferenceServerException, match=f"load failed for model '{NAME}'"):
        client.load_model(NAME, config=json.dumps({"backend": "onnxruntime"}),
                          files={"file:1/model.onnx": b"not an onnx model"})
    assert client.is_model_ready(NAME, "3") and override_dirs() == before
