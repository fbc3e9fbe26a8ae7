"""Static reading of a Python backend ``model.py``: parsed with ``ast``, never run."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

MODEL_CLASS = "TritonPythonModel"


@dataclass(frozen=True)
class SyntaxProblem:
    message: str
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class PythonModelInfo:
    syntax_error: SyntaxProblem | None = None
    has_model_class: bool = False
    class_line: int = 0
    methods: set[str] = field(default_factory=set)
    has_bases: bool = False  # the class inherits, so methods may come from a base class

    @property
    def has_execute(self) -> bool:
        return "execute" in self.methods

    @property
    def autocompletes(self) -> bool:
        """Whether the model fills its own config through ``auto_complete_config``."""
        return "auto_complete_config" in self.methods


def read_python_model(path: Path) -> PythonModelInfo:
    """What Triton's Python stub will find in ``path``. Raises OSError when unreadable."""
    source = path.read_bytes()
    try:
        tree = ast.parse(source, filename=path.name)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        return PythonModelInfo(SyntaxProblem(f"{type(exc).__name__}: {exc.msg}", line, max(col, 1)))
    except ValueError as exc:  # null bytes in the source
        return PythonModelInfo(SyntaxProblem(f"SyntaxError: {exc}", 1, 1))
    info = PythonModelInfo()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == MODEL_CLASS:
            info.has_model_class = True
            info.class_line = node.lineno
            info.has_bases = bool(node.bases)
            info.methods = {item.name for item in node.body
                            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in node.targets):
            # TritonPythonModel = SomeOtherClass: defined elsewhere, assume complete.
            info.has_model_class = True
            info.class_line = node.lineno
            info.has_bases = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (alias.asname or alias.name) == MODEL_CLASS for alias in node.names):
            info.has_model_class = True
            info.class_line = node.lineno
            info.has_bases = True
    return info
