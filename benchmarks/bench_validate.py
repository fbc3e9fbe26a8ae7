"""How fast is ``tritonctl validate``? Prints a table; not run in CI.

Generates a repository of mixed models (python, onnxruntime with real ONNX files,
ensembles, sequence models, some that draw warnings) in a temporary directory, then times:

- ``tritonctl validate REPO`` as a subprocess (wall time, median of 5) and in-process;
- ``tritonctl validate --diff REPO``: the fixes computed to a fixed point (the DB51 models
  are fixable), nothing written;
- ``tritonctl --help`` and ``tritonctl validate ONE_MODEL`` start-up (median of 10);
- baselines measured in the same run: ``python -c pass`` and protobuf's
  ``text_format.Parse`` of the same configs (the "parse only" floor);
- the cost of evaluating Python ``auto_complete_config``: a second repository of
  ``--autocomplete`` Python models that define it (each runs in its own child process),
  validated as is and with ``--no-exec`` (nothing run), in the same run.

Each command runs once untimed first, with bytecode caching on (as after ``pip install``),
even where PYTHONDONTWRITEBYTECODE is set.

    .venv/bin/python benchmarks/bench_validate.py [--models 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

PYTHON_MODEL = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
'''

IO = '''input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {dim} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {out} ] }} ]
'''
PYTHON = 'backend: "python"\nmax_batch_size: {mbs}\n' + IO + (
    'dynamic_batching {{ preferred_batch_size: [ {half}, {mbs} ] max_queue_delay_microseconds: 100 }}\n'
    'instance_group [ {{ count: {count} kind: KIND_CPU }} ]\n')
ONNX = 'backend: "onnxruntime"\nmax_batch_size: {mbs}\n' + IO + (
    'dynamic_batching {{ max_queue_delay_microseconds: 200 }}\n'
    'instance_group [ {{ count: 1 kind: KIND_CPU }} ]\n')
SEQUENCE = 'backend: "python"\nmax_batch_size: {mbs}\n' + IO + '''sequence_batching {{
  max_sequence_idle_microseconds: 5000000
  direct {{ max_queue_delay_microseconds: 100 }}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }} ] }}
  ]
}}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
'''
ENSEMBLE = 'platform: "ensemble"\nmax_batch_size: {mbs}\n' + IO + '''ensemble_scheduling {{
  step [
    {{ model_name: "{first}" model_version: -1 input_map {{ key: "INPUT0" value: "INPUT0" }} output_map {{ key: "OUTPUT0" value: "mid" }} }},
    {{ model_name: "{second}" model_version: -1 input_map {{ key: "INPUT0" value: "mid" }} output_map {{ key: "OUTPUT0" value: "OUTPUT0" }} }}
  ]
}}
'''
# A Python model whose auto_complete_config completes an output the config lists by name only.
AUTOCOMPLETE_MODEL = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size(8)
        config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
'''
AUTOCOMPLETE = ('backend: "python"\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'output [ { name: "OUTPUT0" } ]\n')
# Loadable, but each draws a warning: IG50 (instance count 0), DB51 (preferred size twice).
WARNINGS = ('backend: "python"\nmax_batch_size: {mbs}\n' + IO
            + 'dynamic_batching {{ preferred_batch_size: [ {mbs}, {mbs} ] }}\n'
            + 'instance_group [ {{ count: 0 kind: KIND_CPU }} ]\n')

MIX = (("python", 0.40), ("onnx", 0.30), ("sequence", 0.10), ("ensemble", 0.15), ("warning", 0.05))
DIMS = (4, 8, 16, 32, 64)


def onnx_bytes(dim: int, hidden: int = 16) -> bytes:
    """A small MLP: INPUT0 [batch, dim] -> MatMul -> Relu -> MatMul -> OUTPUT0 [batch, dim]."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(dim)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("W1", (dim, hidden)), ("W2", (hidden, dim)))]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "W2"], ["OUTPUT0"])],
        "mlp",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", dim])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", dim])],
        initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_model(root: Path, name: str, config: str, model_file: tuple[str, bytes | str] | None) -> None:
    version = root / name / "1"
    version.mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(config)
    if model_file:
        filename, content = model_file
        target = version / filename
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)


def make_repository(root: Path, count: int) -> dict[str, int]:
    """``count`` models in the proportions of MIX; returns how many of each kind."""
    onnx_files = {dim: onnx_bytes(dim) for dim in DIMS}
    kinds = [kind for kind, share in MIX for _ in range(round(count * share))][:count]
    kinds += ["python"] * (count - len(kinds))
    python_models: list[tuple[str, int, int]] = []  # name, dim, max_batch_size
    for i, kind in enumerate(kinds):
        dim, mbs = DIMS[i % len(DIMS)], (4, 8, 16)[i % 3]
        values = {"dim": dim, "out": dim, "mbs": mbs, "half": mbs // 2, "count": 1 + i % 2}
        name = f"{kind}_{i:04d}"
        if kind == "python":
            write_model(root, name, PYTHON.format(**values), ("model.py", PYTHON_MODEL))
            python_models.append((name, dim, mbs))
        elif kind == "onnx":
            write_model(root, name, ONNX.format(**values), ("model.onnx", onnx_files[dim]))
        elif kind == "sequence":
            write_model(root, name, SEQUENCE.format(**values), ("model.py", PYTHON_MODEL))
        elif kind == "warning":
            write_model(root, name, WARNINGS.format(**values), ("model.py", PYTHON_MODEL))
    ensembles = [i for i, kind in enumerate(kinds) if kind == "ensemble"]
    for n, i in enumerate(ensembles):
        first, dim, first_mbs = python_models[n % len(python_models)]
        same_dim = [m for m in python_models if m[1] == dim and m[0] != first]
        second, _, second_mbs = same_dim[n % len(same_dim)]
        values = {"dim": dim, "out": dim, "mbs": min(first_mbs, second_mbs), "first": first, "second": second}
        write_model(root, f"ensemble_{i:04d}", ENSEMBLE.format(**values), None)
    return {kind: kinds.count(kind) for kind, _ in MIX}


def median_seconds(action: Callable[[], object], runs: int) -> float:
    action()  # warm-up: bytecode caches, file system caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_command(command: list[str], ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode not in ok_codes:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def parse_only(configs: list[Path]) -> None:
    from google.protobuf import text_format

    from tritonctl.repo_schema.schema import model_config_pb2

    model_config = model_config_pb2().ModelConfig
    for path in configs:
        text_format.Parse(path.read_text(), model_config())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5, help="runs for the repository timings")
    parser.add_argument("--startup-runs", type=int, default=10, help="runs for the start-up timings")
    parser.add_argument("--autocomplete", type=int, default=20,
                        help="Python models with auto_complete_config in the second repository")
    args = parser.parse_args()

    tritonctl = str(Path(sys.executable).parent / "tritonctl")
    with tempfile.TemporaryDirectory(prefix="bench_validate_") as tmp:
        repo = Path(tmp) / "repository"
        repo.mkdir()
        mix = make_repository(repo, args.models)
        configs = sorted(repo.glob("*/config.pbtxt"))
        one_model = repo / "python_0000"
        completing = Path(tmp) / "autocomplete"
        for i in range(args.autocomplete):
            write_model(completing, f"completing_{i:03d}", AUTOCOMPLETE, ("model.py", AUTOCOMPLETE_MODEL))

        from tritonctl.repo_schema.validate import validate_paths

        report = validate_paths([repo])
        if report.errors:
            first = next(d for d in report.diagnostics if d.severity.value == "error")
            raise SystemExit(f"the generated repository has {report.errors} errors, e.g. {first.location}: "
                             f"{first.code} {first.message}")
        rows = [
            (f"tritonctl validate REPO ({len(configs)} models), subprocess",
             median_seconds(lambda: run_command([tritonctl, "validate", str(repo)]), args.runs), 2.0),
            (f"tritonctl validate --diff REPO ({len(configs)} models), subprocess",
             median_seconds(lambda: run_command([tritonctl, "validate", "--diff", str(repo)]), args.runs), None),
            (f"validate_paths(REPO) in-process ({len(configs)} models)",
             median_seconds(lambda: validate_paths([repo]), args.runs), None),
            (f"text_format.Parse of the {len(configs)} configs (parse-only floor)",
             median_seconds(lambda: parse_only(configs), args.runs), None),
            ("tritonctl --help",
             median_seconds(lambda: run_command([tritonctl, "--help"]), args.startup_runs), 0.3),
            ("tritonctl validate ONE_MODEL",
             median_seconds(lambda: run_command([tritonctl, "validate", str(one_model)]), args.startup_runs), 0.3),
            ("python -c pass (interpreter floor)",
             median_seconds(lambda: run_command([sys.executable, "-c", "pass"]), args.startup_runs), None),
        ]
        if args.autocomplete:
            executed = median_seconds(lambda: run_command([tritonctl, "validate", str(completing)]), args.runs)
            skipped = median_seconds(lambda: run_command([tritonctl, "validate", str(completing), "--no-exec"]),
                                     args.runs)
            rows += [
                (f"tritonctl validate AC_REPO ({args.autocomplete} auto_complete_config models)", executed, None),
                ("tritonctl validate AC_REPO --no-exec (no model code run)", skipped, None),
                ("  per model: one auto_complete_config child process", (executed - skipped) / args.autocomplete,
                 None),
            ]

    print(f"repository: {', '.join(f'{n} {kind}' for kind, n in mix.items())}; "
          f"validate found {report.errors} errors, {report.warnings} warnings")
    print(f"{'what':<66} {'median s':>9} {'goal s':>7}  ok")
    for what, seconds, goal in rows:
        verdict = "" if goal is None else ("yes" if seconds <= goal else "NO")
        print(f"{what:<66} {seconds:>9.3f} {'' if goal is None else f'{goal:.1f}':>7}  {verdict}")


if __name__ == "__main__":
    main()
