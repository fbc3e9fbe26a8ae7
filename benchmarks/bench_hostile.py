"""The hostile requests of docs/security.md sent to `tritonctl serve` and to a real Triton, side by side.

    python benchmarks/bench_hostile.py                       # both servers (the real one from ../shared/anchors)
    python benchmarks/bench_hostile.py --servers tritonctl   # only the bundled server

Both servers get the same repository (Python-backend models only, as the real Triton here has the
Python backend only): `add_sub` (FP32, the example's) and `echo_bytes` (a BYTES identity); beside the
repository lie a loadable model (`other`) and a file (`secret.txt`) that no request may reach. Each
case is sent once, with a 10 s limit; after each case the server must still answer a valid
inference. The table shows each server's answer (HTTP status or gRPC code, and the start of its
text), whether it still served afterwards, and the server process's resident memory after the case
(Triton's Python models run in stub processes of their own, not counted). A server that stopped
serving, or left a request unanswered, is restarted for the next case.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tritonctl.analyzer.engine import free_ports  # noqa: E402

SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "anchors").is_dir()),
              ROOT.parent / "shared")
TIMEOUT_S = 10.0
LOAD_TIMEOUT_S = 60.0  # a Python model's (re)load starts a stub process in Triton: seconds

ECHO_BYTES = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            r, "INPUT0").as_numpy())]) for r in requests]
'''
ECHO_CONFIG = '''name: "echo_bytes"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
'''
BASE_CONFIG = {"backend": "python", "max_batch_size": 8,
               "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
                         {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]}],
               "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
                          {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]}]}


def make_repository(work: Path) -> Path:
    repo = work / "repo"
    example = ROOT / "examples" / "model_repository" / "add_sub"
    for model_dir in (repo / "add_sub", work / "other"):
        (model_dir / "1").mkdir(parents=True)
        (model_dir / "config.pbtxt").write_text((example / "config.pbtxt").read_text())
        (model_dir / "1" / "model.py").write_text((example / "1" / "model.py").read_text())
    (repo / "echo_bytes" / "1").mkdir(parents=True)
    (repo / "echo_bytes" / "config.pbtxt").write_text(ECHO_CONFIG)
    (repo / "echo_bytes" / "1" / "model.py").write_text(ECHO_BYTES)
    secret = work / "secret.txt"
    secret.write_text("not for clients\n")
    mtime = secret.stat().st_mtime
    os.utime(secret, (mtime - 3600, mtime))  # an access time before the last write: any read moves it
    return repo


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


class Server:
    """A server on free loopback ports, in explicit mode with both models loaded."""

    name = ""

    def __init__(self, repo: Path, work: Path):
        self.repo, self.work = repo, work
        self.pid = 0
        self.http = self.grpc = self.metrics = 0

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        state = _status(self.pid).get("State", "")
        return bool(state) and not state.startswith("Z")

    def rss_mb(self) -> float:
        return int(_status(self.pid).get("VmRSS", "0 kB").split()[0]) / 1024 if self.alive() else float("nan")

    def wait_ready(self, limit_s: float = 180) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if all(http_request(self, "GET", f"/v2/models/{m}/ready", timeout=2)[0] == 200
                   for m in ("add_sub", "echo_bytes")):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} did not become ready")


class Tritonctl(Server):
    name = "tritonctl serve"

    def start(self) -> None:
        self.http, self.grpc, self.metrics = free_ports(3)
        log = open(self.work / f"tritonctl-{self.http}.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonctl", "serve", str(self.repo), "--http-port", str(self.http),
             "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics), "--model-control-mode", "explicit",
             "--load-model", "add_sub", "--load-model", "echo_bytes", "--exit-timeout-secs", "3"],
            stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        self.wait_ready()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Triton(Server):
    name = "Triton 2.51"

    def start(self) -> None:
        self.http, self.grpc, self.metrics = free_ports(3)
        done = subprocess.run(
            ["bash", str(SHARED / "anchors" / "run_triton.sh"), str(self.repo), str(self.http), str(self.grpc),
             str(self.metrics), "--model-control-mode=explicit", "--load-model=add_sub", "--load-model=echo_bytes",
             "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
             "--exit-timeout-secs=3"],
            capture_output=True, text=True, timeout=240,
            env={**os.environ, "TRITON_LOG": str(self.work / f"triton-{self.http}.log")})
        if done.returncode != 0:
            raise RuntimeError(f"Triton did not start: {done.stderr[-1500:]}")
        self.pid = int(done.stdout.split()[-1])
        self.wait_ready()

    def stop(self) -> None:
        subprocess.run(["bash", str(SHARED / "anchors" / "stop_triton.sh"), str(self.http)], capture_output=True,
                       timeout=90, env={**os.environ, "TRITON_STOP_TIMEOUT": "15"})


# --- requests -------------------------------------------------------------------------------------
Answer = tuple[object, str]  # (HTTP status, gRPC code name or "no answer"; the text)


class RawPathConnection(http.client.HTTPConnection):
    """Sends the request line's path byte for byte (latin-1), not-UTF-8 bytes included."""

    def _encode_request(self, request: str) -> bytes:
        return request.encode("latin-1")


def http_request(server: Server, method: str, path: str, body: bytes = b"", headers: dict | None = None,
                 timeout: float = TIMEOUT_S) -> Answer:
    """One request with the path sent as given (no quoting)."""
    connection = RawPathConnection("127.0.0.1", server.http, timeout=timeout)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            connection.putheader(key, value)
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
        try:
            text = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            pass
        return response.status, text
    except (OSError, http.client.HTTPException) as exc:
        return "no answer", type(exc).__name__
    finally:
        connection.close()


def post_json(server: Server, path: str, payload) -> Answer:
    return http_request(server, "POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})


def binary_body(model: str, header: dict, tail: bytes) -> Callable[[Server], Answer]:
    head = json.dumps(header).encode()
    return lambda s: http_request(s, "POST", f"/v2/models/{model}/infer", head + tail,
                                  {"Inference-Header-Content-Length": str(len(head))})


def grpc_infer(model: str, inputs: list[tuple[str, str, list[int], bytes]]) -> Callable[[Server], Answer]:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, datatype, shape, data in inputs:
        request.inputs.append(service_pb2.ModelInferRequest.InferInputTensor(name=name, datatype=datatype,
                                                                             shape=shape))
        request.raw_input_contents.append(data)

    def send(server: Server) -> Answer:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc}") as channel:
            try:
                service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=TIMEOUT_S)
                return "OK", ""
            except grpc.RpcError as exc:
                code = exc.code()
                return ("no answer" if code == grpc.StatusCode.DEADLINE_EXCEEDED else code.name), exc.details() or ""

    return send


def valid_infer(server: Server) -> bool:
    return post_json(server, "/v2/models/add_sub/infer", add_sub_json([1, 4], [1, 2, 3, 4]))[0] == 200


def add_sub_json(shape0: list[int], data0: list) -> dict:
    return {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape0, "data": data0},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "data": [1, 1, 1, 1]}]}


def load(name: str, parameters: dict | None = None) -> Callable[[Server], Answer]:
    body = {"parameters": parameters} if parameters is not None else {}
    return lambda s: http_request(s, "POST", f"/v2/repository/models/{name}/load", json.dumps(body).encode(),
                                  {"Content-Type": "application/json"}, timeout=LOAD_TIMEOUT_S)


def with_config(**fields) -> dict:
    return {"config": json.dumps({**BASE_CONFIG, **fields})}


def reload_then_ready(parameters: dict) -> Callable[[Server], Answer]:
    def send(server: Server) -> Answer:
        status, text = load("add_sub", parameters)(server)
        ready = http_request(server, "GET", "/v2/models/add_sub/ready")[0] == 200
        return status, f"{text[:50]} (add_sub ready after: {'yes' if ready else 'NO'})"

    return send


TWO_TO_40, TWO_TO_31 = 1 << 40, 1 << 31
CASES: list[tuple[str, Callable[[Server], Answer]]] = [
    ("JSON: shape [1, 2^40] with 4 values",
     lambda s: post_json(s, "/v2/models/add_sub/infer", add_sub_json([1, TWO_TO_40], [1, 2, 3, 4]))),
    ("JSON: BYTES shape [1, 2^31] with 1 value", lambda s: post_json(s, "/v2/models/echo_bytes/infer", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, TWO_TO_31], "data": ["a"]}]})),
    ("JSON: 40 dimensions", lambda s: post_json(s, "/v2/models/add_sub/infer", add_sub_json([1] * 40, [1]))),
    ("JSON: a negative dimension", lambda s: post_json(s, "/v2/models/add_sub/infer", add_sub_json([1, -4], [1]))),
    ("JSON: a body that is not JSON", lambda s: http_request(s, "POST", "/v2/models/add_sub/infer", b"{not json")),
    ("binary: 13 bytes for a [1,4] FP32 input", binary_body("add_sub", {"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 13}},
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}]},
        b"\0" * 29)),
    ("binary: header length beyond the body", lambda s: http_request(
        s, "POST", "/v2/models/add_sub/infer", b"{}", {"Inference-Header-Content-Length": "1000"})),
    ("binary: an empty body with a header length", lambda s: http_request(
        s, "POST", "/v2/models/add_sub/infer", b"", {"Inference-Header-Content-Length": "0"})),
    ("binary: BYTES shape [1, 2^31] from 8 bytes", binary_body("echo_bytes", {"inputs": [
        {"name": "INPUT0", "datatype": "BYTES", "shape": [1, TWO_TO_31], "parameters": {"binary_data_size": 8}}]},
        b"\1\0\0\0a\0\0\0")),
    ("model '..' (metadata)", lambda s: http_request(s, "GET", "/v2/models/..")),
    ("model '%2e%2e' (ready)", lambda s: http_request(s, "GET", "/v2/models/%2e%2e/ready")),
    ("model '%ff', not UTF-8 (ready)", lambda s: http_request(s, "GET", "/v2/models/%ff/ready")),
    ("model of a raw 0xff byte (ready)", lambda s: http_request(s, "GET", "/v2/models/\xff/ready")),
    ("load model '..'", load("..")),
    ("load model '%2e%2e'", load("%2e%2e")),
    ("load: default_model_filename '../../other/1/model.py'",
     load("add_sub", with_config(default_model_filename="../../other/1/model.py"))),
    ("load: default_model_filename absolute (the secret)",
     lambda s: load("add_sub", with_config(default_model_filename=str(s.work / "secret.txt")))(s)),
    ("load: a file: override outside the model", load("add_sub", {
        **with_config(), "file:../../written_outside/1/model.py": base64.b64encode(b"x = 1\n").decode()})),
    ("reload with the config override []", reload_then_ready({"config": "[]"})),
    ("reload with an unknown config field", reload_then_ready(with_config(no_such_field=1))),
    ("unknown route POST /v2/models/add_sub/nonsense",
     lambda s: http_request(s, "POST", "/v2/models/add_sub/nonsense")),
    ("gRPC: model '..'", grpc_infer("..", [("INPUT0", "FP32", [1, 4], bytes(16)),
                                           ("INPUT1", "FP32", [1, 4], bytes(16))])),
    ("gRPC: 13 raw bytes for a [1,4] FP32 input", grpc_infer("add_sub", [("INPUT0", "FP32", [1, 4], bytes(13)),
                                                                         ("INPUT1", "FP32", [1, 4], bytes(16))])),
    ("gRPC: shape [1, 2^40] with 16 bytes", grpc_infer("add_sub", [("INPUT0", "FP32", [1, TWO_TO_40], bytes(16)),
                                                                   ("INPUT1", "FP32", [1, 4], bytes(16))])),
    ("gRPC: BYTES shape [1, 2^31] from 8 bytes",
     grpc_infer("echo_bytes", [("INPUT0", "BYTES", [1, TWO_TO_31], b"\1\0\0\0a\0\0\0")])),
]


@dataclass
class Outcome:
    answer: object
    text: str
    seconds: float
    alive: bool
    serves: bool
    rss_mb: float


def run_cases(server: Server) -> list[Outcome]:
    outcomes = []
    server.start()
    try:
        for name, case in CASES:
            started = time.monotonic()
            answer, text = case(server)
            seconds = time.monotonic() - started
            alive = server.alive()
            serves = alive and valid_infer(server)
            outcome = Outcome(answer, " ".join(str(text).split()), seconds, alive, serves, server.rss_mb())
            outcomes.append(outcome)
            print(f"  {name}: {answer} in {seconds:.1f} s, {outcome.text[:80]!r}, serves after: {serves}, "
                  f"RSS {outcome.rss_mb:.0f} MB", flush=True)
            if not serves or answer == "no answer":  # Triton queues every later load behind a hung one
                server.stop()
                server.start()
    finally:
        server.stop()
    return outcomes


def table(results: dict[str, list[Outcome]]) -> str:
    names = list(results)
    lines = ["| case | " + " | ".join(f"{n}: answer | serves after (RSS MB)" for n in names) + " |",
             "|" + "---|" * (1 + 2 * len(names))]
    for index, (case, _) in enumerate(CASES):
        cells = []
        for name in names:
            o = results[name][index]
            said = str(o.answer) + (f": {o.text[:60]}" if o.text else "")
            after = "yes" if o.serves else ("**died**" if not o.alive else "**no**")
            cells += [said.replace("|", "\\|"), f"{after} ({o.rss_mb:.0f})"]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="tritonctl,triton", help="tritonctl and/or triton")
    args = parser.parse_args()
    kinds = {"tritonctl": Tritonctl, "triton": Triton}
    results: dict[str, list[Outcome]] = {}
    for kind in args.servers.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
            work = Path(tmp)
            repo = make_repository(work)
            secret = work / "secret.txt"
            before = secret.stat().st_atime
            server = kinds[kind](repo, work)
            print(f"{server.name}:", flush=True)
            results[server.name] = run_cases(server)
            outside = sorted(p.name for p in work.iterdir() if not p.name.endswith(".log"))
            print(f"  outside the repository afterwards: {outside}; secret.txt read: "
                  f"{secret.stat().st_atime != before}", flush=True)
    print()
    print(table(results))


if __name__ == "__main__":
    main()
