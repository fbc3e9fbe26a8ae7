"""Diagnostics as data: every problem tritonctl reports is a ``Diagnostic``.

Rules create them, renderers (text, JSON, SARIF, GitHub) print them. Each code is
registered once, beside the rule that reports it, with a title, a default severity, a long
explanation and an example (a small model that makes tritonctl report it), which
``tritonctl validate --explain CODE`` prints and runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonctl.repo_schema.examples import Example


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@dataclass(frozen=True, order=True)
class Span:
    """1-based line and column of the first character; end is exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


@dataclass(frozen=True)
class CodeInfo:
    code: str
    title: str
    severity: Severity
    explanation: str
    triton_rule: str = ""  # the rule ID in Triton's behaviour catalogue, when it mirrors one
    fix: str = ""  # what `tritonctl validate --fix` does about it; empty when it is never fixed automatically
    example: Example | None = None  # a small model that makes tritonctl report the code (--explain runs it)


@dataclass
class Diagnostic:
    code: str
    severity: Severity
    message: str
    path: Path | None = None
    span: Span | None = None
    hint: str | None = None
    model: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def location(self) -> str:
        where = str(self.path) if self.path else "<input>"
        return f"{where}:{self.span}" if self.span else where

    def sort_key(self) -> tuple:
        return (str(self.path or ""), self.span or Span(0, 0, 0, 0), self.code)

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "path": str(self.path) if self.path else None,
            "line": self.span.line if self.span else None,
            "column": self.span.col if self.span else None,
            "end_line": self.span.end_line if self.span else None,
            "end_column": self.span.end_col if self.span else None,
            "hint": self.hint,
            "model": self.model,
            "notes": list(self.notes),
        }


_REGISTRY: dict[str, CodeInfo] = {}


def register(code: str, title: str, severity: Severity | str, explanation: str, triton_rule: str = "",
             example: Example | None = None) -> str:
    """Declare a diagnostic code, with the example ``--explain`` shows for it. Returns the code so
    modules can keep it as a constant."""
    if code in _REGISTRY:
        raise ValueError(f"diagnostic code {code} registered twice")
    _REGISTRY[code] = CodeInfo(code, title, Severity(severity), explanation.strip(), triton_rule, example=example)
    return code


def register_fix(code: str, description: str) -> None:
    """Mark a registered code as fixable by ``validate --fix``, saying what the fix does."""
    _REGISTRY[code] = replace(_REGISTRY[code], fix=description.strip())


def code_info(code: str) -> CodeInfo:
    _load_all_codes()
    return _REGISTRY[code]


def all_codes() -> dict[str, CodeInfo]:
    _load_all_codes()
    return dict(sorted(_REGISTRY.items()))


def _load_all_codes() -> None:
    # Codes are declared next to the rules that emit them; importing the rule
    # package registers every one, and the fixes package marks the fixable ones.
    from tritonctl.repo_schema import rules  # noqa: F401
    from tritonctl.repo_schema import fixes  # noqa: F401
