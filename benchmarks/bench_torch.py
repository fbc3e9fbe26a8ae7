"""A TorchScript MLP served by `tritonctl serve` (PyTorch backend) at saturation, against the best
throughput in-process torch reaches with the same model in the same run.

    python benchmarks/bench_torch.py                       # concurrency 32, gRPC, 3 runs
    python benchmarks/bench_torch.py --concurrency 16 64 --runs 5 --protocol http

The model is the mlp of bench_serve.py as TorchScript (256 -> 1024 -> 1024 -> 256, Linear+ReLU),
served with dynamic batching (max_batch_size 32, max_queue_delay 500 us) on one CPU instance.
Load: `tritonctl perf`'s load generator (batch-1 requests, this process) at each concurrency.
The in-process limit: the scripted module called under torch.inference_mode at batch 1, 8, 16
and 32, rows per second, best batch. Server and limit take turns, `--runs` times; the table
shows medians and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIG = """
backend: "pytorch"
max_batch_size: 32
input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 256 ] } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def make_repo(repo: Path) -> Path:
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 256)).eval()
    (repo / "mlp_pt" / "1").mkdir(parents=True)
    torch.jit.script(mlp).save(str(repo / "mlp_pt" / "1" / "model.pt"))
    (repo / "mlp_pt" / "config.pbtxt").write_text(CONFIG)
    return repo / "mlp_pt" / "1" / "model.pt"


def in_process_best(model_path: Path, seconds: float) -> tuple[float, int]:
    """Rows per second of the module called directly, at its best batch size."""
    import torch

    module = torch.jit.load(str(model_path)).eval()
    best = (0.0, 0)
    for batch in (1, 8, 16, 32):
        x = torch.randn(batch, 256)
        with torch.inference_mode():
            for _ in range(20):
                module(x)
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                module(x)
                calls += 1
            rate = calls * batch / (time.perf_counter() - start)
        best = max(best, (rate, batch))
    return best


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(repo: Path) -> tuple[subprocess.Popen, str, str]:
    import tritonclient.http as httpclient

    http_port, grpc_port = free_port(), free_port()
    process = subprocess.Popen([sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", str(http_port),
                                "--grpc-port", str(grpc_port), "--metrics-port", "-1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    deadline = time.monotonic() + 120
    while True:
        try:
            if client.is_model_ready("mlp_pt"):
                break
        except Exception:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("tritonctl serve did not start")
        time.sleep(0.2)
    return process, f"127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"


def served_rate(url: str, protocol: str, concurrency: int) -> tuple[float, float]:
    from tritonctl.perf.options import PerfOptions
    from tritonctl.perf.run import run_perf

    result = run_perf(PerfOptions("mlp_pt", url=url, protocol=protocol, concurrency=(concurrency,),
                                  measurement_interval_ms=2000, stability_percentage=10, max_trials=6,
                                  warmup_requests=200))
    level = result.levels[0]
    return level.throughput, level.percentiles_us[99] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32])
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit-seconds", type=float, default=2.0, help="time per batch size in process")
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory(prefix="bench-torch-") as tmp:
        model_path = make_repo(Path(tmp) / "repo")
        process, http_url, grpc_url = start_server(Path(tmp) / "repo")
        url = grpc_url if args.protocol == "grpc" else http_url
        try:
            limits, served = [], {c: [] for c in args.concurrency}
            for _ in range(args.runs):
                limits.append(in_process_best(model_path, args.limit_seconds))
                for concurrency in args.concurrency:
                    served[concurrency].append(served_rate(url, args.protocol, concurrency))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    limit = statistics.median(rate for rate, _ in limits)
    best_batch = statistics.mode(batch for _, batch in limits)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; {args.runs} runs, medians")
    print(f"in-process torch, best batch {best_batch}: {limit:,.0f} rows/s "
          f"(runs: {', '.join(f'{r:,.0f}' for r, _ in limits)})")
    print(f"{'server':<28}{'conc':>6}{'infer/s':>12}{'p99 ms':>10}{'vs in-process':>15}")
    for concurrency, points in served.items():
        rate = statistics.median(r for r, _ in points)
        p99 = statistics.median(p for _, p in points)
        print(f"{'tritonctl serve ' + args.protocol:<28}{concurrency:>6}{rate:>12,.0f}{p99:>10.2f}{rate / limit:>14.2f}x")


if __name__ == "__main__":
    main()
