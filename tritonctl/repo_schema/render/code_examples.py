"""A small broken config for each diagnostic code, shown by ``--explain``.

The output shown with an example is never written down: ``example_output`` builds
the model in a temporary repository and runs the real validator on it, so the
explanation always shows what tritonctl says today. ``tests/unit/test_render_codes.py`` checks
that every example still produces its code.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MODEL_PY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
'''

_IO = '''input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''


@dataclass(frozen=True)
class Example:
    config: str
    model: str = "my_model"
    files: tuple[str, ...] = ("1/model.py",)  # created in the model directory; a trailing '/' makes a directory


EXAMPLES: dict[str, Example] = {
    "TOP02": Example('name: "resnet"\nbackend: "python"\nmax_batch_size: 8\n' + _IO, model="resnet50"),
    "TOP03": Example('backend: "python"\nmax_batch_size: -1\n' + _IO),
    "TXT01": Example('backend: "python"\nmax_batch_size: 8\ninput [\n  { name: "INPUT0" data_type: TYPE_FP32 '
                     'dims: [ 4 ] }\n'),
    "TXT02": Example('backend: "python"\nmax_batch_size: 8\ninputs [ { name: "INPUT0" data_type: TYPE_FP32 '
                     'dims: [ 4 ] } ]\n'),
    "TXT03": Example('backend: "python"\nmax_batch_size: "8"\n' + _IO),
    "TXT04": Example('backend: "python"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: FP32 '
                     'dims: [ 4 ] } ]\n'),
    "TXT05": Example('backend: "python"\nmax_batch_size: 8\ndynamic_batching { }\nsequence_batching { }\n' + _IO),
    "TXT06": Example('backend: "python"\nmax_batch_size: 8\nmax_batch_size: 16\n' + _IO),
    "TXT07": Example('backend: "python"\nmax_batch_size: 8\nparameters { value { string_value: "on" } }\n' + _IO),
    "TXT11": Example('backend: "python"\nmax_batch_size: ${max_batch_size}\n' + _IO),
    "TXT51": Example('backend: "python"\nmax_batch_size: 8\nparameters { key: "engine_dir" value { '
                     'string_value: "${engine_dir}" } }\n' + _IO),
    "TXT52": Example('backend: "python"\nmax_batch_size: 8\nparameters { key: "mode" value { string_value: "a" } }\n'
                     'parameters { key: "mode" value { string_value: "b" } }\n' + _IO),
}


def write_model(model_dir: Path, config: str | None, files: tuple[str, ...] = ("1/model.py",)) -> None:
    """Create a model directory: its config.pbtxt (unless None) and ``files``."""
    model_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config, encoding="utf-8")
    for entry in files:
        target = model_dir / entry
        if entry.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(MODEL_PY if target.name == "model.py" else "", encoding="utf-8")


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run the block in ``path`` so reports show short relative paths."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def example_output(code: str) -> tuple[str, str] | None:
    """(the example's config text, tritonctl's text output for it), or None."""
    from tritonctl.repo_schema.render.text import render_text
    from tritonctl.repo_schema.validate import ValidationReport, validate_paths

    example = EXAMPLES.get(code)
    if example is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tritonctl-explain-") as tmp:
        write_model(Path(tmp) / "models" / example.model, example.config, example.files)
        with working_directory(Path(tmp)):
            report = validate_paths([Path("models")])
            shown = ValidationReport([d for d in report.diagnostics if d.code == code], report.models_checked)
            text = render_text(shown, summary=False) if shown.diagnostics else ""
    return example.config, text
