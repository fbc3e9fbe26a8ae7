"""A TorchScript MLP served by `tritonctl serve` (PyTorch backend) at saturation, against the best
throughput in-process torch reaches with the same model in the same run, and against the same
MLP as ONNX on the onnxruntime backend behind the same front end.

    python benchmarks/bench_torch.py                       # 256-1024-1024-256, concurrency 1 and 32, gRPC, 3 runs
    python benchmarks/bench_torch.py --hidden 4096         # 256-4096-4096-256: compute-bound
    python benchmarks/bench_torch.py --concurrency 16 64 --runs 5 --protocol http
    python benchmarks/bench_torch.py --device cuda         # KIND_GPU instances against torch on the GPU

The model is bench_serve.py's mlp (256 -> H -> H -> 256, Linear+ReLU; H = --hidden, 1024 there),
served with dynamic batching (max_batch_size 32, max_queue_delay 500 us) on one CPU instance:
as TorchScript with torch's default intra-op threads and, in a second server process (the count
is process-wide), with INTRA_OP_THREAD_COUNT 1 on one and on two instances; and as ONNX (torch.onnx.export of the same
weights) in the first server. Each server idles while another is measured. Load: `tritonctl
perf`'s load generator (batch-1 requests, this process) at each concurrency, or with `--load raw`
bench_serve.py's (one request serialized once and sent again and again), which takes less of the
CPU the served model shares. The in-process
limit: the scripted module called under torch.inference_mode in a fresh process, at batch 1, 8,
16 and 32, with 1 and 2 intra-op threads and OpenMP's active and passive wait policies: rows per
second of the best combination (1, 2 and torch's default thread count). Servers and limit take
turns, `--runs` times; the table shows medians and the ratio of the medians.

With `--device cuda` the TorchScript models run on KIND_GPU instances of GPU 0 (one and two
instances; no ONNX model: onnxruntime's CUDA provider is a separate install) and the in-process
limit calls the module on the GPU with each batch copied from host memory and the result copied
back, as the server must: the best over batch 1, 8, 16 and 32.
"""

from __future__ import annotations

import argparse
import json
import os
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
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_serve's load generator, for --load raw

CONFIG = """
backend: "{backend}"
max_batch_size: 32
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "{output}" data_type: TYPE_FP32 dims: [ 256 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 500 }}
instance_group [ {{ kind: {kind} count: {count} }} ]
{extra}"""
ONE_THREAD = 'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }'
# model -> (server process, label, instance count, parameters)
CPU_MODELS = {"mlp_pt": ("default", "TorchScript, torch's threads", 1, ""),
              "mlp_pt_1thread": ("one-thread", "TorchScript, 1 intra-op thread", 1, ONE_THREAD),
              "mlp_pt_1thread_x2": ("one-thread", "TorchScript, 1 thread, 2 instances", 2, ONE_THREAD),
              "mlp_onnx": ("default", "ONNX (onnxruntime backend)", 1, "")}
GPU_MODELS = {"mlp_pt": ("default", "TorchScript, KIND_GPU", 1, ""),
              "mlp_pt_x2": ("default", "TorchScript, KIND_GPU, 2 instances", 2, "")}


def make_repo(repo: Path, hidden: int, models: dict, kind: str) -> Path:
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 256)).eval()
    for name, (_, _, count, extra) in models.items():
        (repo / name / "1").mkdir(parents=True)
        if name == "mlp_onnx":
            torch.onnx.export(mlp, (torch.randn(2, 256),), str(repo / name / "1" / "model.onnx"), input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
            config = CONFIG.format(backend="onnxruntime", output="y", kind="KIND_CPU", count=count, extra=extra)
        else:
            torch.jit.script(mlp).save(str(repo / name / "1" / "model.pt"))
            config = CONFIG.format(backend="pytorch", output="y__0", kind=kind, count=count, extra=extra)
        (repo / name / "config.pbtxt").write_text(config)
    return repo / "mlp_pt" / "1" / "model.pt"


def in_process_best(model_path: Path, seconds: float, device: str) -> tuple[float, str]:
    """Rows per second of the module called directly, best over batch sizes, threads and OpenMP's
    wait policy (each policy in a fresh process: OpenMP reads it when torch loads)."""
    found = []
    for policy in ("ACTIVE", "PASSIVE") if device == "cpu" else ("PASSIVE",):
        done = subprocess.run([sys.executable, __file__, "--in-process", str(model_path), "--limit-seconds",
                               str(seconds), "--device", device], capture_output=True, text=True, check=True,
                              env={**os.environ, "OMP_WAIT_POLICY": policy})
        rate, where = json.loads(done.stdout.strip().splitlines()[-1])
        found.append((rate, f"{where}, OMP_WAIT_POLICY={policy}" if device == "cpu" else where))
    rate, where = max(found)
    others = [f"{other:,.0f} at {other_where}" for other, other_where in found if other_where != where]
    return rate, where + (f" (else {'; '.join(others)})" if others else "")


def measure_in_process(model_path: Path, seconds: float, device: str) -> None:
    import torch

    module = torch.jit.load(str(model_path), map_location=device).eval()
    best = (0.0, "")
    thread_counts = sorted({1, 2, torch.get_num_threads()}) if device == "cpu" else [torch.get_num_threads()]
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for batch in (1, 8, 16, 32):
            x = torch.randn(batch, 256)
            with torch.inference_mode():
                for _ in range(20):
                    module(x.to(device)).cpu()
                calls, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds:
                    module(x.to(device)).cpu()  # .cpu() waits for the GPU's work
                    calls += 1
                rate = calls * batch / (time.perf_counter() - start)
            best = max(best, (rate, f"batch {batch}, {threads} thread(s)" if device == "cpu" else f"batch {batch}"))
    print(json.dumps(best))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(repo: Path, models: list[str]) -> tuple[subprocess.Popen, str, str]:
    import tritonclient.http as httpclient

    http_port, grpc_port = free_port(), free_port()
    process = subprocess.Popen([sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-port", str(http_port),
                                "--grpc-port", str(grpc_port), "--metrics-port", "-1", "--model-control-mode",
                                "explicit", *[a for m in models for a in ("--load-model", m)]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    deadline = time.monotonic() + 120
    while True:
        try:
            if all(client.is_model_ready(m) for m in models):
                break
        except Exception:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("tritonctl serve did not start")
        time.sleep(0.2)
    return process, f"127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"


def batch_counts(http_url: str, model: str) -> tuple[int, int, int, int]:
    """The model's inference and execution counts, and its compute_infer time and count."""
    import tritonclient.http as httpclient

    stats = httpclient.InferenceServerClient(http_url).get_inference_statistics(model)["model_stats"][0]
    compute = stats["inference_stats"]["compute_infer"]
    return stats["inference_count"], stats["execution_count"], compute["ns"], compute["count"]


def perf_load(url: str, model: str, outputs: list[str], protocol: str, concurrency: int) -> tuple[float, float]:
    """Throughput and p99 ms from `tritonctl perf`'s load generator (stable windows of 2 s)."""
    from tritonctl.perf.options import PerfOptions
    from tritonctl.perf.run import run_perf

    result = run_perf(PerfOptions(model, url=url, protocol=protocol, concurrency=(concurrency,),
                                  measurement_interval_ms=2000, stability_percentage=10, max_trials=6,
                                  warmup_requests=200))
    level = result.levels[0]
    return level.throughput, level.percentiles_us[99] / 1000


def raw_load(url: str, model: str, outputs: list[str], protocol: str, concurrency: int,
             seconds: float = 6.0) -> tuple[float, float]:
    """Throughput and p99 ms from bench_serve.py's load generator: one request serialized once and
    sent again and again (1 s of warm-up, then ``seconds``), which takes the machine's CPU less."""
    import numpy as np

    from bench_serve import Workload, grpc_request_bytes, http_request_bytes, run_load

    request = {"x": np.random.default_rng(0).random((1, 256), dtype=np.float32)}
    workload = Workload(model, None, request, outputs, "")
    payload = grpc_request_bytes(workload) if protocol == "grpc" else http_request_bytes(workload)
    port = int(url.rsplit(":", 1)[1])
    run_load(protocol, port, payload, concurrency, 1.0)
    latencies = sorted(run_load(protocol, port, payload, concurrency, seconds))
    return len(latencies) / seconds, latencies[int(0.99 * (len(latencies) - 1))] * 1000


LOADS = {"perf": perf_load, "raw": raw_load}


def served_rate(urls: tuple[str, str], model: str, protocol: str, concurrency: int,
                load: str = "perf") -> tuple[float, float, float, float]:
    """Throughput, p99 ms, the average batch and the milliseconds of an execution's compute."""
    import tritonclient.http as httpclient

    http_url, grpc_url = urls
    outputs = [o["name"] for o in httpclient.InferenceServerClient(http_url).get_model_metadata(model)["outputs"]]
    before = batch_counts(http_url, model)
    rate, p99 = LOADS[load](grpc_url if protocol == "grpc" else http_url, model, outputs, protocol, concurrency)
    inferences, executions, compute_ns, compute_count = (b - a for a, b in zip(before, batch_counts(http_url, model)))
    return rate, p99, inferences / max(executions, 1), compute_ns / max(compute_count, 1) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1024, help="the MLP's hidden width")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", choices=sorted(LOADS), default="perf",
                        help="the load generator: `tritonctl perf` (perf), or one request serialized once and sent "
                             "again and again (raw, bench_serve.py's), which leaves the served model more CPU")
    parser.add_argument("--limit-seconds", type=float, default=1.0, help="time per in-process combination")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: KIND_GPU instances, and the in-process limit on the GPU")
    parser.add_argument("--in-process", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_process:
        measure_in_process(Path(args.in_process), args.limit_seconds, args.device)
        return
    models = CPU_MODELS if args.device == "cpu" else GPU_MODELS
    with tempfile.TemporaryDirectory(prefix="bench-torch-") as tmp:
        repo = Path(tmp) / "repo"
        model_path = make_repo(repo, args.hidden, models, "KIND_CPU" if args.device == "cpu" else "KIND_GPU")
        groups: dict[str, list[str]] = {}
        for model, (server, *_) in models.items():
            groups.setdefault(server, []).append(model)
        servers = {server: start_server(repo, models) for server, models in groups.items()}
        try:
            limits = []
            served = {(model, c): [] for model in models for c in args.concurrency}
            for _ in range(args.runs):
                limits.append(in_process_best(model_path, args.limit_seconds, args.device))
                for model, (server, *_) in models.items():
                    _, http_url, grpc_url = servers[server]
                    for concurrency in args.concurrency:
                        served[(model, concurrency)].append(
                            served_rate((http_url, grpc_url), model, args.protocol, concurrency, args.load))
        finally:
            for process, _, _ in servers.values():
                process.send_signal(signal.SIGTERM)
                process.wait(30)
    import torch

    limit = statistics.median(rate for rate, _ in limits)
    gpu = f", {torch.cuda.get_device_name(0)}" if args.device == "cuda" else ""
    print(f"mlp 256-{args.hidden}-{args.hidden}-256; torch {torch.__version__}, {os.cpu_count()} CPUs{gpu}, "
          f"load average {os.getloadavg()[0]:.1f} at the end; {args.runs} runs, medians")
    print(f"in-process torch, best: {limit:,.0f} rows/s (runs: "
          f"{'; '.join(f'{r:,.0f} at {where}' for r, where in limits)})")
    print(f"| tritonctl serve ({args.protocol}) | concurrency | infer/s | p99 ms | avg batch | compute ms/batch "
          "| vs in-process torch |")
    print("|---|---|---|---|---|---|---|")
    for (model, concurrency), points in served.items():
        rate, p99, batch, compute_ms = (statistics.median(point[i] for point in points) for i in range(4))
        print(f"| {models[model][1]} | {concurrency} | {rate:,.0f} | {p99:.2f} | {batch:.1f} | {compute_ms:.2f} "
              f"| {rate / limit:.2f}x |")


if __name__ == "__main__":
    main()
