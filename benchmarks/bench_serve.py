"""Throughput and latency of `tritonctl serve` against a naive per-request server and the
in-process onnxruntime speed limit, with one load generator for every server.

    python benchmarks/bench_serve.py                       # mlp, gRPC + HTTP binary, concurrency 1 8 32
    python benchmarks/bench_serve.py --duration 15 --delay-us 0 --servers tritonctl

Each server runs in its own process; the load generator (asyncio, pre-serialized requests,
no tritonclient in the loop so the client costs as little as possible) runs in this one.
Reported per point: infer/s, p50/p99 latency, average batch size (from the server's
statistics), server CPU in percent of one core and in microseconds per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def build_mlp(path: Path) -> None:
    """256 -> 1024 -> 1024 -> 256 (Gemm+Relu, Gemm+Relu, Gemm), dynamic batch: the anchor's mlp."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    dims = [256, 1024, 1024, 256]
    inits, nodes, x = [], [], "INPUT0"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        inits += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"W{i}"),
                  numpy_helper.from_array((rng.standard_normal(b) * 0.01).astype(np.float32), f"B{i}")]
        last = i == len(dims) - 2
        y = "OUTPUT0" if last else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], [y if last else f"g{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [y]))
        x = y
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 256])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 256])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def mlp_repository(root: Path, delay_us: int) -> Path:
    build_mlp(root / "mlp" / "1" / "model.onnx")
    (root / "mlp" / "config.pbtxt").write_text(f"""name: "mlp"
backend: "onnxruntime"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters [ {{ key: "intra_op_thread_count" value: {{ string_value: "2" }} }} ]
""")
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def wait_ready(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"no server became ready on port {port}")


# ---- requests, pre-serialized once ------------------------------------------------------------

def grpc_request_bytes(model: str, row: np.ndarray) -> bytes:
    from tritonclient.grpc import service_pb2

    message = service_pb2.ModelInferRequest(model_name=model)
    message.inputs.add(name="INPUT0", datatype="FP32", shape=list(row.shape))
    message.outputs.add(name="OUTPUT0")
    message.raw_input_contents.append(row.tobytes())
    return message.SerializeToString()


def http_request_bytes(model: str, row: np.ndarray) -> bytes:
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(row.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": row.nbytes}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    body = header + row.tobytes()
    return (f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def grpc_worker(port: int, payload: bytes, stop_at: float, latencies: list) -> None:
    import grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            await call(payload)
            latencies.append(time.perf_counter() - start)


async def http_worker(port: int, payload: bytes, stop_at: float, latencies: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.decode(errors="replace"))
            length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
    finally:
        writer.close()


async def load(protocol: str, port: int, payload: bytes, concurrency: int, seconds: float) -> list[float]:
    worker = grpc_worker if protocol == "grpc" else http_worker
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    await asyncio.gather(*[worker(port, payload, stop_at, latencies) for _ in range(concurrency)])
    return latencies


def run_point(protocol: str, port: int, payload: bytes, concurrency: int, seconds: float) -> list[float]:
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(load(protocol, port, payload, concurrency, seconds))


def model_counts(http_port: int) -> tuple[int, int] | None:
    try:
        stats = json.load(urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/models/mlp/stats", timeout=5))
    except OSError:
        return None
    entry = stats["model_stats"][0]
    return int(entry["inference_count"]), int(entry["execution_count"])


# ---- servers ------------------------------------------------------------------------------------

class Server:
    def __init__(self, name: str, command: list[str], http_port: int, grpc_port: int | None):
        self.name, self.http_port, self.grpc_port = name, http_port, grpc_port
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env=dict(os.environ, PYTHONPATH=str(ROOT)))
        wait_ready(http_port)

    def port(self, protocol: str) -> int | None:
        return self.http_port if protocol == "http" else self.grpc_port

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_server(name: str, repo: Path) -> Server:
    http_port = free_port()
    if name == "tritonctl":
        grpc_port = free_port()
        return Server(name, [sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", str(http_port),
                             "--grpc-port", str(grpc_port), "--metrics-port", "-1"], http_port, grpc_port)
    if name == "naive":
        return Server(name, [sys.executable, str(ROOT / "benchmarks" / "naive_server.py"),
                             str(repo / "mlp" / "1" / "model.onnx"), str(http_port)], http_port, None)
    raise ValueError(name)


def in_process_limit(model: Path, seconds: float) -> dict[int, float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    result = {}
    for batch in (1, 64):
        x = np.random.default_rng(0).standard_normal((batch, 256)).astype(np.float32)
        rows, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            session.run(None, {"INPUT0": x})
            rows += batch
        result[batch] = rows / (time.perf_counter() - start)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measured point")
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--protocols", nargs="+", default=["grpc", "http"], choices=["grpc", "http"])
    parser.add_argument("--servers", nargs="+", default=["tritonctl", "naive"], choices=["tritonctl", "naive"])
    parser.add_argument("--delay-us", type=int, default=2000, help="max_queue_delay_microseconds of the mlp model")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        repo = mlp_repository(Path(tmp) / "repo", args.delay_us)
        limit = in_process_limit(repo / "mlp" / "1" / "model.onnx", 2.0)
        print(f"in-process onnxruntime (2 threads): batch 1 {limit[1]:,.0f} rows/s, batch 64 {limit[64]:,.0f} rows/s")
        row = np.random.default_rng(1).standard_normal((1, 256)).astype(np.float32)
        payloads = {"grpc": grpc_request_bytes("mlp", row), "http": http_request_bytes("mlp", row)}
        print(f"\nmlp, batch-1 requests, max_queue_delay {args.delay_us} us, {args.duration:g} s per point\n")
        print("| server | protocol | concurrency | infer/s | p50 ms | p99 ms | avg batch | server CPU % | "
              "server CPU us/req |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in args.servers:
            server = start_server(name, repo)
            try:
                for protocol in args.protocols:
                    port = server.port(protocol)
                    if port is None:
                        continue
                    for concurrency in args.concurrency:
                        run_point(protocol, port, payloads[protocol], concurrency, args.warmup)
                        counts_before = model_counts(server.http_port)
                        cpu_before, start = cpu_seconds(server.process.pid), time.perf_counter()
                        latencies = run_point(protocol, port, payloads[protocol], concurrency, args.duration)
                        elapsed = time.perf_counter() - start
                        cpu = cpu_seconds(server.process.pid) - cpu_before
                        counts_after = model_counts(server.http_port)
                        batch = "1.00"
                        if counts_before and counts_after and counts_after[1] > counts_before[1]:
                            batch = f"{(counts_after[0] - counts_before[0]) / (counts_after[1] - counts_before[1]):.2f}"
                        latencies.sort()
                        count = len(latencies)
                        print(f"| {name} | {protocol} | {concurrency} | {count / elapsed:,.0f} | "
                              f"{latencies[count // 2] * 1e3:.2f} | {latencies[int(count * 0.99)] * 1e3:.2f} | {batch} | "
                              f"{cpu / elapsed * 100:.0f} | {cpu / count * 1e6:.0f} |", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
