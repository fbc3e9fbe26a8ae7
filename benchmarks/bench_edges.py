"""Where one gRPC request's time goes at concurrency 1, in tritonctl and in the real Triton:
both servers trace every request (Triton's trace extension, `level=TIMESTAMPS`), and one client
takes the time it sends each request and the time it has the reply on the same monotonic clock
as the servers' traces; each trace is joined to the request that was out when its message came.

    python benchmarks/bench_edges.py                   # mlp, max_queue_delay 2000 us
    python benchmarks/bench_edges.py --delay-us 0

The client (sync grpc, pre-serialized requests, the same for both servers) alternates between
the servers, `--requests` requests per run, `--runs` runs each. The table shows medians over
every request of a server; medians of stages do not add up to the median total. The server's
part runs from GRPC_WAITREAD_END (when Triton's completion queue hands over the message, when
tritonctl's Python code has it parsed) to GRPC_SEND_START (when either hands the encoded reply
to gRPC; Triton's GRPC_SEND_END, when its completion queue reports the send done, often comes
after the client already has the reply, so it marks no edge).
The stages in between are not alike (Triton's python-backend model sends its reply
before the trace's COMPUTE_END), so only the queue delay and the path to the queue are shown.
Tracing costs both servers some time per request (tritonctl writes its JSON in Python, after
the reply is sent), so the totals sit above bench_serve.py's.
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_serve import Server, grpc_request_bytes, mlp_workload, triton_available

INFER = "/inference.GRPCInferenceService/ModelInfer"
STAGES = [  # (label, from, to); "send" and "receive" are the client's
    ("client sends -> server has the message", "send", "GRPC_WAITREAD_END"),
    ("server: has the message -> reply goes to gRPC", "GRPC_WAITREAD_END", "GRPC_SEND_START"),
    ("reply goes to gRPC -> client has it", "GRPC_SEND_START", "receive"),
    ("client: sends -> has the reply", "send", "receive"),
    ("within the server: the queue delay, queued -> compute starts", "QUEUE_START", "COMPUTE_START"),
    ("within the server: has the message -> queued", "GRPC_WAITREAD_END", "QUEUE_START"),
]


def trace_options(path: Path) -> tuple[str, ...]:
    return ("--trace-config", f"triton,file={path}", "--trace-config", "level=TIMESTAMPS",
            "--trace-config", "rate=1", "--trace-config", "triton,log-frequency=100")


def read_traces(path: Path) -> list[dict[str, int]]:
    """Every trace in the files a server wrote (``path.0``, ``path.1``, ...): event -> ns."""
    events: dict[int, dict[str, int]] = {}
    for part in path.parent.glob(path.name + ".*"):
        for entry in json.loads(part.read_text()):  # each file is one JSON array, from either server
            for stamp in entry.get("timestamps", []):
                events.setdefault(entry["id"], {})[stamp["name"]] = int(stamp["ns"])
    return list(events.values())


def probe(port: int, payload: bytes, requests: int) -> list[tuple[int, int]]:
    """(send, receive) of ``requests`` requests, one at a time, after a warm-up."""
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(INFER, request_serializer=None, response_deserializer=None)
        for _ in range(200):
            call(payload)
        times = []
        for _ in range(requests):
            sent = time.monotonic_ns()
            call(payload)
            times.append((sent, time.monotonic_ns()))
    return times


def join(traces: list[dict[str, int]], requests: list[tuple[int, int]]) -> list[dict[str, int]]:
    """The traces whose message arrived while one client request was out, with that request's
    send and receive; ``requests`` in the order they were sent."""
    sends = [sent for sent, _ in requests]
    joined = []
    for trace in traces:
        read = trace.get("GRPC_WAITREAD_END")
        if read is None:
            continue
        index = bisect.bisect_right(sends, read) - 1
        if index >= 0 and read <= requests[index][1]:
            joined.append({**trace, "send": requests[index][0], "receive": requests[index][1]})
    return joined


def stage_medians(joined: list[dict[str, int]]) -> list[float | None]:
    medians = []
    for _label, start, end in STAGES:
        spans = [t[end] - t[start] for t in joined if start in t and end in t]
        medians.append(statistics.median(spans) / 1e3 if spans else None)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay-us", type=int, default=2000, help="max_queue_delay_microseconds of the model")
    parser.add_argument("--requests", type=int, default=1500, help="requests per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not triton_available():
        parser.error("the real Triton is not installed: run ../shared/anchors/setup_triton.sh first")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workload = mlp_workload(root, args.delay_us)
        payload = grpc_request_bytes(workload)
        names = ["tritonctl", "triton"]
        files = {name: root / f"trace-{name}.json" for name in names}
        requests: dict[str, list[tuple[int, int]]] = {name: [] for name in names}
        servers = []
        try:
            for name in names:
                servers.append(Server(name, root / f"repo-{name}", workload, args.delay_us,
                                      trace_options(files[name])))
            for _ in range(args.runs):
                for server in servers:
                    requests[server.name] += probe(server.grpc_port, payload, args.requests)
        finally:
            for server in servers:
                server.stop()
        joined = {name: join(read_traces(files[name]), requests[name]) for name in names}

    print(f"\nmlp over gRPC, concurrency 1, max_queue_delay {args.delay_us} us; requests joined to their traces: "
          + ", ".join(f"{name} {len(joined[name]):,}" for name in names) + "\n")
    print("| stage (median us) | tritonctl | triton | tritonctl - triton |")
    print("|---|---|---|---|")
    medians = {name: stage_medians(joined[name]) for name in names}
    for index, (label, _start, _end) in enumerate(STAGES):
        mine, theirs = medians["tritonctl"][index], medians["triton"][index]
        if mine is None or theirs is None:
            continue
        print(f"| {label} | {mine:,.0f} | {theirs:,.0f} | {mine - theirs:+,.0f} |")


if __name__ == "__main__":
    main()
