"""The cases of Triton's own ``qa/L0_libtorch_io_names``: one TorchScript model, forward(INPUT0, INPUT1)
returning (INPUT0 - INPUT1, INPUT0 + INPUT1), under eight configs that name its inputs and outputs
by forward()'s arguments, by ``<name>__<index>``, by neither (config order) or by a mix, and one
whose config lists the inputs and outputs in the other order. Each must answer as Triton's
PyTorch backend does, over HTTP and gRPC."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

torch = pytest.importorskip("torch")


class AddSub(torch.nn.Module):
    def forward(self, INPUT0, INPUT1):  # noqa: N803 - the argument names are what the test is about
        return INPUT0 - INPUT1, INPUT0 + INPUT1


# model -> its (input, input, output, output) names, in the config's order, as the QA test's
# sed lines make them from the stock config (INPUT0, INPUT1, OUTPUT__0, OUTPUT__1).
NAMES = {
    "libtorch_io_index": ("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"),
    "libtorch_output_index": ("INPUT0", "INPUT1", "OUTPUT__0", "OUTPUT__1"),
    "libtorch_no_output_index": ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1"),
    "libtorch_no_arguments_output_index": ("INPUTA", "INPUTB", "OUTPUTA", "OUTPUTB"),
    "libtorch_mix_index": ("INPUTA", "INPUT__1", "OUTPUTA", "OUTPUT__1"),
    "libtorch_mix_arguments": ("INPUT0", "INPUTB", "OUTPUTA", "OUTPUT__1"),
    "libtorch_mix_arguments_index": ("INPUT0", "INPUT__1", "OUTPUT0", "OUTPUT__1"),
    # the config's first input is forward()'s second argument, its first output OUT__1
    "libtorch_unordered_index": ("INPUT1", "INPUT0", "OUT__1", "OUT__0"),
}
# Which name of each model gets the first operand, the second, the difference and the sum.
ROLES = {**NAMES, "libtorch_unordered_index": ("INPUT0", "INPUT1", "OUT__0", "OUT__1")}


def _config(model: str) -> str:
    tensors = [f'{{ name: "{name}" data_type: TYPE_FP32 dims: [ 16 ] }}' for name in NAMES[model]]
    return (f'name: "{model}"\nplatform: "pytorch_libtorch"\nmax_batch_size: 8\n'
            f"input [ {tensors[0]}, {tensors[1]} ]\noutput [ {tensors[2]}, {tensors[3]} ]\n")


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("io_names") / "repo"
    module = torch.jit.script(AddSub())
    for model in NAMES:
        (repo / model / "1").mkdir(parents=True)
        module.save(str(repo / model / "1" / "model.pt"))
        (repo / model / "config.pbtxt").write_text(_config(model))
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)
    with BackgroundServer(options) as server:
        yield server


@pytest.mark.parametrize("client_module", [httpclient, grpcclient], ids=["http", "grpc"])
@pytest.mark.parametrize("model", list(NAMES))
def test_inputs_and_outputs_are_found_as_tritons_pytorch_backend_finds_them(served, client_module, model):
    first, second, difference, total = ROLES[model]
    input0 = np.arange(16, dtype=np.float32)[None]
    input1 = np.full((1, 16), -1, np.float32)
    inputs = []
    for name, data in ((first, input0), (second, input1)):
        inputs.append(client_module.InferInput(name, [1, 16], "FP32"))
        inputs[-1].set_data_from_numpy(data)
    url = served.http_url if client_module is httpclient else served.grpc_url
    with client_module.InferenceServerClient(url) as client:
        result = client.infer(model, inputs, outputs=[client_module.InferRequestedOutput(difference),
                                                     client_module.InferRequestedOutput(total)])
    assert np.array_equal(result.as_numpy(difference), input0 - input1)
    assert np.array_equal(result.as_numpy(total), input0 + input1)
