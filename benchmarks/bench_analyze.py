"""How good and how cheap `tritonctl analyze --strategy smart` is, against exhaustive search.

    python benchmarks/bench_analyze.py --jsonl /tmp/bench-analyze.jsonl          # everything (hours)
    python benchmarks/bench_analyze.py --models mlp --spaces small --smart-runs 2 \\
        --small-interval 300 --rounds 2                                           # a quick check
    python benchmarks/bench_analyze.py --table /tmp/bench-analyze.jsonl           # the tables of a (partial) run

Models, made in code into a temporary directory (or --work-dir):
- `mlp`: the 256-1024-1024-256 ONNX MLP (onnxruntime backend), one CPU instance, no dynamic
  batcher: batching pays the most here;
- `embedder`: the BERT-like ONNX encoder of ../shared/models/make_models.py at sequence length 32,
  compute-bound (batching gains little on a CPU); same default config;
- `pymlp`: the same MLP run by a Python-backend model (../shared/anchors/python_onnx_model, which
  wraps onnxruntime), its own config (max batch 64, queue delay 2000 us, one instance).

Spaces: `small`, the 18-config space `--batch-sizes 1,8,32 --queue-delays 0,500,2000
--instance-counts 1,2 --concurrency 16` with `--small-interval` ms windows (3000); `default`,
analyze's default space with `--default-interval` ms windows (1000).

For each model and space: exhaustive runs once (the reference) and smart `--smart-runs` times
(5), each in a fresh output directory on its own bundled server. Then every distinct chosen config
(exhaustive's and each smart run's, at the concurrency it is recommended at: the load check's, else
its final round's) is measured again
head to head on one server, interleaved, `--rounds` times (3), and each smart run's choice is
compared with exhaustive's round by round (the median of the per-round objective ratios). Reported
in Model Analyzer's terms: the % of the best objective found (that ratio) and the % of the space
measured, plus smart's measurement time as a fraction of exhaustive's (the time spent measuring,
from the points' own timings, re-measurements included).

`--reference FILE` takes the exhaustive runs from an earlier --jsonl file (same model, space and
window) instead of running them again; their choices are still measured head to head in this run.

Every finished run is appended to the --jsonl file as it ends, so a run cut short keeps what it
measured; `--table FILE` prints the tables of such a file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout; a worktree one level deeper finds it one more up (--shared-dir overrides).
SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "anchors").is_dir()),
              ROOT.parent / "shared")
EMBEDDER_SEQ = 32
SMALL_SPACE = dict(batch_sizes=(1, 8, 32), queue_delays_us=(0, 500, 2000), instance_counts=(1, 2), concurrency=(16,))

sys.path.insert(0, str(ROOT))

from tritonctl.analyzer.analyze import AnalyzeOptions, Reporter, run_analyze  # noqa: E402
from tritonctl.analyzer.engine import SubprocessEngine  # noqa: E402
from tritonctl.analyzer.objective import Objective  # noqa: E402
from tritonctl.perf.options import PerfOptions  # noqa: E402
from tritonctl.perf.run import run_perf  # noqa: E402
from tritonctl.analyzer.point import Point  # noqa: E402
from tritonctl.analyzer.search import SearchSpace, build_candidates, load_model_config  # noqa: E402

ONNX_CONFIG = """name: "{name}"
backend: "onnxruntime"
max_batch_size: 64
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def mlp_onnx(path: Path) -> None:
    """The 256-1024-1024-256 MLP of ../shared/anchors/make_mlp_onnx.py (seeded weights, dynamic batch)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    dims, weights, nodes, x = [256, 1024, 1024, 256], [], [], "INPUT0"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        weights += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"W{i}"),
                    numpy_helper.from_array((rng.standard_normal(b) * 0.01).astype(np.float32), f"B{i}")]
        last = i == len(dims) - 2
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"B{i}"], ["OUTPUT0" if last else f"g{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [f"h{i}"]))
            x = f"h{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 256])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 256])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    save(model, str(path))


def make_repository(name: str, work: Path) -> tuple[Path, dict, str]:
    """REPO/NAME for one model; returns the repository, the --shape values and the input data."""
    repo = work / "repo"
    model_dir = repo / name
    if model_dir.is_dir():  # made by an earlier space of this run
        return repo, *make_repository_inputs(name, work)
    if name == "mlp":
        mlp_onnx(model_dir / "1" / "model.onnx")
        (model_dir / "config.pbtxt").write_text(ONNX_CONFIG.format(name=name))
        return repo, {}, "random"
    if name == "pymlp":
        anchor = SHARED / "anchors" / "python_onnx_model"
        mlp_onnx(model_dir / "1" / "mlp.onnx")
        shutil.copy(anchor / "1" / "model.py", model_dir / "1" / "model.py")
        config = (anchor / "config.pbtxt").read_text().replace('name: "onnx_mlp"', f'name: "{name}"')
        (model_dir / "config.pbtxt").write_text(config)
        return repo, {}, "random"
    if name == "embedder":
        models = work / "models"
        if not (models / "embedder.onnx").is_file():
            sys.path.insert(0, str(SHARED / "models"))
            import make_models as maker

            print(f"making embedder with {SHARED / 'models' / 'make_models.py'} (about a minute)", flush=True)
            models.mkdir(parents=True, exist_ok=True)
            maker.generated_models(models)
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        shutil.copy(models / "embedder.onnx", model_dir / "1" / "model.onnx")  # a symlink out of the repository is refused
        (model_dir / "config.pbtxt").write_text(ONNX_CONFIG.format(name=name))
        import numpy as np

        ids = np.random.default_rng(0).integers(0, 30522, EMBEDDER_SEQ).tolist()
        data = work / "embedder_data.json"  # real token ids and a full attention mask, seq 32
        data.write_text(json.dumps({"data": [{"input_ids": ids, "attention_mask": [1] * EMBEDDER_SEQ}]}))
        return repo, {"input_ids": (EMBEDDER_SEQ,), "attention_mask": (EMBEDDER_SEQ,)}, str(data)
    raise SystemExit(f"unknown model {name!r}: use mlp, embedder, pymlp")


class Progress(Reporter):
    def __init__(self, label: str):
        self.label, self.started = label, time.monotonic()

    def decision(self, text: str) -> None:
        print(f"[{self.label} {time.monotonic() - self.started:.0f}s] {text[:300]}", flush=True)


def analyze(strategy: str, name: str, repo: Path, out: Path, space: SearchSpace, shapes: dict, input_data: str,
            interval: float, objective: Objective) -> dict:
    started = time.monotonic()
    result = run_analyze(AnalyzeOptions(repository=repo, model=name, output_dir=out, space=space, strategy=strategy,
                                        objective=objective, shapes=shapes, input_data=input_data,
                                        measurement_interval_ms=interval, overwrite=True),
                         Progress(f"{name} {strategy}"))
    final = result.meta["final_round"]
    chosen = next(f for f in final["finalists"] if f["config_id"] == final["chosen"])
    level = final["load_check"]["concurrency"] if final.get("load_check") else chosen["concurrency"]
    return {"strategy": strategy, "wall_s": round(time.monotonic() - started, 1),
            "measurement_s": result.meta["measurement_s"], "configs": result.meta["candidates_measured"],
            "configs_total": result.meta["candidates_total"], "points": result.measured,
            "points_by_stage": result.meta["points_by_stage"], "chosen": final["chosen"],
            "concurrency": level, "final_throughput": chosen["throughput"],
            "verdict": final["verdict"], "unexplored": result.meta["unexplored_knobs"]}


def head_to_head(name: str, repo: Path, out: Path, space: SearchSpace, shapes: dict, input_data: str,
                 points: list[tuple[str, int]], rounds: int, interval: float,
                 objective: Objective) -> dict[tuple[str, int], list[float]]:
    """The objective of each (config, concurrency), measured ``rounds`` times, interleaved, on one server."""
    model_dir, base = load_model_config(repo, name)
    candidates = {c.config_id: c for c in build_candidates(model_dir, base, space.resolved(base)).all}
    engine = SubprocessEngine(repo.resolve(), "http", out / "h2h-server.log")
    engine.start()
    samples: dict[tuple[str, int], list[float]] = {point: [] for point in points}
    try:
        for number in range(rounds):
            order = points[number % len(points):] + points[:number % len(points)]
            for config_id, concurrency in order:
                engine.apply(name, candidates[config_id])
                level = run_perf(PerfOptions(name, url=engine.url, concurrency=(concurrency,), shapes=shapes,
                                             input_data=input_data, measurement_interval_ms=interval,
                                             warmup_requests=4 * concurrency)).levels[0]
                value = objective.value(Point("x", "x", None, False, concurrency, "x", throughput=level.throughput,
                                              p99_ms=level.percentiles_us[99] / 1000))
                samples[(config_id, concurrency)].append(value)
                print(f"[{name} head-to-head round {number + 1}] {config_id} @ {concurrency}: {value:,.1f}",
                      flush=True)
    finally:
        engine.stop()
    return samples


def bench(name: str, space_name: str, work: Path, args: argparse.Namespace, sink, window: float | None) -> None:
    objective = Objective.parse(args.objective)
    repo, shapes, input_data = make_repository(name, work / name)
    space = SearchSpace(**SMALL_SPACE) if space_name == "small" else SearchSpace()
    interval = window or (args.small_interval if space_name == "small" else args.default_interval)
    label = f"{name}/{space_name}"
    base = work / name / space_name
    earlier = args.earlier.get((name, space_name, interval))
    if earlier is not None:  # exhaustive's run from --reference: its choice is measured head to head again below
        runs = [{k: v for k, v in earlier.items() if k not in ("kind", "model", "space", "interval_ms")}]
        print(f"[{label}] exhaustive from {args.reference}: {earlier['chosen']} @ {earlier['concurrency']}", flush=True)
    else:
        runs = [analyze("exhaustive", name, repo, base / "exhaustive", space, shapes, input_data, interval, objective)]
    sink({"kind": "run", "model": name, "space": space_name, "interval_ms": interval, **runs[0],
          **({"reference": str(args.reference)} if earlier is not None else {})})
    for number in range(args.smart_runs):
        run = analyze("smart", name, repo, base / f"smart{number + 1}", space, shapes, input_data, interval, objective)
        runs.append(run)
        sink({"kind": "run", "model": name, "space": space_name, "interval_ms": interval, "run": number + 1, **run})
    points = list(dict.fromkeys((r["chosen"], r["concurrency"]) for r in runs))
    print(f"[{label}] head to head, {args.rounds} rounds: {points}", flush=True)
    samples = head_to_head(name, repo, base, space, shapes, input_data, points, args.rounds, interval, objective)
    sink({"kind": "head_to_head", "model": name, "space": space_name, "interval_ms": interval,
          "samples": [{"config_id": c, "concurrency": k, "objective": v} for (c, k), v in samples.items()]})


def make_repository_inputs(name: str, work: Path) -> tuple[dict, str]:
    if name != "embedder":
        return {}, "random"
    return {"input_ids": (EMBEDDER_SEQ,), "attention_mask": (EMBEDDER_SEQ,)}, str(work / "embedder_data.json")


def tables(records: list[dict]) -> str:
    """The markdown tables of a (possibly partial) run."""
    lines = ["| model | space | window | run | chosen | head to head vs exhaustive (per-round ratios) | "
             "% of best objective | configs measured | measurement time (vs exhaustive) | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], dict] = {}
    for record in records:
        group = groups.setdefault((record["model"], record["space"]), {"runs": [], "h2h": None})
        if record["kind"] == "run":
            group["runs"].append(record)
        else:
            group["h2h"] = {(s["config_id"], s["concurrency"]): s["objective"] for s in record["samples"]}
    summary = ["", "| model | space | smart runs | % of best objective (min / median) | runs >= 95% | "
               "% of space measured (median) | measurement time vs exhaustive (median) |", "|---|---|---|---|---|---|---|"]
    for (model, space), group in groups.items():
        full = next((r for r in group["runs"] if r["strategy"] == "exhaustive"), None)
        ratios, fractions, shares = [], [], []
        for run in group["runs"]:
            ratio_text, percent = "", ""
            if group["h2h"] and full is not None:
                mine = group["h2h"].get((run["chosen"], run["concurrency"]))
                ref = group["h2h"].get((full["chosen"], full["concurrency"]))
                if mine and ref:
                    per_round = [a / b for a, b in zip(mine, ref) if b > 0]
                    ratio = statistics.median(per_round)
                    ratio_text = f"{ratio:.3f} ({', '.join(f'{r:.2f}' for r in per_round)})"
                    percent = f"{100 * ratio:.0f}%"
                    if run["strategy"] == "smart":
                        ratios.append(ratio)
            time_share = ""
            if full is not None and full["measurement_s"]:
                share = run["measurement_s"] / full["measurement_s"]
                time_share = f"{run['measurement_s']:.0f} s ({100 * share:.0f}%)"
                if run["strategy"] == "smart":
                    shares.append(share)
            if run["strategy"] == "smart":
                fractions.append(run["configs"] / run["configs_total"])
            name = run["strategy"] + (f" {run['run']}" if run.get("run") else "") + (
                " (earlier run)" if run.get("reference") else "")
            lines.append(f"| {model} | {space} | {run['interval_ms']:g} ms | {name} | {run['chosen']} @ "
                         f"{run['concurrency']} | {ratio_text or '-'} | {percent or '-'} | {run['configs']} of "
                         f"{run['configs_total']} ({100 * run['configs'] / run['configs_total']:.0f}%) | "
                         f"{time_share or '-'} | {run['wall_s']:.0f} |")
        if fractions:
            best = (f"{100 * min(ratios):.0f}% / {100 * statistics.median(ratios):.0f}%" if ratios
                    else "not measured head to head")
            meets = f"{sum(r >= 0.95 for r in ratios)} of {len(ratios)}" if ratios else "-"
            summary.append(f"| {model} | {space} | {len(fractions)} | {best} | {meets} | "
                           f"{100 * statistics.median(fractions):.0f}% | "
                           + (f"{100 * statistics.median(shares):.0f}% |" if shares else "- |"))
    return "\n".join(lines + summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,pymlp,embedder", help="comma-separated: mlp, pymlp, embedder")
    parser.add_argument("--spaces", default="small,default", help="small and/or default")
    parser.add_argument("--order", default="", help="explicit MODEL/SPACE[@WINDOW_MS],... order (overrides "
                                                     "--models/--spaces)")
    parser.add_argument("--smart-runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="head-to-head rounds")
    parser.add_argument("--small-interval", type=float, default=3000.0, help="window in ms on the small space")
    parser.add_argument("--default-interval", type=float, default=1000.0, help="window in ms on the default space")
    parser.add_argument("--objective", default="throughput")
    parser.add_argument("--work-dir", type=Path, help="keep repositories and analyze outputs here")
    parser.add_argument("--shared-dir", type=Path, help="the shared models and anchors (default: ../shared)")
    parser.add_argument("--jsonl", type=Path, help="append each finished run here")
    parser.add_argument("--table", type=Path, help="only print the tables of this --jsonl file")
    parser.add_argument("--reference", type=Path,
                        help="a --jsonl file of an earlier run: its exhaustive runs (same model, space and window) "
                             "are taken from it instead of run again; their choices are still measured head to head")
    args = parser.parse_args()
    args.earlier = {}
    if args.reference:
        for line in args.reference.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("kind") == "run" and record.get("strategy") == "exhaustive":
                args.earlier[(record["model"], record["space"], record["interval_ms"])] = record
    if args.shared_dir:
        global SHARED
        SHARED = args.shared_dir
    wanted = args.order or args.models
    if not args.table and "pymlp" in wanted and not (SHARED / "anchors" / "python_onnx_model").is_dir():
        parser.error(f"{SHARED} lacks anchors/python_onnx_model (the pymlp model): pass --shared-dir")
    if args.table:
        records = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
        print(tables(records))
        return
    if args.order:
        jobs = []
        for item in filter(None, (i.strip() for i in args.order.split(","))):
            job, _, window = item.partition("@")
            model, space = job.split("/")
            jobs.append((model, space, float(window) if window else None))
    else:
        jobs = [(m.strip(), s.strip(), None) for s in args.spaces.split(",") for m in args.models.split(",")]
    records: list[dict] = []

    def sink(record: dict) -> None:
        records.append(record)
        if args.jsonl:
            with args.jsonl.open("a") as handle:
                handle.write(json.dumps(record) + "\n")

    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        work = args.work_dir or Path(tmp)
        for model, space, window in jobs:
            started = time.monotonic()
            bench(model, space, work, args, sink, window)
            print(f"[{model}/{space}] done in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    print(tables(records))


if __name__ == "__main__":
    main()
