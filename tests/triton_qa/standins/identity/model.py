"""Stand-in for Triton's C++ identity backend (src/test/identity in triton-inference-server/
backend), written for tritonctl's QA runs: every input INPUTn comes back as OUTPUTn (only the
outputs the configuration declares), after the ``execute_delay_ms`` model parameter's delay,
as the identity backend does; an output whose optional input the request left out comes back as
zeros shaped like the first input it has (L0_optional_input's pipeline case expects that). Not
upstream code."""

import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("execute_delay_ms", {}).get("string_value", "0")
        self.delay_s = int(delay or 0) / 1000
        self.outputs = {output["name"]: pb_utils.triton_string_to_numpy(output["data_type"])
                        for output in config.get("output", [])}

    def execute(self, requests):
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        for request in requests:
            present = [tensor.as_numpy() for tensor in request.inputs()]
            tensors = []
            for name, dtype in self.outputs.items():
                source = pb_utils.get_input_tensor_by_name(request, name.replace("OUTPUT", "INPUT", 1))
                if source is not None:
                    tensors.append(pb_utils.Tensor(name, source.as_numpy()))
                elif present:
                    tensors.append(pb_utils.Tensor(name, np.zeros(present[0].shape, dtype=dtype)))
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
