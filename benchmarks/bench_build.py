#!/usr/bin/env python3
"""Time each stage of ``tritonctl build`` for the ``embedder`` of ../shared/models
(BERT-like, 4 layers, hidden 768; input_ids + attention_mask [batch, seq] ->
last_hidden_state), PyTorch -> ONNX on the CPU; and, where a GPU and TensorRT are
present, the plan build without and with a warm timing cache.

    python benchmarks/bench_build.py [--runs N] [--models DIR]

Prints a markdown table: seconds per stage (median of N fresh builds), and the time of
a re-run that the build cache answers. Needs the torch extra (pip install -e '.[torch]').
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ROOT.parent / "shared" / "models"
SPECS = ["input_ids:int64:-1", "attention_mask:int64:-1"]
SHAPES = ["input_ids:1,32,128", "attention_mask:1,32,128"]


def embedder():
    """The embedder exactly as make_models.py builds it (seed 0): the build's module:function."""
    import torch

    spec = importlib.util.spec_from_file_location("make_models", _models_dir() / "make_models.py")
    make_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_models)
    constructor = next(ctor for name, ctor, *_ in make_models.torch_models() if name == "embedder")
    torch.manual_seed(0)
    return constructor()


def _models_dir() -> Path:
    return Path(getattr(sys.modules.get("__main__"), "MODELS_DIR", DEFAULT_MODELS))


def _options(repo: Path, fmt: str, timing_cache: Path | None = None):
    from tritonctl.convert.options import BuildOptions
    from tritonctl.convert.spec import parse_input, parse_shape

    return BuildOptions(f"{Path(__file__).resolve()}:embedder", repo, "embedder", format=fmt, max_batch_size=8,
                        inputs=[parse_input(s) for s in SPECS], output_names=["last_hidden_state"],
                        shapes=[parse_shape(s) for s in SHAPES], timing_cache=timing_cache, atol=1e-3, rtol=1e-3)


def _timed_build(options) -> tuple[dict[str, float], float, object]:
    from tritonctl.convert.pipeline import build

    start = time.perf_counter()
    result = build(options)
    return dict(result.stage_seconds), time.perf_counter() - start, result


def _table(title: str, runs: list[tuple[dict[str, float], float]]) -> list[str]:
    stages = list(runs[0][0])
    lines = [f"### {title}", "", "| stage | median s | min s |", "|---|---|---|"]
    for stage in stages:
        values = [r[0][stage] for r in runs if stage in r[0]]
        lines.append(f"| {stage} | {statistics.median(values):.2f} | {min(values):.2f} |")
    totals = [r[1] for r in runs]
    lines.append(f"| **total** | **{statistics.median(totals):.2f}** | {min(totals):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS, help="../shared/models (make_models.py)")
    args = parser.parse_args()
    globals()["MODELS_DIR"] = args.models
    from tritonctl.convert.manifest import tool_versions
    from tritonctl.convert.tensorrt_build import plan_unavailable

    versions = tool_versions()
    print(f"versions: {', '.join(f'{k} {v}' for k, v in versions.items() if v)}")
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        result = None
        for index in range(args.runs):
            seconds, total, result = _timed_build(_options(Path(tmp) / f"onnx{index}", "onnx"))
            runs.append((seconds, total))
        lines += _table(f"embedder -> ONNX (CPU), {args.runs} fresh builds", runs)
        _, reuse, again = _timed_build(_options(Path(tmp) / f"onnx{args.runs - 1}", "onnx"))
        assert again.reused
        worst = max(o["max_abs_error"] for o in result.manifest["accuracy"]["outputs"])
        lines += ["", f"re-run with identical inputs and options (cache hit): {reuse:.2f} s; "
                      f"model {result.manifest['model']['bytes'] / 1e6:.0f} MB, "
                      f"{result.manifest['preparation']['folded_nodes']} nodes folded, "
                      f"max abs error vs torch {worst:.2g}", ""]
        missing = plan_unavailable()
        if missing:
            lines.append(f"TensorRT plan: not measured here ({missing.split(', which')[0]}).")
        else:
            cache = Path(tmp) / "timing.cache"
            cold, cold_total, _ = _timed_build(_options(Path(tmp) / "plan_cold", "plan", cache))
            warm, warm_total, _ = _timed_build(_options(Path(tmp) / "plan_warm", "plan", cache))
            lines += _table("embedder -> TensorRT fp32 plan, empty timing cache", [(cold, cold_total)])
            lines += [""] + _table("embedder -> TensorRT fp32 plan, warm timing cache", [(warm, warm_total)])
    print("\n".join(lines))


if __name__ == "__main__":
    main()
