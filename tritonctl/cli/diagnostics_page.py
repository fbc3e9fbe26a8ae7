"""docs/diagnostics.md: the real broken repositories behind it, and the page itself.

Each case writes a small model repository, runs the real ``tritonctl validate`` on
it and records exactly what a user sees. ``tests/unit/test_docs_diagnostics.py``
rebuilds the page and fails when docs/diagnostics.md no longer matches; regenerate
it with

    python -m tritonctl.cli.diagnostics_page docs/diagnostics.md
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tritonctl.cli.app import main as tritonctl_main
from tritonctl.repo_schema.render.code_examples import working_directory, write_model

_IO = '''input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''


@dataclass(frozen=True)
class DocCase:
    title: str
    about: str  # one sentence above the output
    build: Callable[[Path], None]  # writes the repository into the directory it is given
    args: tuple[str, ...] = ("models/",)


def _one_model(name: str, config: str, files: tuple[str, ...] = ("1/model.py",)) -> Callable[[Path], None]:
    return lambda root: write_model(root / "models" / name, config, files)


def _onnx_mismatch(root: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["pixels"], ["scores"])], "classifier",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3, 224, 224])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model_dir = root / "models" / "classifier"
    write_model(model_dir, '''backend: "onnxruntime"
max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "scores" data_type: TYPE_FP16 dims: [ 3, 224, 224 ] } ]
''', ("1/",))
    onnx.save(model, str(model_dir / "1" / "model.onnx"))


def _ensemble(root: Path) -> None:
    write_model(root / "models" / "preprocess", 'backend: "python"\nmax_batch_size: 8\n'
                'input [ { name: "RAW" data_type: TYPE_UINT8 dims: [ -1 ] } ]\n'
                'output [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n')
    write_model(root / "models" / "pipeline", '''platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 1000 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "preprocess"
      model_version: -1
      input_map { key: "RAW" value: "IMAGE" }
      output_map { key: "PIXELS" value: "pixels" }
    },
    {
      model_name: "resnet"
      model_version: -1
      input_map { key: "INPUT0" value: "pixels" }
      output_map { key: "OUTPUT0" value: "SCORES" }
    }
  ]
}
''', ("1/",))


CASES: list[DocCase] = [
    DocCase("Unknown field, with a did-you-mean",
            "The HTTP API says `inputs`; config.pbtxt says `input`.",
            _one_model("resnet", 'backend: "python"\nmax_batch_size: 8\n'
                       'inputs [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n'
                       'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n')),
    DocCase("Unbalanced brace",
            "A block that is never closed: the message points at where it was opened.",
            _one_model("resnet", '''backend: "python"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1000 ] } ]
''')),
    DocCase("Unfilled template placeholder",
            "A template copied without running its fill script.",
            _one_model("llm", 'backend: "python"\nmax_batch_size: ${triton_max_batch_size}\n'
                       'input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                       'output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]\n')),
    DocCase("Input without dims",
            "Every input and output needs `dims` (use -1 for a variable dimension).",
            _one_model("resnet", 'backend: "python"\nmax_batch_size: 8\n'
                       'input [ { name: "INPUT0" data_type: TYPE_FP32 } ]\n'
                       'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n')),
    DocCase("Preferred batch size above max_batch_size",
            "The dynamic batcher can never form a batch larger than max_batch_size.",
            _one_model("resnet", 'backend: "python"\nmax_batch_size: 8\n' + _IO +
                       'dynamic_batching {\n  preferred_batch_size: [ 4, 16 ]\n'
                       '  max_queue_delay_microseconds: 100\n}\n')),
    DocCase("CPU instance group that lists GPUs",
            "`gpus` only makes sense for KIND_GPU instances.",
            _one_model("resnet", 'backend: "python"\nmax_batch_size: 8\n' + _IO +
                       'instance_group [ { count: 2 kind: KIND_CPU gpus: [ 0 ] } ]\n')),
    DocCase("Version directory Triton does not read",
            "Version directories are plain numbers; `v1` is silently skipped, so no version loads.",
            _one_model("resnet", 'backend: "python"\nmax_batch_size: 8\n' + _IO, ("v1/model.py",))),
    DocCase("Ensemble step naming a model that is not there",
            "The second step calls `resnet`, which the repository does not have.",
            _ensemble),
    DocCase("Config that does not match the ONNX model",
            "The names and types in config.pbtxt must match the model file.",
            _onnx_mismatch),
    DocCase("Misnamed config file",
            "Triton reads only `config.pbtxt`; a near miss is ignored without a word.",
            _one_model("resnet", None, ("1/model.py", "config.pbtx"))),
]


def run_validate(args: tuple[str, ...]) -> tuple[int, str]:
    """Run ``tritonctl validate ARGS`` in this process; (exit status, stdout + stderr)."""
    buffer = io.StringIO()
    status = 0
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            tritonctl_main(["validate", *args, "--color", "never"])
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return status, buffer.getvalue()


def run_case(case: DocCase) -> tuple[int, str]:
    with tempfile.TemporaryDirectory(prefix="tritonctl-doc-") as tmp:
        case.build(Path(tmp))
        with working_directory(Path(tmp)):
            return run_validate(case.args)


def render_page() -> str:
    out = ["# What `tritonctl validate` reports", "",
           "Ten real outputs, each from running `tritonctl validate` on a small broken repository.",
           "This page is generated by `python -m tritonctl.cli.diagnostics_page docs/diagnostics.md`",
           "and a test keeps it identical to what the current version prints. `tritonctl validate",
           "--explain CODE` tells more about any code shown here.", ""]
    for number, case in enumerate(CASES, 1):
        status, output = run_case(case)
        out += [f"## {number}. {case.title}", "", case.about, "", "```text",
                f"$ tritonctl validate {' '.join(case.args)}", output.rstrip("\n"), "$ echo $?", str(status),
                "```", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    page = render_page()
    if not args:
        sys.stdout.write(page)
        return
    Path(args[0]).write_text(page, encoding="utf-8")


if __name__ == "__main__":
    main()
