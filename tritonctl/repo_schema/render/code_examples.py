"""Running the small broken model ``--explain`` shows with a code (its ``CodeInfo.example``).

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

from tritonctl.repo_schema.diagnostics import code_info
from tritonctl.repo_schema.examples import Example, FileSpec
from tritonctl.repo_schema.fixes import fix_to_fixed_point
from tritonctl.repo_schema.render.text import render_text
from tritonctl.repo_schema.validate import ValidationReport, validate_paths

MODEL_PY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
'''


def write_model(model_dir: Path, config: str | None, files: tuple[FileSpec, ...] = ("1/model.py",)) -> None:
    """Create a model directory: its config.pbtxt (unless None) and ``files``."""
    model_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config, encoding="utf-8")
    for entry in files:
        name, content = entry if isinstance(entry, tuple) else (entry, None)
        target = model_dir / name
        if name.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            content = MODEL_PY if target.name == "model.py" else ""
        target.write_text(content, encoding="utf-8")


def write_example(root: Path, example: Example) -> None:
    """The example's model and its siblings under ``root``."""
    write_model(root / example.model, example.config, example.files)
    if example.onnx is not None:
        example.onnx.save(root / example.model / "1" / "model.onnx")
    for sibling in example.siblings:
        write_model(root / sibling.name, sibling.config, sibling.files)


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run the block in ``path`` so reports show short relative paths."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


@dataclass(frozen=True)
class ExampleRun:
    files: list[str]  # everything in the example repository, relative to it; directories end in '/'
    configs: list[tuple[str, str]]  # (path, text) of each config.pbtxt, the example model's first
    output: str  # what ``tritonctl validate models/`` prints for the code
    fix_diff: str = ""  # what ``tritonctl validate --diff models/`` shows for the code; empty when not fixable


def example_output(code: str) -> ExampleRun | None:
    """Build the example for ``code`` in a temporary directory and validate it; None
    when the code has no example."""
    example = code_info(code).example
    if example is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tritonctl-explain-") as tmp:
        root = Path(tmp)
        write_example(root / "models", example)
        files = sorted(p.relative_to(root).as_posix() + ("/" if p.is_dir() else "")
                       for p in (root / "models").rglob("*") if p.is_file() or not any(p.iterdir()))
        with working_directory(root):
            report = validate_paths([Path("models")])
            shown = ValidationReport([d for d in report.diagnostics if d.code == code], report.models_checked)
            text = render_text(shown, summary=False) if shown.diagnostics else ""
            fix_diff = _fix_diff(code)
    configs = [(f"models/{example.model}/config.pbtxt", example.config)] if example.config is not None else []
    configs += [(f"models/{s.name}/config.pbtxt", s.config) for s in example.siblings if s.config is not None]
    return ExampleRun(files, configs, text, fix_diff)


def _fix_diff(code: str) -> str:
    """The diff ``--fix`` makes for this code alone, in the current directory's models/."""
    if not code_info(code).fix:
        return ""

    def only_this_code() -> ValidationReport:
        report = validate_paths([Path("models")])
        return ValidationReport([d for d in report.diagnostics if d.code == code], report.models_checked)

    return fix_to_fixed_point(only_this_code).diff()
