"""What tritonclient's Python HTTP examples (src/python/examples of triton-inference-server/client:
simple_http_*_client.py, their aio twins, reuse_infer_objects_client.py, memory_growth_test.py) do,
with the real tritonclient, against the models they expect (helpers/example_models.py), and the
answers they check or print as Triton 2.51 gives them: infer with JSON and binary tensors, query
parameters and statistics, BYTES with embedded NULs, sequences with integer and string IDs, system
shared memory (status listed by name), and model control (a config override, an unload)."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
import tritonclient.utils.shared_memory as shm
from tritonclient import utils
from tritonclient.utils import InferenceServerException

from helpers.example_models import example_repository
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.full((1, 16), -1, dtype=np.int32)
EXTENSIONS = ["classification", "sequence", "model_repository", "model_repository(unload_dependents)",
              "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
              "binary_tensor_data", "parameters", "statistics", "trace", "logging"]


@pytest.fixture(scope="module")
def server(tmp_path_factory, transports):
    repo = example_repository(tmp_path_factory.mktemp("examples") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as served:
        yield served


@pytest.fixture(scope="module")
def client(server):
    with httpclient.InferenceServerClient(server.http_url, concurrency=2) as made:
        yield made


def add_sub_request(module, outputs: bool = True) -> dict:
    """simple_http_infer_client's request (infer's arguments): INPUT0 as JSON, INPUT1 binary; OUTPUT0
    binary, OUTPUT1 JSON, or no outputs named."""
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(IN0, binary_data=False)
    inputs[1].set_data_from_numpy(IN1, binary_data=True)
    wanted = [module.InferRequestedOutput("OUTPUT0", binary_data=True),
              module.InferRequestedOutput("OUTPUT1", binary_data=False)]
    return {"inputs": inputs, "outputs": wanted if outputs else None}


def as_strings(array: np.ndarray) -> np.ndarray:
    """simple_string's input and output: each number as its decimal text, in an object array."""
    return np.array([str(x).encode() for x in array.flatten()], dtype=np.object_).reshape(array.shape)


def assert_sum_and_difference(result) -> None:
    assert result.as_numpy("OUTPUT0").tolist() == (IN0 + IN1).tolist()
    assert result.as_numpy("OUTPUT1").tolist() == (IN0 - IN1).tolist()


def test_health_and_metadata(client):
    assert client.is_server_live(query_params={"test_1": 1, "test_2": 2}) and client.is_server_ready()
    assert client.is_model_ready("simple")
    assert client.get_server_metadata() == {"name": "triton", "version": "2.51.0", "extensions": EXTENSIONS}
    assert client.get_model_metadata("simple", query_params={"test_1": 1, "test_2": 2})["name"] == "simple"
    with pytest.raises(InferenceServerException, match="Request for unknown model"):
        client.get_model_metadata("wrong_model_name")


def test_infer_with_and_without_outputs_and_statistics(client):
    for outputs in (True, False):
        assert_sum_and_difference(client.infer("simple", **add_sub_request(httpclient, outputs),
                                               query_params={"test_1": 1, "test_2": 2}))
    assert len(client.get_inference_statistics("simple")["model_stats"]) == 1
    with pytest.raises(InferenceServerException) as caught:
        client.infer("wrong_model_name", **add_sub_request(httpclient))
    assert caught.value.message().startswith("Request for unknown model")
    pending = [client.async_infer("simple", **add_sub_request(httpclient)) for _ in range(2)]
    for request in pending:
        assert_sum_and_difference(request.get_result())


def test_aio_client_in_parallel(server):
    async def run():
        async with aioclient.InferenceServerClient(server.http_url) as aio:
            assert await aio.is_model_ready("simple")
            return await asyncio.gather(*(aio.infer("simple", **add_sub_request(aioclient, outputs))
                                          for outputs in (True, False)))

    for result in asyncio.run(run()):
        assert_sum_and_difference(result)


def test_strings_and_bytes_round_trip(client):
    numbers = [as_strings(IN0), as_strings(IN1)]
    inputs = [httpclient.InferInput(name, [1, 16], "BYTES") for name in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(numbers[0], binary_data=True)
    inputs[1].set_data_from_numpy(numbers[1], binary_data=False)
    wanted = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
              httpclient.InferRequestedOutput("OUTPUT1", binary_data=False)]
    result = client.infer("simple_string", inputs, outputs=wanted)
    assert [int(x) for x in result.as_numpy("OUTPUT0")[0]] == (IN0 + IN1)[0].tolist()
    assert [int(x) for x in result.as_numpy("OUTPUT1")[0]] == (IN0 - IN1)[0].tolist()
    for data in (np.array([b"he\x00llo"] * 16, dtype=np.object_).reshape(1, 16),
                 np.array([b"\x00\x01\x02\x03"] * 16, dtype=np.bytes_).reshape(1, 16)):
        for binary in (True, False):
            tensor = httpclient.InferInput("INPUT0", [1, 16], "BYTES")
            tensor.set_data_from_numpy(data, binary_data=binary)
            echoed = client.infer("simple_identity", [tensor], outputs=[
                httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)]).as_numpy("OUTPUT0")
            assert [bytes(x) if binary else str(x).encode() for x in echoed[0]] == list(data[0])


def sequence_outputs(client, sequence_id, values: list[int]) -> list[int]:
    outputs = []
    for count, value in enumerate(values, 1):
        tensor = httpclient.InferInput("INPUT", [1, 1], "INT32")
        tensor.set_data_from_numpy(np.full((1, 1), value, dtype=np.int32))
        result = client.infer("simple_sequence", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT")],
                              sequence_id=sequence_id, sequence_start=count == 1, sequence_end=count == len(values))
        outputs.append(int(result.as_numpy("OUTPUT")[0][0]))
    return outputs


def test_sequences_with_integer_and_string_ids(client):
    values = [11, 7, 5, 3, 2, 0, 1]
    assert sequence_outputs(client, 1000, [0] + values) == [1] + values
    assert sequence_outputs(client, str(uuid.uuid4()), [20] + [-v for v in values]) == [21] + [-v for v in values]


@pytest.fixture
def regions(client):
    """simple_http_shm_client's regions, under keys of their own: 'input_data' holding INPUT0 then
    INPUT1, 'output_data' for OUTPUT0 then OUTPUT1, registered outputs first."""
    client.unregister_system_shared_memory()
    client.unregister_cuda_shared_memory()
    tag = uuid.uuid4().hex[:8]
    made = {}
    for name in ("output_data", "input_data"):
        made[name] = shm.create_shared_memory_region(name, f"/{name}_{tag}", 2 * IN0.nbytes)
        client.register_system_shared_memory(name, f"/{name}_{tag}", 2 * IN0.nbytes)
    shm.set_shared_memory_region(made["input_data"], [IN0, IN1])
    yield made
    client.unregister_system_shared_memory()
    for handle in made.values():
        shm.destroy_shared_memory_region(handle)


def shm_infer(client, inputs, outputs, handle):
    size = IN0.nbytes
    for index, tensor in enumerate(inputs):
        tensor.set_shared_memory("input_data", size, offset=index * size)
    for index, wanted in enumerate(outputs):
        wanted.set_shared_memory("output_data", size, offset=index * size)
    result = client.infer("simple", inputs, outputs=outputs)
    return [shm.get_contents_as_numpy(handle, utils.triton_to_np_dtype(result.get_output(name)["datatype"]),
                                      result.get_output(name)["shape"], offset=index * size)
            for index, name in enumerate(("OUTPUT0", "OUTPUT1"))]


def test_shared_memory_and_reused_request_objects(client, regions):
    inputs = [httpclient.InferInput(name, [1, 16], "INT32") for name in ("INPUT0", "INPUT1")]
    outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUTPUT0", "OUTPUT1")]
    for _ in range(2):  # reuse_infer_objects_client: the same objects with shared memory, then without
        total, difference = shm_infer(client, inputs, outputs, regions["output_data"])
        assert total.tolist() == (IN0 + IN1).tolist() and difference.tolist() == (IN0 - IN1).tolist()
        inputs[0].set_data_from_numpy(IN0)
        inputs[1].set_data_from_numpy(IN1 * 2)
        for wanted in outputs:
            wanted.unset_shared_memory()
        result = client.infer("simple", inputs, outputs=outputs)
        assert result.as_numpy("OUTPUT0").tolist() == (IN0 + IN1 * 2).tolist()
    assert [region["name"] for region in client.get_system_shared_memory_status()] == ["input_data", "output_data"]


def test_strings_through_shared_memory(client):
    numbers = [as_strings(IN0[0]), as_strings(IN1[0])]
    expected = [as_strings(IN0[0] + IN1[0]), as_strings(IN0[0] - IN1[0])]
    serialized = [utils.serialize_byte_tensor(array) for array in numbers + expected]
    sizes = [utils.serialized_byte_size(data) for data in serialized]
    tag, handles = uuid.uuid4().hex[:8], []
    try:
        for index, name in enumerate(("input0_data", "input1_data", "output0_data", "output1_data")):
            handles.append(shm.create_shared_memory_region(name, f"/{name}_{tag}", sizes[index]))
            client.register_system_shared_memory(name, f"/{name}_{tag}", sizes[index])
        for handle, data in zip(handles, serialized):
            shm.set_shared_memory_region(handle, [data])
        inputs = [httpclient.InferInput(name, [1, 16], "BYTES") for name in ("INPUT0", "INPUT1")]
        outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUTPUT0", "OUTPUT1")]
        for index, tensor in enumerate(inputs):
            tensor.set_shared_memory(f"input{index}_data", sizes[index])
        for index, wanted in enumerate(outputs):
            wanted.set_shared_memory(f"output{index}_data", sizes[2 + index])
        result = client.infer("simple_string", inputs, outputs=outputs)
        for index, name in enumerate(("OUTPUT0", "OUTPUT1")):
            output = result.get_output(name)
            assert list(shm.get_contents_as_numpy(handles[2 + index], utils.triton_to_np_dtype(output["datatype"]),
                                                  output["shape"])[0]) == list(expected[index])
        assert [r["name"] for r in client.get_system_shared_memory_status()] == [
            "input0_data", "input1_data", "output0_data", "output1_data"]
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def test_a_client_per_request(server):
    """memory_growth_test: a new client for each request to custom_identity_int32."""
    for _ in range(3):
        with httpclient.InferenceServerClient(server.http_url) as fresh:
            tensor = httpclient.InferInput("INPUT0", [1, 16], "INT32")
            tensor.set_data_from_numpy(IN0, binary_data=True)
            echoed = fresh.infer("custom_identity_int32", [tensor]).as_numpy("OUTPUT0")
            assert echoed.dtype == IN0.dtype and echoed.tolist() == IN0.tolist()


def test_model_control(client):
    assert len(client.get_model_repository_index()) == 7
    client.load_model("simple")
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert caught.value.message().startswith("failed to load 'simple', failed to poll from model repository: ")
    assert client.is_model_ready("simple")  # the version that was serving goes on
    client.load_model("simple", config='{"max_batch_size":"16"}')
    assert client.get_model_config("simple")["max_batch_size"] == 16
    client.unload_model("simple")
    assert not client.is_model_ready("simple")
    for call, status, message in (
            (lambda: client.get_model_metadata("simple"), "404", "'simple' has no available versions"),
            (lambda: client.get_model_metadata("simple", "1"), "503", "'simple' version 1 is not at ready state"),
            (lambda: client.get_inference_statistics("simple"), "400", "requested model 'simple' is not available")):
        with pytest.raises(InferenceServerException) as caught:
            call()
        assert (caught.value.status(), caught.value.message().split(": ", 1)[-1]) == (status, message)
    with pytest.raises(InferenceServerException, match="failed to load 'wrong_model_name'"):
        client.load_model("wrong_model_name")
    client.load_model("simple")
    assert client.get_model_config("simple")["max_batch_size"] == 8
