"""Reliability of `tritonctl serve`: overload against its queue limits, and a long soak.

    python benchmarks/bench_reliability.py overload                 # 4x capacity, 20 s per protocol
    python benchmarks/bench_reliability.py overload --duration 60 --load-factor 8
    python benchmarks/bench_reliability.py overload --trace-every 4   # and the server's own latencies
    python benchmarks/bench_reliability.py soak --soak-minutes 30   # mixed traffic, a reload every 30 s
    python benchmarks/bench_reliability.py soak --soak-minutes 2 --rate 50

overload: a Python model that sleeps ``--sleep-ms`` per request (one instance, batch 1: a known
capacity of 1000 / sleep-ms requests/s) behind a dynamic batcher with
``default_queue_policy { timeout_action: REJECT default_timeout_microseconds: --timeout-ms
max_queue_size: --queue-size }``, served by ``tritonctl serve`` in its own process. Requests
arrive open-loop at ``--load-factor`` times the capacity, over gRPC and then over HTTP. Every
request must be answered: a success, or 503 / UNAVAILABLE with Triton's text ("Exceeds maximum
queue size", "Request timeout expired"). Per protocol the table shows those counts, the
server's own counts (metrics: successes, failures REJECTED and CANCELED, and
``tritonctl_inference_stale_exec_count``, requests run after their queue deadline or after
their client had gone), the successes' p50/p99 latency against the queue timeout plus one
execution, the rejections' latency, the successes' mean time in the queue as the server
measured it, the server's resident memory before, at its peak during, and after the load,
and the machine's load average (1 min) at the end: on a shared machine the client's and the
server's latencies grow with it. With ``--trace-every N`` the server traces every N-th request
(Triton's trace, TIMESTAMPS) and a second table shows its own view of them: the time from the
request's arrival in the server to its end, in the queue, in the model and after it, which tells
the server's share of the client's latency from the transport's and the client's.

soak: an onnxruntime model, a Python model and a third model (onnxruntime) that is reloaded
through the repository API every ``--reload-s`` seconds, under rate-limited mixed traffic on
both protocols (inference on all three, metadata, config, statistics, readiness), for
``--soak-minutes``. Every ``--sample-s`` seconds the server's resident memory, open file
descriptors (/proc/PID/fd) and threads (/proc/PID/status) are sampled; the table shows them at
the start, after the first tenth of the run (warm), at the peak and at the end, with the growth
from warm to end, and every error by kind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SLEEPER_PY = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils

SLEEP_S = {sleep_s}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep(SLEEP_S)
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)]))
        return responses
"""

ECHO_PY = SLEEPER_PY.replace("            time.sleep(SLEEP_S)\n", "").replace("SLEEP_S = {sleep_s}\n\n\n", "")

PYTHON_CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}
"""

ADD_SUB_CONFIG = """\
name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
dynamic_batching {{ max_queue_delay_microseconds: 500 }}
"""


def write_python_model(repo: Path, name: str, source: str, max_batch: int = 1, extra: str = "") -> None:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "1" / "model.py").write_text(source)
    (repo / name / "config.pbtxt").write_text(PYTHON_CONFIG.format(name=name, max_batch=max_batch, extra=extra))


def write_add_sub(repo: Path, name: str) -> None:
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 16]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 16]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
             helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])]
    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))
    (repo / name / "config.pbtxt").write_text(ADD_SUB_CONFIG.format(name=name))


# ---- the server process -------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Sample:
    at_s: float
    rss_mb: float
    fds: int
    threads: int


class Server:
    """``tritonctl serve`` in explicit model-control mode, every model loaded, on free ports."""

    def __init__(self, repo: Path, log: Path, extra_args: tuple[str, ...] = ()):
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", str(self.http_port),
             "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
             "--model-control-mode", "explicit", "--load-model", "*", "--exit-timeout-secs", "10", *extra_args],
            stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}; see {log}")
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout=1).status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("the server did not become ready in 120 s")

    def sample(self, started: float) -> Sample:
        pid = self.process.pid
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return Sample(time.monotonic() - started, int(status["VmRSS"].split()[0]) / 1024,
                      len(os.listdir(f"/proc/{pid}/fd")), int(status["Threads"]))

    def get_json(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as reply:
            return json.load(reply)

    def metrics(self, model: str) -> dict[str, float]:
        """The Prometheus metrics of ``model``: name (with its reason label, if any) -> value."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        values = {}
        for line in text.splitlines():
            if not line.startswith("#") and f'model="{model}"' in line:
                name, labels = line.split("{", 1)
                reason = labels.split('reason="', 1)[1].split('"', 1)[0] if 'reason="' in labels else ""
                values[f"{name}:{reason}" if reason else name] = float(line.rsplit(" ", 1)[1])
        return values

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -9
        finally:
            self._log.close()


class Sampler(threading.Thread):
    """Samples the server every ``period_s`` seconds until ``stop``."""

    def __init__(self, server: Server, period_s: float):
        super().__init__(daemon=True)
        self.server, self.period_s = server, period_s
        self.samples: list[Sample] = []
        self.started = time.monotonic()
        self._finished = threading.Event()

    def run(self) -> None:
        while True:
            try:
                self.samples.append(self.server.sample(self.started))
            except (OSError, KeyError, ValueError):
                pass
            if self._finished.wait(self.period_s):
                return

    def stop(self) -> list[Sample]:
        self._finished.set()
        self.join()
        return self.samples


# ---- overload -----------------------------------------------------------------------------------

FULL = "Exceeds maximum queue size"
EXPIRED = "Request timeout expired"


@dataclass
class Outcomes:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"ok": [], "expired": []})
    kinds: Counter = field(default_factory=Counter)  # ok, full, expired, unanswered, other: TEXT

    def add(self, kind: str, latency: float) -> None:
        self.kinds[kind] += 1
        if kind in self.latencies:
            self.latencies[kind].append(latency)


def classify_rejection(status_ok: bool, text: str) -> str:
    if status_ok and text.endswith(FULL):
        return "full"
    if status_ok and text == EXPIRED:
        return "expired"
    return f"other: {text[:120]}"


def sleeper_request() -> tuple[bytes, bytes, str]:
    """(gRPC ModelInferRequest bytes, HTTP body, HTTP Inference-Header-Content-Length)."""
    from tritonclient.grpc import service_pb2

    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    message = service_pb2.ModelInferRequest(model_name="sleeper")
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    message.raw_input_contents.append(data.tobytes())
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": data.nbytes}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    return message.SerializeToString(), header + data.tobytes(), str(len(header))


async def overload_grpc(port: int, rate: float, seconds: float, answer_within_s: float) -> Outcomes:
    import grpc

    payload, _, _ = sleeper_request()
    outcomes = Outcomes()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")

        async def one() -> None:
            start = time.perf_counter()
            try:
                await call(payload, timeout=answer_within_s)
                outcomes.add("ok", time.perf_counter() - start)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    outcomes.add("unanswered", 0)
                else:
                    outcomes.add(classify_rejection(exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details() or ""),
                                 time.perf_counter() - start)

        await open_loop(one, rate, seconds)
    return outcomes


async def overload_http(port: int, rate: float, seconds: float, answer_within_s: float) -> Outcomes:
    import aiohttp

    _, body, header_length = sleeper_request()
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": header_length}
    url = f"http://127.0.0.1:{port}/v2/models/sleeper/infer"
    outcomes = Outcomes()
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=answer_within_s)) as session:
        async def one() -> None:
            start = time.perf_counter()
            try:
                async with session.post(url, data=body, headers=headers) as reply:
                    content = await reply.read()
                    if reply.status == 200:
                        outcomes.add("ok", time.perf_counter() - start)
                    else:
                        try:
                            text = json.loads(content)["error"]
                        except (ValueError, KeyError):
                            text = content.decode(errors="replace")
                        outcomes.add(classify_rejection(reply.status == 503, text), time.perf_counter() - start)
            except asyncio.TimeoutError:
                outcomes.add("unanswered", 0)
            except aiohttp.ClientError as exc:
                outcomes.add(f"other: {type(exc).__name__}: {exc}", 0)

        await open_loop(one, rate, seconds)
    return outcomes


async def open_loop(one, rate: float, seconds: float) -> None:
    """Start ``one()`` ``rate`` times a second for ``seconds``, whatever the answers; wait for all."""
    tasks = []
    start = time.perf_counter()
    for index in range(int(rate * seconds)):
        delay = start + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)


def ms(latencies: list[float]) -> str:
    """p50 / p99 in milliseconds."""
    if not latencies:
        return "-"
    return " / ".join(f"{np.percentile(latencies, q) * 1000:.1f}" for q in (50, 99))


def run_overload(args) -> None:
    capacity = 1000.0 / args.sleep_ms
    rate = capacity * args.load_factor
    policy = (f"dynamic_batching {{ default_queue_policy {{ timeout_action: REJECT default_timeout_microseconds: "
              f"{int(args.timeout_ms * 1000)} allow_timeout_override: true max_queue_size: {args.queue_size} }} }}")
    print(f"overload: python model sleeping {args.sleep_ms:g} ms per request, 1 instance, batch 1 "
          f"(capacity {capacity:.0f} req/s); {policy}; open-loop {rate:.0f} req/s ({args.load_factor:g}x) for "
          f"{args.duration:g} s per protocol; a request unanswered after {args.answer_within_s:g} s counts as "
          "unanswered\n")
    print("| protocol | sent | answered | succeeded | 503 queue full | 503 timeout expired | other | unanswered | "
          "server: success / REJECTED / CANCELED | stale executions | success p50 / p99 ms | timeout + 1 run ms | "
          "timeout expired: p50 / p99 ms | server queue ms, mean of successes | RSS MB start / peak / end | "
          "load average |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        write_python_model(repo, "sleeper", SLEEPER_PY.format(sleep_s=args.sleep_ms / 1000), extra=policy)
        trace_file = Path(tmp) / "trace.json"
        tracing = ("--trace-config", "level=TIMESTAMPS", "--trace-config", f"rate={args.trace_every}",
                   "--trace-config", f"triton,file={trace_file}") if args.trace_every else ()
        server = Server(repo, Path(tmp) / "server.log", tracing)
        windows = {}
        try:
            for protocol in args.protocols:
                before = server.metrics("sleeper")
                sampler = Sampler(server, 0.1)
                sampler.start()
                time.sleep(0.5)
                loader = overload_grpc if protocol == "grpc" else overload_http
                port = server.grpc_port if protocol == "grpc" else server.http_port
                started_ns = time.monotonic_ns()
                outcomes = asyncio.run(loader(port, rate, args.duration, args.answer_within_s))
                windows[protocol] = (started_ns, time.monotonic_ns())
                time.sleep(2.0)
                samples = sampler.stop()
                after = server.metrics("sleeper")
                print_overload_row(protocol, outcomes, before, after, samples, args)
                others = {k: v for k, v in outcomes.kinds.items() if k.startswith("other")}
                for kind, count in others.items():
                    print(f"  {protocol} {kind}: {count}")
        finally:
            code = server.stop()
        print(f"\nserver exit status after SIGTERM: {code}")
        if args.trace_every:
            print_server_latencies(trace_file, windows, args)


def server_timelines(trace_file: Path) -> list[dict[str, int]]:
    """Every traced request's timestamps (name -> steady-clock ns) from Triton's trace file."""
    timelines: dict[int, dict[str, int]] = {}
    for entry in json.loads(trace_file.read_text()):
        for stamp in entry.get("timestamps", ()):
            timelines.setdefault(entry["id"], {})[stamp["name"]] = stamp["ns"]
    return list(timelines.values())


def print_server_latencies(trace_file: Path, windows: dict[str, tuple[int, int]], args) -> None:
    """The server's own view of the traced requests (every ``--trace-every``-th), per protocol:
    from the request's arrival in the Python server (REQUEST_START, after the transport has read
    it and handed it over) to its end (REQUEST_END, the response handed to the transport), the
    time in the queue and the model's time. The client's latency adds what happens before and
    after: the transport's read, its wait to hand the request to Python, the reply's write, and
    the client's own wait for a CPU."""
    timelines = server_timelines(trace_file)
    print(f"\nserver-side, from its trace (every {args.trace_every}th request): ms p50 / p99 / max")
    print("| protocol | traced successes | REQUEST_START to REQUEST_END | queue (QUEUE_START to COMPUTE_START) | "
          "model (COMPUTE_START to COMPUTE_END) | after the model (COMPUTE_END to last stamp) | "
          "traced rejections at the deadline: REQUEST_START to REQUEST_END |")
    print("|---|---|---|---|---|---|---|")

    def spread(values: list[float]) -> str:
        if not values:
            return "-"
        return " / ".join(f"{v / 1e6:.1f}" for v in (np.percentile(values, 50), np.percentile(values, 99), max(values)))

    for protocol, (start, end) in windows.items():
        mine = [t for t in timelines if "REQUEST_END" in t and start <= t.get("REQUEST_START", -1) <= end]
        ran = [t for t in mine if "COMPUTE_START" in t]
        # refused when the queue was full: at once; timed out: after half the timeout at least
        timed_out = [t for t in mine if "COMPUTE_START" not in t
                     and t["REQUEST_END"] - t["REQUEST_START"] >= args.timeout_ms * 1e6 / 2]
        print(f"| {protocol} | {len(ran)} | {spread([t['REQUEST_END'] - t['REQUEST_START'] for t in ran])} | "
              f"{spread([t['COMPUTE_START'] - t['QUEUE_START'] for t in ran])} | "
              f"{spread([t['COMPUTE_END'] - t['COMPUTE_START'] for t in ran])} | "
              f"{spread([max(t.values()) - t['COMPUTE_END'] for t in ran])} | "
              f"{spread([t['REQUEST_END'] - t['REQUEST_START'] for t in timed_out])} |")


def print_overload_row(protocol: str, outcomes: Outcomes, before: dict, after: dict, samples: list[Sample],
                       args) -> None:
    kinds = outcomes.kinds
    sent = sum(kinds.values())
    other = sum(v for k, v in kinds.items() if k.startswith("other"))

    def delta(name: str) -> str:
        return "n/a" if name not in after else f"{after[name] - before.get(name, 0):.0f}"

    server = " / ".join(delta(n) for n in ("nv_inference_request_success", "nv_inference_request_failure:REJECTED",
                                           "nv_inference_request_failure:CANCELED"))
    rss = [s.rss_mb for s in samples]
    successes = after.get("nv_inference_request_success", 0) - before.get("nv_inference_request_success", 0)
    queued_us = after.get("nv_inference_queue_duration_us", 0) - before.get("nv_inference_queue_duration_us", 0)
    queue_ms = f"{queued_us / successes / 1000:.1f}" if successes else "-"
    print(f"| {protocol} | {sent} | {sent - kinds['unanswered']} | {kinds['ok']} | {kinds['full']} | "
          f"{kinds['expired']} | {other} | {kinds['unanswered']} | {server} | "
          f"{delta('tritonctl_inference_stale_exec_count')} | {ms(outcomes.latencies['ok'])} | "
          f"{args.timeout_ms + args.sleep_ms:g} | {ms(outcomes.latencies['expired'])} | {queue_ms} | "
          f"{rss[0]:.0f} / {max(rss):.0f} / {rss[-1]:.0f} | {os.getloadavg()[0]:.1f} |", flush=True)


# ---- soak ---------------------------------------------------------------------------------------

class SoakTraffic:
    """Mixed valid requests on both protocols through tritonclient's asyncio clients."""

    def __init__(self, server: Server, rate: float, seed: int = 0):
        self.server, self.rate = server, rate
        self.random = random.Random(seed)
        self.counts: Counter = Counter()
        self.errors: Counter = Counter()
        self.add_sub = {n: np.full((2, 16), i + 1, dtype=np.float32) for i, n in enumerate(("INPUT0", "INPUT1"))}
        self.echo = np.arange(4, dtype=np.float32).reshape(1, 4)

    def _inputs(self, module, model: str):
        if model == "echo":
            tensor = module.InferInput("INPUT0", [1, 4], "FP32")
            tensor.set_data_from_numpy(self.echo)
            return [tensor], self.echo
        tensors = []
        for name, data in self.add_sub.items():
            tensor = module.InferInput(name, list(data.shape), "FP32")
            tensor.set_data_from_numpy(data)
            tensors.append(tensor)
        return tensors, self.add_sub["INPUT0"] + self.add_sub["INPUT1"]

    async def one(self, protocol: str, client, module) -> None:
        roll = self.random.random()
        model = self.random.choice(["add_sub", "echo", "reloaded"])
        what = ("infer" if roll < 0.7 else "metadata" if roll < 0.8 else "config" if roll < 0.87
                else "statistics" if roll < 0.95 else "ready")
        key = f"{protocol} {what}"
        try:
            if what == "infer":
                inputs, expected = self._inputs(module, model)
                result = await client.infer(model, inputs)
                if not np.array_equal(result.as_numpy("OUTPUT0"), expected):
                    raise ValueError(f"wrong OUTPUT0 from {model}")
            elif what == "metadata":
                await client.get_model_metadata(model)
            elif what == "config":
                await client.get_model_config(model)
            elif what == "statistics":
                await client.get_inference_statistics(model)
            elif not await client.is_model_ready(model):
                raise ValueError(f"{model} not ready")
            self.counts[key] += 1
        except Exception as exc:  # every error is counted by kind and reported
            self.errors[f"{key} {model}: {type(exc).__name__}: {str(exc)[:160]}"] += 1

    async def run(self, seconds: float, reload_s: float) -> None:
        import tritonclient.grpc.aio as grpc_aio
        import tritonclient.http.aio as http_aio

        grpc_client = grpc_aio.InferenceServerClient(f"127.0.0.1:{self.server.grpc_port}")
        http_client = http_aio.InferenceServerClient(f"127.0.0.1:{self.server.http_port}", conn_limit=32)
        clients = [("grpc", grpc_client, grpc_aio), ("http", http_client, http_aio)]
        tasks: set[asyncio.Task] = set()
        start = time.perf_counter()
        next_reload = start + reload_s
        index = reloads = 0
        try:
            while (now := time.perf_counter()) < start + seconds:
                if now >= next_reload:
                    next_reload += reload_s
                    reloads += 1
                    task = asyncio.ensure_future(self.reload(*clients[reloads % 2][:2]))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                protocol, client, module = clients[index % 2]
                task = asyncio.ensure_future(self.one(protocol, client, module))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                index += 1
                delay = start + index / self.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            await asyncio.gather(*list(tasks))
        finally:
            await grpc_client.close()
            await http_client.close()

    async def reload(self, protocol: str, client) -> None:
        try:
            await client.load_model("reloaded")
            self.counts[f"{protocol} reload"] += 1
        except Exception as exc:
            self.errors[f"{protocol} reload: {type(exc).__name__}: {str(exc)[:160]}"] += 1


def run_soak(args) -> None:
    seconds = args.soak_minutes * 60
    print(f"soak: {args.soak_minutes:g} min, {args.rate:g} req/s in all (gRPC and HTTP in turn; 70% inference over "
          f"add_sub (onnxruntime), echo (python) and reloaded (onnxruntime), the rest metadata, config, statistics, "
          f"readiness), 'reloaded' loaded again through the repository API every {args.reload_s:g} s; server "
          f"sampled every {args.sample_s:g} s\n")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        write_add_sub(repo, "add_sub")
        write_add_sub(repo, "reloaded")
        write_python_model(repo, "echo", ECHO_PY, max_batch=8, extra="dynamic_batching { }")
        server = Server(repo, Path(tmp) / "server.log")
        try:
            sampler = Sampler(server, args.sample_s)
            sampler.start()
            traffic = SoakTraffic(server, args.rate)
            began = time.perf_counter()
            asyncio.run(traffic.run(seconds, args.reload_s))
            elapsed = time.perf_counter() - began
            time.sleep(args.sample_s)
            samples = sampler.stop()
        finally:
            code = server.stop()
        print_soak(samples, traffic, elapsed, code)


def print_soak(samples: list[Sample], traffic: SoakTraffic, elapsed: float, code: int) -> None:
    warm = next((s for s in samples if s.at_s >= samples[-1].at_s / 10), samples[0])
    peak = max(samples, key=lambda s: s.rss_mb)
    print("| point | at s | RSS MB | open fds | threads |")
    print("|---|---|---|---|---|")
    for label, sample in (("start", samples[0]), ("warm (first tenth)", warm), ("RSS peak", peak),
                          ("end", samples[-1])):
        print(f"| {label} | {sample.at_s:.0f} | {sample.rss_mb:.1f} | {sample.fds} | {sample.threads} |")
    end = samples[-1]
    print(f"\ngrowth warm -> end: RSS {100 * (end.rss_mb - warm.rss_mb) / warm.rss_mb:+.2f}%, fds "
          f"{end.fds - warm.fds:+d}, threads {end.threads - warm.threads:+d}; start -> end: RSS "
          f"{100 * (end.rss_mb - samples[0].rss_mb) / samples[0].rss_mb:+.2f}%; fds range "
          f"{min(s.fds for s in samples)}-{max(s.fds for s in samples)}, threads range "
          f"{min(s.threads for s in samples)}-{max(s.threads for s in samples)}")
    total = sum(traffic.counts.values())
    print(f"requests answered correctly: {total} in {elapsed:.0f} s ({total / elapsed:.1f}/s); "
          + ", ".join(f"{k} {v}" for k, v in sorted(traffic.counts.items())))
    print(f"errors: {sum(traffic.errors.values())}")
    for kind, count in traffic.errors.most_common():
        print(f"  {count} x {kind}")
    # RSS over time, one line per tenth of the run, for the record
    step = max(len(samples) // 10, 1)
    print("RSS MB over time: " + ", ".join(f"{s.at_s:.0f}s {s.rss_mb:.1f}" for s in samples[::step]))
    print(f"server exit status after SIGTERM: {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", choices=["overload", "soak"], default=["overload", "soak"])
    parser.add_argument("--protocols", nargs="+", choices=["grpc", "http"], default=["grpc", "http"])
    parser.add_argument("--sleep-ms", type=float, default=10.0, help="overload: the model's time per request")
    parser.add_argument("--load-factor", type=float, default=4.0, help="overload: arrival rate / capacity")
    parser.add_argument("--duration", type=float, default=20.0, help="overload: seconds of load per protocol")
    parser.add_argument("--queue-size", type=int, default=8, help="overload: max_queue_size")
    parser.add_argument("--timeout-ms", type=float, default=50.0, help="overload: default_timeout_microseconds / 1000")
    parser.add_argument("--answer-within-s", type=float, default=10.0,
                        help="overload: a request not answered in this time counts as unanswered")
    parser.add_argument("--trace-every", type=int, default=0,
                        help="overload: trace every N-th request (Triton's trace, TIMESTAMPS) and show the "
                             "server's own latencies beside the client's; 0: no trace")
    parser.add_argument("--soak-minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=100.0, help="soak: requests per second, both protocols")
    parser.add_argument("--reload-s", type=float, default=30.0, help="soak: seconds between reloads")
    parser.add_argument("--sample-s", type=float, default=5.0, help="soak: seconds between samples of the server")
    args = parser.parse_args()
    if "overload" in args.parts:
        run_overload(args)
    if "soak" in args.parts:
        if "overload" in args.parts:
            print()
        run_soak(args)


if __name__ == "__main__":
    main()
