"""Model repository agents: Triton's ``checksum`` agent verifies the MD5 digests a config gives for
the model's files before the model loads (triton-inference-server/checksum_repository_agent's
words for each refusal); any other agent is not available in this server, and a model naming one
fails to load as on a Triton without its library: a poll failure, with the reason."""

from __future__ import annotations

import hashlib

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import text_format
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_identity
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.repo_agents import RepoAgentError, run_agents
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


def _with_agent(model_dir, agent: str) -> None:
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text() + f"model_repository_agents {{ agents [ {agent} ] }}\n")


def _checksum(key: str, value: str) -> str:
    return f'{{ name: "checksum" parameters [ {{ key: "{key}" value: "{value}" }} ] }}'


@pytest.fixture
def served(tmp_path, transports):
    repo = tmp_path / "repo"
    digest = None
    for name in ("good", "upper_algorithm", "bad", "missing", "unsupported", "unparsed", "other_agent", "escape"):
        model_dir = write_python_identity(repo, name)
        digest = hashlib.md5((model_dir / "1" / "model.py").read_bytes()).hexdigest()
        agent = {"good": _checksum("MD5:1/model.py", digest), "upper_algorithm": _checksum("md5:1/model.py", digest),
                 "bad": _checksum("MD5:1/model.py", digest.upper()), "missing": _checksum("MD5:1/gone.py", digest),
                 "unsupported": _checksum("SHA256:1/model.py", digest), "unparsed": _checksum("1/model.py", digest),
                 "other_agent": '{ name: "relocation" parameters [ { key: "empty_config" value: "false" } ] }',
                 "escape": _checksum("MD5:../good/1/model.py", digest)}[name]
        _with_agent(model_dir, agent)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                           exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server, digest


def _load(client, model: str) -> str | None:
    try:
        client.load_model(model)
        return None
    except InferenceServerException as exc:
        return exc.message()


def test_matching_digests_load_and_serve(served):
    server, _ = served
    with httpclient.InferenceServerClient(server.http_url) as client:
        for model in ("good", "upper_algorithm"):
            assert _load(client, model) is None
            assert client.is_model_ready(model)


@pytest.mark.parametrize("model, reason", [
    ("bad", "Mismatched MD5 hash for file 1/model.py, expect: {upper}, got: {digest}"),
    ("missing", "failed to open text file for read 1/gone.py: No such file or directory"),
    ("unsupported", "Unsupported checksum algorithm: SHA256"),
    ("unparsed", "failed to parse key: 1/model.py"),
    ("other_agent", "unable to find 'libtritonrepoagent_relocation.so' for repo agent 'relocation'"),
])
def test_a_refused_model_is_a_poll_failure_in_the_agents_words(served, model, reason):
    server, digest = served
    expected = (f"failed to load '{model}', failed to poll from model repository: "
                + reason.format(upper=digest.upper(), digest=digest))
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        with module.InferenceServerClient(url) as client:
            assert _load(client, model).startswith(expected)
            assert not client.is_model_ready(model)


def test_a_checksum_file_outside_the_model_directory_is_refused_before_it_is_read(served):
    server, _ = served
    with httpclient.InferenceServerClient(server.http_url) as client:
        assert "must be a relative path inside the model directory" in _load(client, "escape")


@given(st.text(alphabet=st.sampled_from("MDd5:/.ab\\x"), max_size=12), st.text(max_size=4))
def test_any_checksum_key_is_checked_or_refused_in_words(tmp_path_factory, key, value):
    model_dir = tmp_path_factory.mktemp("m")
    (model_dir / "a").write_bytes(b"data")
    config = text_format.Parse('model_repository_agents { agents [ { name: "checksum" } ] }',
                               model_config_pb2().ModelConfig())
    config.model_repository_agents.agents[0].parameters[key] = value
    try:
        run_agents(config, model_dir)
    except RepoAgentError as exc:
        assert str(exc).startswith(("failed to parse key", "Unsupported checksum algorithm", "failed to open",
                                    "Mismatched MD5 hash"))
