"""Throughput and latency of `tritonctl serve` against the real Triton, a naive per-request
server and the in-process onnxruntime speed limit, with one load generator for every server.

    python benchmarks/bench_serve.py                       # mlp: tritonctl, real Triton, naive; gRPC + HTTP binary
    python benchmarks/bench_serve.py --delay-us 0 --concurrency 1 --servers tritonctl triton
    python benchmarks/bench_serve.py --concurrency 1 32 --protocols grpc --servers tritonctl tritonctl-spin triton
    python benchmarks/bench_serve.py --delay-us 0 --concurrency 1 --protocols grpc --servers tritonctl floor-native triton
    python benchmarks/bench_serve.py --keep-cpus-awake --concurrency 1 --protocols grpc --servers tritonctl triton
    python benchmarks/bench_serve.py --protocols grpc --servers tritonctl-pymodel triton  # the same Python model
    python benchmarks/bench_serve.py --model embedder      # embedder (seq 32) against in-process onnxruntime
    python benchmarks/bench_serve.py --model blocks --concurrency 16 --protocols grpc  # 128 KiB requests, compute-bound
    python benchmarks/bench_serve.py --concurrency 32 --servers tritonctl --baseline /tmp/base  # against another checkout
    python benchmarks/bench_serve.py --ensemble --concurrency 32 --servers tritonctl --baseline /tmp/base  # via an ensemble

All servers run at once in their own processes (idle while another is measured) and every
point is measured `--runs` times, servers taking turns, so slow drifts of this shared machine
hit them alike; the tables show the median run. The load generator (asyncio, pre-serialized
batch-1 requests, no tritonclient in the loop so the client costs as little as possible) runs
in this process. Per point: infer/s, p50/p99 latency, average batch size (from the server's
statistics), server CPU (its whole process tree) in percent of one core and in microseconds per
request, and for tritonctl the CPU of its event-loop thread per request: the front end's cost.

The real Triton is the one `../shared/anchors/setup_triton.sh` installs (CPU, Python backend
only); it serves the same mlp.onnx through the anchor's `python_onnx_model` with the same
batching settings. The embedder comes from `../shared/models/make_models.py` (cached under
~/.cache/tritonctl/bench-models).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tritonctl" / "bench-models"
TRITON_HOME = Path(os.environ.get("TRITON_HOME", Path.home() / ".cache" / "tritonctl-anchor" / "triton_env"))
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
EMBEDDER_SEQ = 32


# ---- models -------------------------------------------------------------------------------------

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


def build_blocks(path: Path) -> None:
    """Ten blocks of 256 -> 1024 (Gemm+Relu) -> 256 (Gemm), dynamic batch: compute-bound, and each
    request of 128 rows carries 128 KiB, so what the server does with the bytes shows."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "INPUT0"
    for block in range(10):
        for step, (a, b) in enumerate(((256, 1024), (1024, 256))):
            w, bias = f"W{block}_{step}", f"B{block}_{step}"
            inits += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), w),
                      numpy_helper.from_array((rng.standard_normal(b) * 0.01).astype(np.float32), bias)]
            y = "OUTPUT0" if (block, step) == (9, 1) else f"h{block}_{step}"
            if step == 0:
                nodes += [helper.make_node("Gemm", [x, w, bias], [y + "_pre"]), helper.make_node("Relu", [y + "_pre"], [y])]
            else:
                nodes.append(helper.make_node("Gemm", [x, w, bias], [y]))
            x = y
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 256])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 256])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


BLOCKS_ROWS = 128  # rows per request: FP32 [128, 256], 128 KiB


def embedder_onnx() -> Path:
    """The BERT-like embedder of ../shared/models, exported once and cached."""
    path = CACHE / "embedder.onnx"
    if not path.is_file():
        sys.path.insert(0, str(SHARED / "models"))
        import make_models

        CACHE.mkdir(parents=True, exist_ok=True)
        print("exporting the embedder with ../shared/models/make_models.py (once, about a minute)", flush=True)
        make_models.generated_models(CACHE)
    return path


@dataclass
class Workload:
    name: str
    onnx: Path
    request: dict[str, np.ndarray]  # one batch-1 request
    outputs: list[str]
    config: str  # tritonctl's config.pbtxt


def mlp_workload(root: Path, delay_us: int) -> Workload:
    onnx_path = root / "mlp.onnx"
    build_mlp(onnx_path)
    config = f"""name: "mlp"
backend: "onnxruntime"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters [ {{ key: "intra_op_thread_count" value: {{ string_value: "2" }} }} ]
"""
    row = np.random.default_rng(1).standard_normal((1, 256)).astype(np.float32)
    return Workload("mlp", onnx_path, {"INPUT0": row}, ["OUTPUT0"], config)


def blocks_workload(root: Path, delay_us: int) -> Workload:
    onnx_path = root / "blocks.onnx"
    build_blocks(onnx_path)
    config = f"""name: "blocks"
backend: "onnxruntime"
max_batch_size: {4 * BLOCKS_ROWS}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters [ {{ key: "intra_op_thread_count" value: {{ string_value: "2" }} }} ]
"""
    rows = np.random.default_rng(1).standard_normal((BLOCKS_ROWS, 256)).astype(np.float32)
    return Workload("blocks", onnx_path, {"INPUT0": rows}, ["OUTPUT0"], config)


def embedder_workload(delay_us: int) -> Workload:
    config = f"""name: "embedder"
backend: "onnxruntime"
max_batch_size: 16
input [ {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
        {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }} ]
output [ {{ name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 768 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
    rng = np.random.default_rng(1)
    request = {"input_ids": rng.integers(0, 30522, (1, EMBEDDER_SEQ), dtype=np.int64),
               "attention_mask": np.ones((1, EMBEDDER_SEQ), dtype=np.int64)}
    return Workload("embedder", embedder_onnx(), request, ["last_hidden_state"], config)


def spinning(config: str) -> str:
    """``config`` with onnxruntime's intra-op threads spinning between runs, as in the anchor's
    python_onnx_model (tritonctl's onnxruntime backend lets them sleep unless told)."""
    return config.replace("parameters [ ", 'parameters [ { key: "session.intra_op.allow_spinning" '
                                           'value: { string_value: "1" } }, ', 1)


def write_repository(root: Path, workload: Workload, config: str, ensemble: bool = False) -> Path:
    """The workload's model; with ``ensemble``, as the one step (``<name>_step``) of an ensemble
    named ``<name>`` that passes its tensors through, so requests cross the ensemble scheduler."""
    from google.protobuf import text_format

    from tritonctl.repo_schema.schema import model_config_pb2

    step = f"{workload.name}_step" if ensemble else workload.name
    model_dir = root / step
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(workload.onnx, model_dir / "1" / "model.onnx")
    (model_dir / "config.pbtxt").write_text(config.replace(f'name: "{workload.name}"', f'name: "{step}"', 1))
    if ensemble:
        parsed = text_format.Parse(config, model_config_pb2().ModelConfig())
        wrapper = model_config_pb2().ModelConfig(name=workload.name, platform="ensemble",
                                                 max_batch_size=parsed.max_batch_size)
        wrapper.input.extend(parsed.input)
        wrapper.output.extend(parsed.output)
        only = wrapper.ensemble_scheduling.step.add(model_name=step, model_version=-1)
        for tensor in (*parsed.input, *parsed.output):
            (only.input_map if tensor in parsed.input else only.output_map)[tensor.name] = tensor.name
        (root / workload.name / "1").mkdir(parents=True, exist_ok=True)
        (root / workload.name / "config.pbtxt").write_text(text_format.MessageToString(wrapper))
    return root


def write_triton_repository(root: Path, workload: Workload, delay_us: int) -> Path:
    """The anchor's python_onnx_model serving the same mlp.onnx, renamed to the same model name."""
    anchor = SHARED / "anchors" / "python_onnx_model"
    model_dir = root / workload.name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(anchor / "1" / "model.py", model_dir / "1" / "model.py")
    shutil.copyfile(workload.onnx, model_dir / "1" / "mlp.onnx")
    config = (anchor / "config.pbtxt").read_text().replace('name: "onnx_mlp"', f'name: "{workload.name}"')
    (model_dir / "config.pbtxt").write_text(config.replace("max_queue_delay_microseconds: 2000",
                                                           f"max_queue_delay_microseconds: {delay_us}"))
    return root


class InProcess:
    """onnxruntime called directly (default threads; the server's 2 for blocks): the speed limit a
    server can approach."""

    def __init__(self, workload: Workload):
        import onnxruntime as ort

        self.workload = workload
        options = ort.SessionOptions()
        if workload.name == "blocks":  # as the server's instance: 2 threads that sleep between runs
            options.intra_op_num_threads = 2
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.cpu_us_per_row: list[float] = []  # of every rows_per_second call: this process's CPU
        self.session = ort.InferenceSession(str(workload.onnx), options, providers=["CPUExecutionProvider"])

    def rows_per_second(self, batch: int, seconds: float) -> float:
        """Rows a second over executions of ``batch`` requests (one row each but for blocks)."""
        feed = {name: np.concatenate([data] * batch) for name, data in self.workload.request.items()}
        rows_per_run = len(next(iter(feed.values())))
        self.session.run(None, feed)
        rows, start, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            self.session.run(None, feed)
            rows += rows_per_run
        self.cpu_us_per_row.append((time.process_time() - cpu) / rows * 1e6)
        return rows / (time.perf_counter() - start)


def codec_costs(workload: Workload, repeat: int = 2000) -> str:
    """CPU microseconds per request to take the request's tensors off the wire and to put the
    reply's on it: through protobuf's own fields (copies) and through grpc/wire.py (views, one
    copy out), side by side in this process."""
    from tritonclient.grpc import service_pb2

    from tritonctl.serve.core.types import InferResponse, InferTensor
    from tritonctl.serve.grpc.codec import decode_request, encode_response, encode_response_parts
    from tritonctl.serve.grpc.wire import join_response, split_request

    payload = grpc_request_bytes(workload)
    outputs = [InferTensor(name, "FP32", data.copy()) for name, data in
               zip(workload.outputs, workload.request.values())]
    response = InferResponse(workload.name, "1", "", outputs)

    def protobuf_path():
        request = decode_request(service_pb2.ModelInferRequest.FromString(payload))
        return request, encode_response(response, service_pb2, request).SerializeToString()

    def wire_path():
        rest, raw = split_request(payload)
        request = decode_request(service_pb2.ModelInferRequest.FromString(rest), None, raw)
        message, parts = encode_response_parts(response, service_pb2, request)
        return request, join_response(message.SerializeToString(), parts)

    costs = {}
    for name, path in (("protobuf", protobuf_path), ("wire", wire_path)):
        samples = []
        for _ in range(5):
            start = time.process_time()
            for _ in range(repeat // 5):
                path()
            samples.append((time.process_time() - start) / (repeat // 5) * 1e6)
        costs[name] = statistics.median(samples)
    return (f"tensor bytes on and off the gRPC wire per request ({len(payload) // 1024} KiB in, as much out), CPU: "
            f"protobuf's fields {costs['protobuf']:.1f} us, wire.py's views {costs['wire']:.1f} us "
            f"({costs['protobuf'] / costs['wire']:.1f}x less)")


# ---- requests, pre-serialized once ------------------------------------------------------------

DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}


def grpc_request_bytes(workload: Workload) -> bytes:
    from tritonclient.grpc import service_pb2

    message = service_pb2.ModelInferRequest(model_name=workload.name)
    for name, data in workload.request.items():
        message.inputs.add(name=name, datatype=DATATYPES[data.dtype], shape=list(data.shape))
        message.raw_input_contents.append(data.tobytes())
    for name in workload.outputs:
        message.outputs.add(name=name)
    return message.SerializeToString()


def grpc_reply_bytes(workload: Workload) -> bytes:
    """The ModelInferResponse a server gives for the request: the floor server's canned reply."""
    import onnxruntime as ort
    from tritonclient.grpc import service_pb2

    session = ort.InferenceSession(str(workload.onnx), providers=["CPUExecutionProvider"])
    reply = service_pb2.ModelInferResponse(model_name=workload.name, model_version="1")
    for name, data in zip(workload.outputs, session.run(workload.outputs, workload.request)):
        reply.outputs.add(name=name, datatype=DATATYPES[data.dtype], shape=list(data.shape))
        reply.raw_output_contents.append(data.tobytes())
    return reply.SerializeToString()


def http_request_bytes(workload: Workload) -> bytes:
    header = json.dumps({
        "inputs": [{"name": name, "shape": list(data.shape), "datatype": DATATYPES[data.dtype],
                    "parameters": {"binary_data_size": data.nbytes}} for name, data in workload.request.items()],
        "outputs": [{"name": name, "parameters": {"binary_data": True}} for name in workload.outputs]}).encode()
    body = header + b"".join(data.tobytes() for data in workload.request.values())
    return (f"POST /v2/models/{workload.name}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def grpc_worker(port: int, payload: bytes, stop_at: float, latencies: list) -> None:
    import grpc

    options = [("grpc.max_receive_message_length", 1 << 30)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            await call(payload)
            latencies.append(time.perf_counter() - start)


async def http_worker(port: int, payload: bytes, stop_at: float, latencies: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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


def run_load(protocol: str, port: int, payload: bytes, concurrency: int, seconds: float) -> list[float]:
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(load(protocol, port, payload, concurrency, seconds))


# ---- servers ------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stat_fields(pid: int | str, task: str | None = None) -> list[str]:
    path = f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat"
    return Path(path).read_text().rsplit(")", 1)[1].split()


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and all its descendants (Triton's Python backend stubs included)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat_fields(entry.name)[1])
            except (OSError, IndexError):
                continue
    tree, grew = {pid}, True
    while grew:
        grown = {child for child, parent in parents.items() if parent in tree}
        grew = not grown <= tree
        tree |= grown
    total = 0.0
    for member in tree:
        try:
            fields = _stat_fields(member)
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICK
    return total


def thread_cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid, str(pid))
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def wait_ready(port: int, process: subprocess.Popen | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before it was ready")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"no server became ready on port {port}")


class Server:
    """A server process on free ports; ``pid`` is the one whose process tree is charged."""

    def __init__(self, name: str, repo: Path, workload: Workload, delay_us: int, options: tuple[str, ...] = (),
                 baseline: Path | None = None, ensemble: bool = False):
        """``options``: more command-line flags, for tritonctl and triton alike. A tritonctl server
        named ``...@base`` runs the code of ``baseline`` (another checkout) instead of this one;
        with ``ensemble`` it serves the model behind a one-step ensemble of the same name."""
        self.name, self.model = name, workload.name
        self.batched_model = f"{workload.name}_step" if ensemble else workload.name  # whose batches are counted
        self.http_port, self.grpc_port = free_port(), free_port()
        self.process: subprocess.Popen | None = None
        kind, _, source = name.partition("@")
        env = dict(os.environ, PYTHONPATH=str(baseline if source == "base" else ROOT))
        if name.startswith("tritonctl"):
            python_transports = ["--grpc-transport", "aio", "--http-transport", "uvicorn"]
            config = spinning(workload.config) if kind == "tritonctl-spin" else workload.config
            served = (write_triton_repository(repo, workload, delay_us) if kind == "tritonctl-pymodel"
                      else write_repository(repo, workload, config, ensemble))
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tritonctl", "serve", str(served),
                 "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port), "--metrics-port", "-1",
                 *(python_transports if kind == "tritonctl-py" else []), *options],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            self.pid = self.process.pid
        elif name == "naive":
            self.grpc_port = None
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "benchmarks" / "naive_server.py"), str(workload.onnx), str(self.http_port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            self.pid = self.process.pid
        elif name.startswith("floor"):
            reply = repo.parent / "floor-reply.bin"
            reply.write_bytes(grpc_reply_bytes(workload))
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "benchmarks" / "floor_server.py"), str(self.http_port),
                 str(self.grpc_port), str(reply), *(["--native"] if name == "floor-native" else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            self.pid = self.process.pid
        elif name == "triton":
            repo = write_triton_repository(repo, workload, delay_us)
            out = subprocess.run(["bash", str(SHARED / "anchors" / "run_triton.sh"), str(repo), str(self.http_port),
                                  str(self.grpc_port), str(free_port()), *options],
                                 capture_output=True, text=True, check=True)
            self.pid = int(out.stdout.strip().splitlines()[-1])
        else:
            raise ValueError(name)
        wait_ready(self.http_port, self.process)

    def port(self, protocol: str) -> int | None:
        if self.name.startswith("floor"):
            return self.grpc_port if protocol == "grpc" else None
        return self.http_port if protocol == "http" else self.grpc_port

    def counts(self) -> tuple[int, int] | None:
        """(inference_count, execution_count) of the batched model from the statistics endpoint."""
        try:
            url = f"http://127.0.0.1:{self.http_port}/v2/models/{self.batched_model}/stats"
            entry = json.load(urllib.request.urlopen(url, timeout=5))["model_stats"][0]
        except (OSError, KeyError, IndexError, ValueError):
            return None
        return int(entry["inference_count"]), int(entry["execution_count"])

    def stop(self) -> None:
        if self.process is None:
            subprocess.run(["bash", str(SHARED / "anchors" / "stop_triton.sh"), str(self.http_port)],
                           capture_output=True)
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def triton_available() -> bool:
    return (TRITON_HOME / "triton_env.sh").is_file() and (SHARED / "anchors" / "run_triton.sh").is_file()


# ---- measuring ----------------------------------------------------------------------------------

@dataclass
class Point:
    throughput: float
    p50_ms: float
    p99_ms: float
    avg_batch: float
    cpu_percent: float
    cpu_us: float
    loop_us: float | None  # the event-loop thread of tritonctl and of the floor server


class AwakeCpus:
    """One busy loop per CPU at SCHED_IDLE priority, which runs only when nothing else wants the
    CPU: no virtual CPU halts while a point is measured, so no server waits for a halted one to
    wake (a spinning thread, like the anchor's onnxruntime threads, does that for its own process)."""

    LOOP = "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True:\n    pass\n"

    def __enter__(self) -> "AwakeCpus":
        self.loops = [subprocess.Popen([sys.executable, "-c", self.LOOP]) for _ in range(os.cpu_count() or 1)]
        return self

    def __exit__(self, *_exc) -> None:
        for loop in self.loops:
            loop.kill()
            loop.wait()


def measure(server: Server, protocol: str, payload: bytes, concurrency: int, seconds: float,
            warmup: float) -> Point:
    port = server.port(protocol)
    run_load(protocol, port, payload, concurrency, warmup)
    counts_before = server.counts()
    python_loop = server.name.startswith(("tritonctl", "floor"))
    loop_before = thread_cpu_seconds(server.pid) if python_loop else 0.0
    cpu_before, start = tree_cpu_seconds(server.pid), time.perf_counter()
    latencies = run_load(protocol, port, payload, concurrency, seconds)
    elapsed = time.perf_counter() - start
    cpu = tree_cpu_seconds(server.pid) - cpu_before
    loop = thread_cpu_seconds(server.pid) - loop_before if python_loop else None
    counts_after = server.counts()
    batch = float("nan")
    if counts_before and counts_after and counts_after[1] > counts_before[1]:
        batch = (counts_after[0] - counts_before[0]) / (counts_after[1] - counts_before[1])
    elif server.name == "naive":
        batch = 1.0
    latencies.sort()
    count = len(latencies)
    return Point(count / elapsed, latencies[count // 2] * 1e3, latencies[int(count * 0.99)] * 1e3, batch,
                 cpu / elapsed * 100, cpu / count * 1e6, None if loop is None else loop / count * 1e6)


def median_point(points: list[Point]) -> Point:
    """The run with the median throughput (its latencies belong to the same run)."""
    return sorted(points, key=lambda p: p.throughput)[len(points) // 2]


def row(server: str, protocol: str, concurrency: int, point: Point, runs: list[Point]) -> str:
    spread = f"{min(p.throughput for p in runs):,.0f}-{max(p.throughput for p in runs):,.0f}"
    loop = "" if point.loop_us is None else f"{point.loop_us:.0f}"
    return (f"| {server} | {protocol} | {concurrency} | {point.throughput:,.0f} | {spread} | {point.p50_ms:.2f} | "
            f"{point.p99_ms:.2f} | {point.avg_batch:.2f} | {point.cpu_percent:.0f} | {point.cpu_us:.0f} | {loop} |")


def compare(results: dict, base: str, other: str, protocols: list[str], concurrencies: list[int]) -> None:
    print(f"\n{base} against {other} (median runs):\n")
    print(f"| protocol | concurrency | infer/s ratio | p50 ms {base} / {other} | p99 ms {base} / {other} |")
    print("|---|---|---|---|---|")
    for protocol in protocols:
        for concurrency in concurrencies:
            mine, theirs = results.get((base, protocol, concurrency)), results.get((other, protocol, concurrency))
            if mine and theirs:
                print(f"| {protocol} | {concurrency} | {mine.throughput / theirs.throughput:.2f}x | "
                      f"{mine.p50_ms:.2f} / {theirs.p50_ms:.2f} | {mine.p99_ms:.2f} / {theirs.p99_ms:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "embedder", "blocks"], default="mlp")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measured point")
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--runs", type=int, default=3, help="measurements per point; the median is shown")
    parser.add_argument("--concurrency", type=int, nargs="+")
    parser.add_argument("--protocols", nargs="+", default=["grpc", "http"], choices=["grpc", "http"])
    parser.add_argument("--servers", nargs="+",
                        choices=["tritonctl", "tritonctl-py", "tritonctl-spin", "tritonctl-pymodel", "triton", "naive",
                                 "floor", "floor-native"],
                        help="default: tritonctl, triton (when installed), naive and floor for mlp; tritonctl for "
                             "embedder. tritonctl-py: tritonctl over its Python transports (grpc.aio, uvicorn). "
                             "tritonctl-spin (mlp): its onnxruntime threads spin between runs, as the anchor's do. "
                             "tritonctl-pymodel (mlp): tritonctl serving the real Triton's repository, the anchor's "
                             "Python-backend python_onnx_model (in stub processes, as Triton runs it). "
                             "floor: an empty grpc.aio handler (benchmarks/floor_server.py); floor-native: the same "
                             "canned reply over tritonctl's C++ gRPC transport")
    parser.add_argument("--delay-us", type=int, default=2000, help="max_queue_delay_microseconds of the model")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout of tritonctl (its compiled transports built): every tritonctl server "
                             "runs a second time from it, as NAME@base, measured in turn with this one")
    parser.add_argument("--ensemble", action="store_true",
                        help="tritonctl serves the model as the one step of an ensemble of the same name, so every "
                             "request crosses the ensemble scheduler (tritonctl servers only)")
    parser.add_argument("--keep-cpus-awake", action="store_true",
                        help="while measuring, a busy loop at idle priority on every CPU (see AwakeCpus), "
                             "for every server alike")
    args = parser.parse_args()
    concurrencies = args.concurrency or ([1, 8, 32] if args.model == "mlp" else [4, 16, 32])
    servers = args.servers or (["tritonctl", "naive", "floor"] + (["triton"] if triton_available() else [])
                               if args.model == "mlp" else ["tritonctl"])
    if "triton" in servers and args.model != "mlp":
        parser.error("the real Triton serves only mlp here (its python_onnx_model takes one input)")
    if args.ensemble and any(not name.startswith("tritonctl") or name == "tritonctl-pymodel" for name in servers):
        parser.error("--ensemble: only the tritonctl servers of the ONNX model serve the ensemble")
    if {"tritonctl-spin", "tritonctl-pymodel"} & set(servers) and args.model != "mlp":
        parser.error("tritonctl-spin and tritonctl-pymodel serve only mlp")

    with tempfile.TemporaryDirectory() as tmp:
        workload = (mlp_workload(Path(tmp), args.delay_us) if args.model == "mlp"
                    else blocks_workload(Path(tmp), args.delay_us) if args.model == "blocks"
                    else embedder_workload(args.delay_us))
        in_process = InProcess(workload)
        batches = (1, 64) if args.model == "mlp" else (1, 4) if args.model == "blocks" else (1, 4, 16)
        print(f"in-process onnxruntime on {args.model} (default threads): "
              + ", ".join(f"batch {b} {in_process.rows_per_second(b, 2.0):,.1f} rows/s" for b in batches))
        if args.model == "blocks":
            print(codec_costs(workload))
        limits: list[float] = []  # the embedder's limit, measured in every round beside the servers
        payloads = {"grpc": grpc_request_bytes(workload), "http": http_request_bytes(workload)}
        print(f"\n{args.model}, batch-1 requests, max_queue_delay {args.delay_us} us, {args.duration:g} s per point, "
              f"median of {args.runs} runs\n")
        print("| server | protocol | concurrency | infer/s | range | p50 ms | p99 ms | avg batch | server CPU % | "
              "server CPU us/req | event loop us/req |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        if args.baseline is not None:
            servers += [f"{name}@base" for name in servers if name.startswith("tritonctl")]
        started = []
        try:
            for name in servers:
                started.append(Server(name, Path(tmp) / f"repo-{name}", workload, args.delay_us,
                                      baseline=args.baseline, ensemble=args.ensemble))
            results: dict[tuple[str, str, int], Point] = {}
            for protocol in args.protocols:
                for concurrency in concurrencies:
                    runs: dict[str, list[Point]] = {s.name: [] for s in started if s.port(protocol)}
                    for _ in range(args.runs):
                        if args.model != "mlp":
                            limits.append(in_process.rows_per_second(max(batches), args.duration))
                        for server in started:
                            if server.port(protocol):
                                with AwakeCpus() if args.keep_cpus_awake else contextlib.nullcontext():
                                    point = measure(server, protocol, payloads[protocol], concurrency, args.duration,
                                                    args.warmup)
                                runs[server.name].append(point)
                    for name, points in runs.items():
                        results[(name, protocol, concurrency)] = median_point(points)
                        print(row(name, protocol, concurrency, results[(name, protocol, concurrency)], points),
                              flush=True)
        finally:
            for server in started:
                server.stop()
        for other in [s for s in servers if s != "tritonctl" and "tritonctl" in servers]:
            compare(results, "tritonctl", other, args.protocols, concurrencies)
        if {"tritonctl-pymodel", "triton"} <= set(servers):
            compare(results, "tritonctl-pymodel", "triton", args.protocols, concurrencies)
        if args.baseline is not None and "tritonctl-py" in servers:
            compare(results, "tritonctl-py", "tritonctl-py@base", args.protocols, concurrencies)
        if args.model == "mlp":
            return
        rows = len(next(iter(workload.request.values())))  # per request
        best = max(p.throughput for (name, _, _), p in results.items() if name == "tritonctl") * rows
        limit = statistics.median(limits)
        print(f"\nspeed limit: tritonctl's best {best:,.1f} rows/s against in-process onnxruntime at batch "
              f"{max(batches)}, {limit:,.1f} rows/s (median of {len(limits)}, measured between the server's "
              f"points, range {min(limits):,.1f}-{max(limits):,.1f}) = {best / limit:.2f}x")
        # CPU per row holds still where the machine is shared: what the server spends beyond the model
        for (name, protocol, concurrency), point in results.items():
            if name.startswith("tritonctl"):
                in_process_cpu = statistics.median(in_process.cpu_us_per_row[-len(limits):])
                print(f"CPU per row, {name} {protocol} c{concurrency}: {point.cpu_us / rows:,.1f} us against "
                      f"in-process onnxruntime's {in_process_cpu:,.1f} us = {in_process_cpu / (point.cpu_us / rows):.3f}x "
                      "of its efficiency")


if __name__ == "__main__":
    main()
