"""Speed and quality of `tritonctl analyze`: the smart strategy against exhaustive search over the
same space, on the `mlp` and `embedder` models of ../shared/models, and the chosen config against
the model's plain default config.

    python benchmarks/bench_analyze.py                       # both models, the default search space
    python benchmarks/bench_analyze.py --models mlp --batch-sizes 1,8 --queue-delays 0,2000 \\
        --instance-counts 1 --concurrency 1:8 --measurement-interval 300 --confirm-rounds 1   # a quick check

For each model: the models are made with ../shared/models/make_models.py into a temporary
directory (or taken from --models-dir); the repository holds only `1/model.onnx`, so the default
config is what Triton's auto-complete gives (max_batch_size 4, dynamic batching, 2 CPU instances).
`tritonctl analyze` runs twice with the same options, --strategy smart (as a user runs it) and
--strategy exhaustive, each on its own bundled server subprocess. Reported: wall time, configs and
points measured, the best objective each found, and their ratio.

Exhaustive picks the maximum over many noisy measurements, which flatters it (the winner's curse).
So a confirmation step measures both chosen configs and the default again, head to head on one
server, alternating, --confirm-rounds times, and reports medians: that ratio is the fair one.
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
SHARED_MODELS = ROOT.parent / "shared" / "models"
EMBEDDER_SEQ = 32

sys.path.insert(0, str(ROOT))

from tritonctl.analyzer.analyze import AnalyzeOptions, AnalyzeResult, Reporter, run_analyze  # noqa: E402
from tritonctl.analyzer.engine import SubprocessEngine  # noqa: E402
from tritonctl.analyzer.objective import Objective  # noqa: E402
from tritonctl.analyzer.options import PerfOptions  # noqa: E402
from tritonctl.analyzer.perf import run_perf  # noqa: E402
from tritonctl.analyzer.point import Point  # noqa: E402
from tritonctl.analyzer.search import SearchSpace, build_candidates, load_model_config  # noqa: E402
from tritonctl.analyzer.space_options import parse_counts, parse_delays, parse_powers  # noqa: E402


def make_models(directory: Path) -> Path:
    """mlp.onnx and embedder.onnx (with tiny_add) from make_models.py's torch exports."""
    if not (directory / "mlp.onnx").is_file() or not (directory / "embedder.onnx").is_file():
        sys.path.insert(0, str(SHARED_MODELS))
        import make_models as maker

        print(f"making mlp and embedder with {SHARED_MODELS / 'make_models.py'} into {directory} (about a minute)",
              flush=True)
        directory.mkdir(parents=True, exist_ok=True)
        maker.generated_models(directory)
    return directory


def repository(models: Path, name: str, root: Path) -> tuple[Path, dict, str]:
    """REPO/NAME/1/model.onnx without config.pbtxt; the --shape values and input data for the model."""
    version = root / "repo" / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / "model.onnx").symlink_to((models / f"{name}.onnx").resolve())
    if name != "embedder":
        return root / "repo", {}, "random"
    import numpy as np

    ids = np.random.default_rng(0).integers(0, 30522, EMBEDDER_SEQ).tolist()
    data = root / "embedder_data.json"  # real token ids and a full attention mask, seq 32
    data.write_text(json.dumps({"data": [{"input_ids": ids, "attention_mask": [1] * EMBEDDER_SEQ}]}))
    return root / "repo", {"input_ids": (EMBEDDER_SEQ,), "attention_mask": (EMBEDDER_SEQ,)}, str(data)


class Progress(Reporter):
    """One line per measured config, with the time so far: a full run takes the better part of an hour."""

    def __init__(self, label: str):
        self.label, self.started, self.done, self.total = label, time.monotonic(), 0, 0

    def plan(self, total: int, strategy: str) -> None:
        self.total = total

    def candidate_done(self, result) -> None:
        self.done += 1
        point = result.best or next((p for p in result.points if p.ok), None)
        what = point.describe() if point else result.failed
        print(f"[{self.label}] {self.done}/{self.total} {result.config_id}: {what} "
              f"({time.monotonic() - self.started:.0f} s)", flush=True)


def analyze(strategy: str, name: str, repo: Path, out: Path, space: SearchSpace, shapes: dict, input_data: str,
            args: argparse.Namespace) -> tuple[AnalyzeResult, float]:
    options = AnalyzeOptions(repository=repo, model=name, output_dir=out, space=space, strategy=strategy,
                             objective=Objective.parse(args.objective), shapes=shapes, input_data=input_data,
                             measurement_interval_ms=args.measurement_interval, overwrite=True)
    started = time.monotonic()
    result = run_analyze(options, Progress(f"{name} {strategy}"))
    return result, time.monotonic() - started


def confirm(name: str, repo: Path, out: Path, space: SearchSpace, shapes: dict, input_data: str,
            chosen: dict[str, tuple[str, int]], args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Median (throughput, p99 ms) of each chosen config at its concurrency, measured head to head."""
    model_dir, base = load_model_config(repo, name)
    candidates = {c.config_id: c for c in build_candidates(model_dir, base, space.resolved(base)).all}
    engine = SubprocessEngine(repo.resolve(), "http", out / "confirm-server.log")
    engine.start()
    points = list(dict.fromkeys(chosen.values()))  # a point chosen twice is measured once
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {point: [] for point in points}
    try:
        for _ in range(args.confirm_rounds):
            for config_id, concurrency in points:
                engine.apply(name, candidates[config_id])
                result = run_perf(PerfOptions(name, url=engine.url, concurrency=(concurrency,), shapes=shapes,
                                              input_data=input_data, measurement_interval_ms=args.measurement_interval,
                                              warmup_requests=4 * concurrency))
                level = result.levels[0]
                samples[(config_id, concurrency)].append((level.throughput, level.percentiles_us[99] / 1000))
    finally:
        engine.stop()
    medians = {point: (statistics.median(t for t, _ in values), statistics.median(p for _, p in values))
               for point, values in samples.items()}
    return {label: medians[point] for label, point in chosen.items()}


def objective_of(throughput: float, p99_ms: float, objective: Objective) -> float:
    return objective.value(Point("x", "x", None, False, 1, "x", throughput=throughput, p99_ms=p99_ms))


def bench_model(name: str, models: Path, work: Path, args: argparse.Namespace) -> dict:
    repo, shapes, input_data = repository(models, name, work / name)
    space = SearchSpace(
        batch_sizes=parse_powers(args.batch_sizes, "--batch-sizes") if args.batch_sizes else None,
        queue_delays_us=parse_delays(args.queue_delays) if args.queue_delays else None,
        instance_counts=parse_counts(args.instance_counts) if args.instance_counts else None,
        concurrency=parse_powers(args.concurrency, "--concurrency") if args.concurrency else None)
    runs = {}
    for strategy in ("smart", "exhaustive"):
        result, wall = analyze(strategy, name, repo, work / name / strategy, space, shapes, input_data, args)
        runs[strategy] = {"result": result, "wall_s": wall}
    smart, full = runs["smart"]["result"], runs["exhaustive"]["result"]
    default = smart.default.best
    chosen = {"smart": (smart.best.config_id, smart.best.best.concurrency),
              "exhaustive": (full.best.config_id, full.best.best.concurrency),
              "default": (smart.default.config_id, default.concurrency)}
    print(f"[{name}] confirming {chosen} over {args.confirm_rounds} rounds ...", flush=True)
    confirmed = confirm(name, repo, work / name, space, shapes, input_data, chosen, args)
    objective = Objective.parse(args.objective)
    rows = {}
    for strategy, run in runs.items():
        result = run["result"]
        rows[strategy] = {
            "wall_s": round(run["wall_s"], 1), "configs": result.meta["candidates_measured"],
            "configs_total": result.meta["candidates_total"], "points": result.measured,
            "best": result.best.config_id, "concurrency": result.best.best.concurrency,
            "objective": objective.value(result.best.best),
            "confirmed_objective": objective_of(*confirmed[strategy], objective),
        }
    return {"model": name, "runs": rows, "confirmed": confirmed,
            "default_measured": {"throughput": default.throughput, "p99_ms": default.p99_ms,
                                 "config": smart.default.config_id, "concurrency": default.concurrency},
            "smart_measured": {"throughput": smart.best.best.throughput, "p99_ms": smart.best.best.p99_ms}}


def print_tables(results: list[dict]) -> None:
    print("\n| model | strategy | wall s | configs measured | points | best config @ concurrency | best objective "
          "| ratio smart/exhaustive (as measured; confirmed) |")
    print("|---|---|---|---|---|---|---|---|")
    for entry in results:
        smart, full = entry["runs"]["smart"], entry["runs"]["exhaustive"]
        for strategy, row in entry["runs"].items():
            ratio = ""
            if strategy == "smart":
                ratio = (f"{smart['objective'] / full['objective']:.3f}; "
                         f"{smart['confirmed_objective'] / full['confirmed_objective']:.3f}")
            print(f"| {entry['model']} | {strategy} | {row['wall_s']:.0f} | {row['configs']} of {row['configs_total']} "
                  f"({row['configs'] / row['configs_total']:.0%}) | {row['points']} | {row['best']} @ "
                  f"{row['concurrency']} | {row['objective']:,.1f} | {ratio} |")
        if full["points"]:
            print(f"|  | smart/exhaustive | {smart['wall_s'] / full['wall_s']:.0%} | | "
                  f"{smart['points'] / full['points']:.0%} | | | |")
    print("\n| model | config | throughput infer/s (confirmed) | p99 ms (confirmed) | throughput / default |")
    print("|---|---|---|---|---|")
    for entry in results:
        base_tp = entry["confirmed"]["default"][0]
        for label in ("default", "smart", "exhaustive"):
            tp, p99 = entry["confirmed"][label]
            config = entry["default_measured"]["config"] if label == "default" else entry["runs"][label]["best"]
            print(f"| {entry['model']} | {label}: {config} | {tp:,.1f} | {p99:.2f} | x{tp / base_tp:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,embedder", help="comma-separated: mlp, embedder")
    parser.add_argument("--models-dir", type=Path, help="where mlp.onnx and embedder.onnx are (made when missing)")
    parser.add_argument("--work-dir", type=Path, help="keep repositories and analyze outputs here")
    parser.add_argument("--objective", default="throughput")
    parser.add_argument("--batch-sizes", help="as tritonctl analyze --batch-sizes (default: its default)")
    parser.add_argument("--queue-delays")
    parser.add_argument("--instance-counts")
    parser.add_argument("--concurrency")
    parser.add_argument("--measurement-interval", type=float, default=1000.0, help="window in ms")
    parser.add_argument("--confirm-rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    if not set(names) <= {"mlp", "embedder"}:
        parser.error("--models: mlp and/or embedder")
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        work = args.work_dir or Path(tmp)
        models = make_models(args.models_dir or work / "models")
        results = [bench_model(name, models, work, args) for name in names]
    print_tables(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
