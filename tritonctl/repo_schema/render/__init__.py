"""Renderers of a ValidationReport: human text, JSON, SARIF 2.1.0, GitHub annotations.

Each renderer is a function ``(report, ...) -> str``; ``render`` picks one by name.
They only read the report (and, for text, the source lines of the files it names).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tritonctl.repo_schema.validate import ValidationReport

FORMATS = ("text", "json", "sarif", "github")


def render(report: ValidationReport, fmt: str = "text", *, color: bool = False, cwd: Path | None = None) -> str:
    """The report as ``fmt`` (one of FORMATS). Paths in SARIF and GitHub output are
    made relative to ``cwd`` (default: the current directory) where possible."""
    if fmt == "text":
        from tritonctl.repo_schema.render.text import render_text

        return render_text(report, color=color)
    if fmt == "json":
        from tritonctl.repo_schema.render.json_report import render_json

        return render_json(report)
    if fmt == "sarif":
        from tritonctl.repo_schema.render.sarif import render_sarif

        return render_sarif(report, cwd=cwd)
    if fmt == "github":
        from tritonctl.repo_schema.render.github import render_github

        return render_github(report, cwd=cwd)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def use_color(choice: str, stream) -> bool:
    """Resolve --color: 'always' and 'never' win; 'auto' means a terminal, unless
    NO_COLOR is set (https://no-color.org) or TERM is 'dumb'. FORCE_COLOR forces it."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def summary_line(report: ValidationReport) -> str:
    """'2 errors, 1 warning in 14 models' or 'no problems in 3 models'."""
    parts = []
    for count, word in ((report.errors, "error"), (report.warnings, "warning"),
                        (len(report.diagnostics) - report.errors - report.warnings, "note")):
        if count:
            parts.append(f"{count} {word}{'s' if count != 1 else ''}")
    models = report.models_checked
    where = f"in {models} model{'s' if models != 1 else ''}"
    return f"{', '.join(parts)} {where}" if parts else f"no problems {where}"


def reflow(explanation: str) -> list[str]:
    """The paragraphs of a registered explanation, each on one line.

    Explanations are written as indented triple-quoted blocks; blank lines separate
    paragraphs and lines starting with '- ' begin list items."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in explanation.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("- ", "* ")):
            if current:
                paragraphs.append(" ".join(current))
            current = [stripped] if stripped else []
            continue
        current.append(stripped)
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def rule_name(title: str) -> str:
    """A PascalCase identifier from a code's title: 'max_batch_size is negative' ->
    'MaxBatchSizeIsNegative'."""
    return "".join(word[:1].upper() + word[1:] for word in re.split(r"[^0-9A-Za-z]+", title) if word)
