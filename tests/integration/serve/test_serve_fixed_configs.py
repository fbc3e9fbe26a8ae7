"""`tritonctl validate --fix` end to end: for every fixable code a broken config is fixed by
the real command, the result validates clean (--strict), and the fixed model loads and
answers in the real `tritonctl serve`."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient

from helpers.cli_runner import cli
from helpers.fix_cases import CASES, write_base
from tritonctl.repo_schema.diagnostics import all_codes
from tritonctl.repo_schema.render.code_examples import working_directory
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


@pytest.fixture(scope="module")
def fixed(tmp_path_factory, transports):
    """A repository with every case written broken, and the model the ensembles run: one per
    transport, as each run fixes the configs afresh."""
    repo = tmp_path_factory.mktemp("fix") / "models"
    write_base(repo)
    for case in CASES:
        case.write(repo)
    return {"repo": repo}


@pytest.fixture(scope="module")
def server(fixed, transports):
    options = ServeOptions(fixed["repo"], http_port=0, grpc_port=None, metrics_port=None, control_mode="explicit",
                           load_models=["base"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as running:
        yield running


def test_every_fixable_code_has_a_case():
    fixable = {code for code, info in all_codes().items() if info.fix}
    assert fixable == {case.code for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fix_repairs_the_config_and_the_model_loads(case, fixed, server, capsys):
    repo = fixed["repo"]
    config = repo / case.id / "config.pbtxt"
    with working_directory(repo.parent):
        code, out, _ = cli(capsys, "validate", f"models/{case.id}", "--format", "json")
        assert code != 0 or case.code in out
        assert f'"code": "{case.code}"' in out, f"the broken config of {case.id} does not get {case.code}"
        code, out, err = cli(capsys, "validate", "--fix", f"models/{case.id}")
        assert code == 0, out + err
        assert out.startswith(f"--- a/models/{case.id}/config.pbtxt\n+++ b/models/{case.id}/config.pbtxt\n")
        assert out.endswith("no problems in 1 model\n")
        assert "fixed " in err and "remains: no problems in 1 model" in err
        code, out, _ = cli(capsys, "validate", "--strict", f"models/{case.id}")
        assert code == 0 and out == "no problems in 1 model\n"
    assert config.read_text() == case.fixed_config()  # only the slip changed, layout and all

    client = httpclient.InferenceServerClient(server.http_url)
    try:
        client.load_model(case.id)
        assert client.is_model_ready(case.id)
        data = np.arange(1, 1 + int(np.prod(case.shape)), dtype=np.float32).reshape((1,) + case.shape)
        name_in, name_out = ("IN", "OUT") if case.kind == "ensemble" else ("INPUT0", "OUTPUT0")
        tensor = httpclient.InferInput(name_in, list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        result = client.infer(case.id, [tensor], outputs=[httpclient.InferRequestedOutput(name_out)])
        np.testing.assert_array_equal(result.as_numpy(name_out), data)
    finally:
        client.close()
