"""Parallel instances of a CPU-bound Python model: `count: 2` against `count: 1`, with each
instance in a stub process of its own (`--python-isolation process`, as Triton runs Python
models) and with every instance in the server's process (`--python-isolation thread`).

    python benchmarks/bench_python_stub.py                      # 4 servers, gRPC, concurrency 4, 3 runs
    python benchmarks/bench_python_stub.py --work-ms 2 --concurrency 8 --seconds 5 --runs 5

The model does about `--work-ms` of pure-Python work per request (a loop calibrated in this
process before the servers start) and answers one small tensor: what one GIL serializes. All
four servers run at once in their own processes, idle while another is measured; runs take turns
so that the shared machine's drifts hit them alike, and the table shows the median run. The load
generator is bench_serve's (asyncio, pre-serialized requests) in this process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import free_port, run_load, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.iterations = int(json.loads(args["model_config"])["parameters"]["ITERATIONS"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            total = 0
            for i in range(self.iterations):
                total += i * i
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([total % 1000], np.int64))]))
        return responses
'''


def calibrate(work_ms: float) -> int:
    """Loop iterations that take ``work_ms`` here (the best of several tries)."""
    iterations = 100_000
    best = min(_loop_seconds(iterations) for _ in range(5))
    return max(1, int(iterations * work_ms / 1000 / best))


def _loop_seconds(iterations: int) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i * i
    return time.perf_counter() - start


def write_repository(root: Path, count: int, iterations: int) -> Path:
    model = root / "cpu"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL)
    (model / "config.pbtxt").write_text(f'''name: "cpu"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] }} ]
instance_group [ {{ count: {count} kind: KIND_CPU }} ]
parameters {{ key: "ITERATIONS" value {{ string_value: "{iterations}" }} }}
''')
    return root


def request_bytes() -> bytes:
    from tritonclient.grpc import service_pb2

    message = service_pb2.ModelInferRequest(model_name="cpu")
    message.inputs.add(name="IN", datatype="INT32", shape=[1])
    message.raw_input_contents.append(np.array([1], np.int32).tobytes())
    return message.SerializeToString()


class Server:
    def __init__(self, root: Path, isolation: str, count: int, iterations: int):
        self.name = f"{isolation} count:{count}"
        self.http_port, self.grpc_port = free_port(), free_port()
        repo = write_repository(root / f"{isolation}-{count}", count, iterations)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", str(self.http_port),
             "--grpc-port", str(self.grpc_port), "--metrics-port", "-1", "--python-isolation", isolation],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        wait_ready(self.http_port, self.process)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-ms", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    iterations = calibrate(args.work_ms)
    print(f"# {iterations} loop iterations = {args.work_ms} ms of pure-Python work here; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    payload = request_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        servers = [Server(Path(tmp), isolation, count, iterations)
                   for isolation in ("process", "thread") for count in (1, 2)]
        try:
            runs: dict[str, list[tuple[float, float, float]]] = {s.name: [] for s in servers}
            for server in servers:  # warm-up
                run_load("grpc", server.grpc_port, payload, args.concurrency, 1.0)
            for _ in range(args.runs):
                for server in servers:
                    latencies = run_load("grpc", server.grpc_port, payload, args.concurrency, args.seconds)
                    latencies.sort()
                    runs[server.name].append((len(latencies) / args.seconds, latencies[len(latencies) // 2] * 1e3,
                                              latencies[int(len(latencies) * 0.99)] * 1e3))
        finally:
            for server in servers:
                server.stop()
    print(f"\nconcurrency {args.concurrency}, gRPC, median of {args.runs} runs of {args.seconds:g} s "
          f"(load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())})\n")
    print("| server | infer/s | p50 ms | p99 ms | infer/s of each run |")
    print("|---|---:|---:|---:|---|")
    median = {}
    for name, points in runs.items():
        middle = sorted(points)[len(points) // 2]
        median[name] = middle[0]
        print(f"| {name} | {middle[0]:.0f} | {middle[1]:.2f} | {middle[2]:.2f} | "
              f"{', '.join(f'{p[0]:.0f}' for p in points)} |")
    print()
    for isolation in ("process", "thread"):
        print(f"{isolation}: count 2 / count 1 = {median[f'{isolation} count:2'] / median[f'{isolation} count:1']:.2f}x")
    print(f"count 2: process / thread = {median['process count:2'] / median['thread count:2']:.2f}x; "
          f"count 1: process / thread = {median['process count:1'] / median['thread count:1']:.2f}x")


if __name__ == "__main__":
    main()
