"""Bursts against a slow model with short queue timeouts (REJECT) and short gRPC client deadlines,
over both protocols and both transports, with the real tritonclient: every request is answered,
a success or Triton's timeout answer; the model ran exactly the requests answered with success;
the server's counts add up; and nothing ran after its queue deadline or after its client had
gone, but for a request whose deadline fell in the microseconds between the batcher's last look
and the model's start (``tritonctl_inference_stale_exec_count``, at most one of a burst here;
docs/serve.md). The burst is larger than what the model can run
within the timeout, so most requests leave the queue at their deadline, and the ones that run
are taken near it."""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_tag_logger
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

SLEEPER_BATCHING = """\
dynamic_batching {
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000 allow_timeout_override: true }
}"""

BURST = 24
QUEUE_TIMEOUT_US = 40_000  # each request of a burst shortens the model's 10 s queue timeout to this
CLIENTS = {"http": httpclient, "grpc": grpcclient}


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("deadlines") / "repo"
    ran_log = write_tag_logger(repo, "sleeper", 1, SLEEPER_BATCHING, seconds=0.02)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        server.ran_log = ran_log
        yield server


def ran(server) -> set[int]:
    log = Path(server.ran_log)
    return {int(line) for line in log.read_text().split()} if log.exists() else set()


def counters(server) -> dict[str, float]:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or 'model="sleeper"' not in line:
            continue
        name, labels = line.split("{", 1)
        reason = labels.split('reason="', 1)[1].split('"', 1)[0] if 'reason="' in labels else ""
        values[f"{name}:{reason}" if reason else name] = float(line.rsplit(" ", 1)[1])
    return values


def delta(before: dict, after: dict, name: str) -> float:
    return after.get(name, 0) - before.get(name, 0)


def client_for(server, protocol: str):
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    return grpcclient.InferenceServerClient(server.grpc_url)


def send(client, protocol: str, tag: int, **options) -> tuple[str, str]:
    """("ok", "") or (status, message) of one request tagged ``tag``."""
    module = CLIENTS[protocol]
    tensor = module.InferInput("TAG", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[tag]], np.int32))
    try:
        result = client.infer("sleeper", [tensor], **options)
        assert int(result.as_numpy("OUT").reshape(-1)[0]) == tag
        return "ok", ""
    except InferenceServerException as exc:
        return str(exc.status()), exc.message()


def burst(server, protocol: str, base: int, **options) -> dict[int, tuple[str, str]]:
    """Send ``BURST`` requests at once: over HTTP each with a client of its own (made in its
    thread), over gRPC all on one channel, connected before the burst so that every request
    reaches the server before its client's deadline."""
    tags = range(base, base + BURST)

    def one(tag: int, shared=None) -> tuple[str, str]:
        client = shared or client_for(server, protocol)
        try:
            return send(client, protocol, tag, **options)
        finally:
            if shared is None:
                client.close()

    shared = client_for(server, "grpc") if protocol == "grpc" else None
    try:
        if shared is not None:
            assert shared.is_server_live()
        with ThreadPoolExecutor(BURST) as pool:
            return dict(zip(tags, pool.map(lambda tag: one(tag, shared), tags)))
    finally:
        if shared is not None:
            shared.close()


def settled(server, protocol: str) -> dict:
    """The counters once every request of the burst that reached the server is answered: a last
    request, queued behind them on the only instance, has come back."""
    client = client_for(server, protocol)
    try:
        assert send(client, protocol, -1) == ("ok", "")
    finally:
        client.close()
    after = counters(server)
    after["nv_inference_request_success"] -= 1
    return after


@pytest.mark.parametrize("protocol,base", [("http", 1000), ("grpc", 2000)])
def test_a_burst_with_short_queue_timeouts_runs_only_what_it_answers_with_success(sleeper, protocol, base):
    before = counters(sleeper)
    answers = burst(sleeper, protocol, base, timeout=QUEUE_TIMEOUT_US)
    expired_status = "503" if protocol == "http" else "StatusCode.UNAVAILABLE"
    succeeded = {tag for tag, (status, _) in answers.items() if status == "ok"}
    expired = {tag for tag, answer in answers.items() if answer == (expired_status, "Request timeout expired")}
    assert succeeded | expired == set(answers), {t: a for t, a in answers.items() if t not in succeeded | expired}
    assert expired and succeeded
    assert ran(sleeper) & set(answers) == succeeded  # the model ran exactly the successes
    after = settled(sleeper, protocol)
    assert delta(before, after, "nv_inference_request_success") == len(succeeded)
    assert delta(before, after, "nv_inference_request_failure:REJECTED") == len(expired)
    assert delta(before, after, "tritonctl_inference_stale_exec_count") <= 1  # the last look's gap, if ever


def test_grpc_clients_whose_deadlines_pass_are_never_run_after_they_left(sleeper):
    before = counters(sleeper)
    # the burst needs about 0.5 s of the model; each client waits 0.2 s: most leave while queued
    answers = burst(sleeper, "grpc", 3000, client_timeout=0.2)
    succeeded = {tag for tag, (status, _) in answers.items() if status == "ok"}
    gone = {tag for tag, (status, _) in answers.items() if status == "StatusCode.DEADLINE_EXCEEDED"}
    assert succeeded | gone == set(answers), answers
    assert gone
    after = settled(sleeper, "grpc")
    server_ok = delta(before, after, "nv_inference_request_success")
    cancelled = delta(before, after, "nv_inference_request_failure:CANCELED")
    assert server_ok + cancelled <= BURST and delta(before, after, "nv_inference_request_failure:REJECTED") == 0
    # a client may give up while its request runs: the server ran it and counts a success
    assert len(ran(sleeper) & set(answers)) == server_ok >= len(succeeded)
    assert delta(before, after, "tritonctl_inference_stale_exec_count") <= 1  # the last look's gap, if ever
