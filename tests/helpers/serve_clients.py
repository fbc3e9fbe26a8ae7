"""Checks made with the real tritonclient against a running server (tests/integration/serve)."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def assert_serves(served) -> None:
    """A valid inference still answers, over both protocols."""
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    with httpclient.InferenceServerClient(served.http_url) as client:
        inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        assert np.array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + a)
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        inputs = [grpcclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        assert np.array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT1"), a - a)
    finally:
        client.close()
