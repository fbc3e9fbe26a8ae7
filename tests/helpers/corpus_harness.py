"""Turns a corpus file (see tests/corpus/README.md) into a model repository on disk."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "corpus"

PYTHON_MODEL = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        responses = []
        for request in requests:
            responses.append(pb_utils.InferenceResponse(output_tensors=[]))
        return responses
'''


@dataclass
class CorpusCase:
    path: Path
    text: str
    model: str
    expected: list[tuple[str, int, int]] = field(default_factory=list)
    layout: list[str] | None = None  # None: default layout
    siblings: list[tuple[str, Path]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


def load_case(path: Path) -> CorpusCase:
    text = path.read_text()
    case = CorpusCase(path, text, path.stem)
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        directive = re.match(r"#\s*(\w+):\s*(.*)", line)
        if not directive:
            continue
        key, value = directive.group(1), directive.group(2).strip()
        if key == "expect":
            code, pos = value.split()[:2]
            line_no, col = pos.split(":")
            case.expected.append((code, int(line_no), int(col)))
        elif key == "model":
            case.model = value
        elif key == "layout":
            case.layout = [] if value == "none" else value.split()
        elif key == "sibling":
            name, rel = value.split()
            case.siblings.append((name, path.parent / rel))
    return case


def cases(kind: str) -> list[CorpusCase]:
    return [load_case(p) for p in sorted((CORPUS / kind).glob("*.pbtxt"))]


def backend_and_platform(text: str) -> tuple[str, str]:
    """The ``backend`` and ``platform`` a corpus config names ("" where it names none)."""
    backend = re.search(r'^\s*backend:\s*"([^"]*)"', text, re.M)
    platform = re.search(r'^\s*platform:\s*"([^"]*)"', text, re.M)
    return (backend.group(1) if backend else "", platform.group(1) if platform else "")


def _default_layout(text: str) -> list[str]:
    backend, platform = backend_and_platform(text)
    if platform == "ensemble":
        return ["1/"]
    filename = {"python": "model.py", "tensorrt": "model.plan", "pytorch": "model.pt"}.get(backend)
    filename = filename or {"tensorrt_plan": "model.plan", "pytorch_libtorch": "model.pt"}.get(platform)
    return [f"1/{filename}"] if filename else ["1/"]


def write_model(model_dir: Path, text: str, layout: list[str] | None) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(text)
    for entry in _default_layout(text) if layout is None else layout:
        target = model_dir / entry
        if entry.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PYTHON_MODEL if target.name == "model.py" else "")


def materialize(case: CorpusCase, repo: Path) -> Path:
    """Write the case (and its siblings) into ``repo``; returns the model directory."""
    model_dir = repo / case.model
    write_model(model_dir, case.text, case.layout)
    for name, sibling in case.siblings:
        sib = load_case(sibling)
        write_model(repo / name, sib.text, sib.layout)
    return model_dir
