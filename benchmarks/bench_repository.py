"""`tritonctl analyze REPO` on a whole repository: its wall time against the sum of the per-model
runs, and how closely it keeps to `--time-budget`.

    python benchmarks/bench_repository.py                       # 2 rounds (about 30 min on 2 cores)
    python benchmarks/bench_repository.py --rounds 1 -p 300     # a quicker look

The repository is made in code in a temporary directory: the bundled example repository
(`examples/model_repository`: `add_sub`, a Python model) and, beside it, the 256-1024-1024-256
ONNX MLP of bench_analyze.py (`mlp`, onnxruntime), the same MLP in the Python-backend model of
`../shared/anchors/python_onnx_model` (`pymlp`) and an ensemble (`mlp_pipeline`) whose one step is
a second copy of the ONNX MLP (`mlp_step`, tuned within the pipeline; the ensemble's max batch
size of 8 leaves the step's max batch sizes 8 and 32 to search). Every run uses one small
space (`--batch-sizes 1,8,32 --queue-delays 0,500 --instance-counts 1,2 --concurrency 1,4,16`)
and the smart strategy, each as its own `tritonctl analyze` process, the way a user runs it.

Each round, in this order:
1. the whole repository, `tritonctl analyze REPO` (every model, one command): its wall time;
2. each model it tuned on its own, `tritonctl analyze REPO --model NAME` (the ensemble's step is
   tuned within it), one after the other: the sum of their wall times;
3. the whole repository under `--time-budget` of half, then a quarter, of step 1's wall time: the
   wall time against the budget (the overrun), and how many models still got a config.

Printed: a table per round and the medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_analyze import SHARED, mlp_onnx  # noqa: E402

SPACE_ARGS = ["--batch-sizes", "1,8,32", "--queue-delays", "0,500", "--instance-counts", "1,2",
              "--concurrency", "1,4,16"]
ONNX_CONFIG = """name: "{name}"
backend: "onnxruntime"
max_batch_size: 64
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
ENSEMBLE = """name: "mlp_pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
ensemble_scheduling { step [ {
  model_name: "mlp_step" model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" }
  output_map { key: "OUTPUT0" value: "OUTPUT0" }
} ] }
"""


def make_repository(work: Path) -> Path:
    repo = work / "repo"
    shutil.copytree(ROOT / "examples" / "model_repository", repo, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mlp", "mlp_step"):
        mlp_onnx(repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(ONNX_CONFIG.format(name=name))
    anchor = SHARED / "anchors" / "python_onnx_model"
    mlp_onnx(repo / "pymlp" / "1" / "mlp.onnx")
    shutil.copy(anchor / "1" / "model.py", repo / "pymlp" / "1" / "model.py")
    config = (anchor / "config.pbtxt").read_text().replace('name: "onnx_mlp"', 'name: "pymlp"')
    (repo / "pymlp" / "config.pbtxt").write_text(config)
    (repo / "mlp_pipeline" / "1").mkdir(parents=True)
    (repo / "mlp_pipeline" / "config.pbtxt").write_text(ENSEMBLE)
    return repo


def analyze(repo: Path, out: Path, window_ms: float, *extra: str) -> tuple[float, dict | None]:
    """One `tritonctl analyze` process; its wall time and, for a repository run, repository.json."""
    command = [sys.executable, "-m", "tritonctl", "analyze", str(repo), "-o", str(out), "--overwrite",
               "-p", str(window_ms), *SPACE_ARGS, *extra]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    summary = out / "repository.json"
    return wall, json.loads(summary.read_text()) if summary.is_file() else None


def tuned_models(document: dict) -> list[str]:
    return [e["model"] for e in document["models"] if not e.get("skipped")]


def one_round(repo: Path, work: Path, number: int, window_ms: float) -> dict:
    whole_wall, document = analyze(repo, work / f"whole{number}", window_ms)
    models = tuned_models(document)
    alone = {}
    for model in models:
        alone[model], _ = analyze(repo, work / f"alone{number}" / model, window_ms, "--model", model)
        print(f"[round {number}] {model} alone: {alone[model]:.1f} s", flush=True)
    print(f"[round {number}] whole repository: {whole_wall:.1f} s ({', '.join(models)})", flush=True)
    budgets = []
    for fraction in (0.5, 0.25):
        budget = round(whole_wall * fraction)
        wall, budgeted = analyze(repo, work / f"budget{number}-{fraction}", window_ms, "--time-budget", f"{budget}s")
        written = sum(1 for e in budgeted["models"] if e.get("config_written"))
        budgets.append({"fraction": fraction, "budget_s": budget, "wall_s": wall, "overrun": wall / budget - 1.0,
                        "configs_written": written, "models": len(tuned_models(budgeted))})
        print(f"[round {number}] --time-budget {budget}s: {wall:.1f} s ({wall / budget - 1.0:+.1%}), "
              f"{written} configs written", flush=True)
    return {"round": number, "models": models, "alone_s": alone, "sum_alone_s": sum(alone.values()),
            "whole_s": whole_wall, "budgets": budgets}


def tables(rounds: list[dict]) -> str:
    lines = ["| round | models | sum of per-model runs (s) | whole repository (s) | whole / sum | "
             "budget 50 %: budget s, wall s, overrun | budget 25 %: budget s, wall s, overrun |",
             "|---|---|---|---|---|---|---|"]
    for r in rounds:
        cells = [f"{b['budget_s']}, {b['wall_s']:.1f}, {b['overrun']:+.1%} ({b['configs_written']} configs)"
                 for b in r["budgets"]]
        lines.append(f"| {r['round']} | {len(r['models'])} | {r['sum_alone_s']:.1f} | {r['whole_s']:.1f} | "
                     f"{r['whole_s'] / r['sum_alone_s']:.3f} | " + " | ".join(cells) + " |")
    ratio = statistics.median(r["whole_s"] / r["sum_alone_s"] for r in rounds)
    overruns = {f: statistics.median(b["overrun"] for r in rounds for b in r["budgets"] if b["fraction"] == f)
                for f in (0.5, 0.25)}
    worst = max(b["overrun"] for r in rounds for b in r["budgets"])
    lines += ["", f"median whole / sum of per-model runs: {ratio:.3f}",
              "median overrun: " + ", ".join(f"budget {100 * f:.0f}% of the whole run {o:+.1%}"
                                            for f, o in overruns.items()) + f"; worst {worst:+.1%}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("-p", "--measurement-interval", type=float, default=500.0, help="window in ms")
    parser.add_argument("--work-dir", type=Path, help="keep the repository and outputs here")
    parser.add_argument("--jsonl", type=Path, help="append each round here")
    args = parser.parse_args()
    if not (SHARED / "anchors" / "python_onnx_model").is_dir():
        parser.error(f"{SHARED} lacks anchors/python_onnx_model (the pymlp model)")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-repository-") as tmp:
        work = args.work_dir or Path(tmp)
        repo = make_repository(work)
        for number in range(1, args.rounds + 1):
            rounds.append(one_round(repo, work, number, args.measurement_interval))
            if args.jsonl:
                with args.jsonl.open("a") as handle:
                    handle.write(json.dumps(rounds[-1]) + "\n")
    print(tables(rounds))


if __name__ == "__main__":
    main()
