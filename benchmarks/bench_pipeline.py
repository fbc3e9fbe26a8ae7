"""An ensemble's end-to-end throughput with its steps tuned together (`tritonctl analyze --model
ENSEMBLE`) against each step tuned alone (`--model STEP`, one after the other), measured side by
side.

    python benchmarks/bench_pipeline.py                         # the defaults below
    python benchmarks/bench_pipeline.py --interval 500 --rounds 3 --jsonl /tmp/bench-pipeline.jsonl

The example pipeline, made in code into a temporary directory: `pipe`, an ensemble (max batch 8)
of `pre`, a 512-2048-2048-512 ONNX MLP (about 12 MFLOP a row, so the model rather than the client
sets the pace), then `post`, a 512-512-512 ONNX MLP; both with one CPU instance and no dynamic
batcher. The space is the same for every run: `--batch-sizes 8,32
--queue-delays 0,500,2000 --instance-counts 1,2 --concurrency 16` (smart search, throughput).

Then one bundled server measures the two outcomes head to head at the ensemble's endpoint,
interleaved, `--rounds` times at concurrency 16: each round loads pre and post with one
outcome's configs and measures the ensemble (the order alternates from round to round). Reported:
each outcome's median throughput and p99 over the rounds, and the median of the per-round ratios
(joint / alone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from google.protobuf import text_format  # noqa: E402

from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze  # noqa: E402
from tritonctl.analyzer.engine import SubprocessEngine  # noqa: E402
from tritonctl.analyzer.search import SearchSpace  # noqa: E402
from tritonctl.perf.options import PerfOptions  # noqa: E402
from tritonctl.perf.run import run_perf  # noqa: E402
from tritonctl.repo_schema.schema import model_config_pb2  # noqa: E402
from tritonctl.repo_schema.writer import to_json_dict  # noqa: E402

SPACE = SearchSpace(batch_sizes=(8, 32), queue_delays_us=(0, 500, 2000), instance_counts=(1, 2), concurrency=(16,))
CONCURRENCY = 16
WIDTH = 512
STEP_CONFIG = """name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 512 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 512 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
ENSEMBLE = """name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 512 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 512 ] } ]
ensemble_scheduling { step [
  { model_name: "pre" model_version: -1 input_map { key: "INPUT0" value: "INPUT" }
    output_map { key: "OUTPUT0" value: "hidden" } },
  { model_name: "post" model_version: -1 input_map { key: "INPUT0" value: "hidden" }
    output_map { key: "OUTPUT0" value: "OUTPUT" } }
] }
"""


def mlp(path: Path, dims: list[int], seed: int) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(seed)
    weights, nodes, x = [], [], "INPUT0"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        weights += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"W{i}"),
                    numpy_helper.from_array((rng.standard_normal(b) * 0.01).astype(np.float32), f"B{i}")]
        last = i == len(dims) - 2
        out = "OUTPUT0" if last else f"g{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], [out]))
        if not last:
            nodes.append(helper.make_node("Relu", [out], [f"h{i}"]))
            x = f"h{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["b", dims[0]])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["b", dims[-1]])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    save(model, str(path))


def make_repository(root: Path) -> Path:
    repo = root / "repo"
    for name, dims, seed in (("pre", [WIDTH, 4 * WIDTH, 4 * WIDTH, WIDTH], 0), ("post", [WIDTH] * 3, 1)):
        mlp(repo / name / "1" / "model.onnx", dims, seed)
        (repo / name / "config.pbtxt").write_text(STEP_CONFIG.format(name=name))
    (repo / "pipe" / "1").mkdir(parents=True)
    (repo / "pipe" / "config.pbtxt").write_text(ENSEMBLE)
    return repo


def tune(repo: Path, model: str, out: Path, interval: float) -> tuple[dict[str, str], float]:
    """The chosen config JSON of each tuned model, and the run's wall time."""
    started = time.monotonic()
    result = run_analyze(AnalyzeOptions(repository=repo, model=model, output_dir=out, space=SPACE,
                                        measurement_interval_ms=interval, overwrite=True))
    if result.best is None:
        raise SystemExit(f"analyze {model}: no config chosen")
    names = ("pre", "post") if model == "pipe" else (model,)
    configs = {}
    for name in names:
        path = out / name / "config.pbtxt" if model == "pipe" else out / "config.pbtxt"
        config = text_format.Parse(path.read_text(), model_config_pb2().ModelConfig())
        configs[name] = json.dumps(to_json_dict(config))
    print(f"{model}: {result.best.config_id} in {time.monotonic() - started:.0f} s", flush=True)
    return configs, time.monotonic() - started


def head_to_head(repo: Path, outcomes: dict[str, dict[str, str]], rounds: int, interval: float,
                 log: Path) -> dict[str, list]:
    engine = SubprocessEngine(repo, "http", log)
    engine.start()
    measured: dict[str, list] = {name: [] for name in outcomes}
    try:
        for index in range(rounds):
            order = list(outcomes) if index % 2 == 0 else list(reversed(outcomes))
            for name in order:
                for step, config in outcomes[name].items():
                    engine._load(step, config)
                engine._load("pipe", None)
                level = run_perf(PerfOptions("pipe", url=engine.url, concurrency=(CONCURRENCY,),
                                             measurement_interval_ms=interval, max_trials=6,
                                             warmup_requests=CONCURRENCY)).levels[0]
                measured[name].append((level.throughput, level.percentiles_us[99] / 1e3))
                print(f"round {index + 1} {name}: {level.throughput:,.1f} infer/s, p99 "
                      f"{level.percentiles_us[99] / 1e3:.2f} ms", flush=True)
    finally:
        engine.stop()
    return measured


def summarize(config_json: str) -> str:
    """``b8-d500-i2`` (``nobatcher`` without the dynamic batcher), as analyze names configs."""
    config = json.loads(config_json)
    count = sum(int(g.get("count", 1)) for g in config.get("instance_group", []))
    batching = config.get("dynamic_batching")
    delay = f"d{int(batching.get('max_queue_delay_microseconds', 0))}" if batching is not None else "nobatcher"
    return f"b{config.get('max_batch_size')}-{delay}-i{count}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=1000.0, help="window in ms, tuning and head to head")
    parser.add_argument("--rounds", type=int, default=5, help="head-to-head rounds")
    parser.add_argument("--work-dir", type=Path, help="keep the repository and the analyze outputs here")
    parser.add_argument("--jsonl", type=Path, help="append the result here")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    repo = make_repository(work)
    alone: dict[str, str] = {}
    alone_s = 0.0
    for step in ("pre", "post"):
        configs, seconds = tune(repo, step, work / f"alone-{step}", args.interval)
        alone.update(configs)
        alone_s += seconds
    joint, joint_s = tune(repo, "pipe", work / "joint", args.interval)
    measured = head_to_head(repo, {"joint": joint, "alone": alone}, args.rounds, args.interval,
                            work / "head-to-head.log")
    ratios = [j[0] / a[0] for j, a in zip(measured["joint"], measured["alone"]) if a[0]]
    record = {
        "rounds": args.rounds, "interval_ms": args.interval, "concurrency": CONCURRENCY,
        "joint_configs": {k: summarize(v) for k, v in joint.items()},
        "alone_configs": {k: summarize(v) for k, v in alone.items()},
        "joint_throughput": statistics.median(t for t, _ in measured["joint"]),
        "alone_throughput": statistics.median(t for t, _ in measured["alone"]),
        "joint_p99_ms": statistics.median(p for _, p in measured["joint"]),
        "alone_p99_ms": statistics.median(p for _, p in measured["alone"]),
        "ratio_joint_over_alone": statistics.median(ratios) if ratios else None,
        "tuning_s": {"joint": round(joint_s, 1), "alone_both_steps": round(alone_s, 1)},
    }
    print(json.dumps(record, indent=2))
    if args.jsonl:
        with open(args.jsonl, "a") as sink:
            sink.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
