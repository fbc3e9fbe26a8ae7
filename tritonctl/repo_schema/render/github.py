"""GitHub Actions workflow commands, one annotation per diagnostic:

    ::error file=models/a/config.pbtxt,line=3,col=1,endLine=3,endColumn=6,title=TXT02::unknown field ...

Escaping follows GitHub's runner (toolkit/core command.ts): in the message '%', CR
and LF become %25, %0D, %0A; property values also escape ':' and ',' (%3A, %2C).
GitHub takes columns only for single-line spans; endColumn is exclusive, as in ruff's
GitHub output.
"""

from __future__ import annotations

import os
from pathlib import Path

from tritonctl.repo_schema.diagnostics import Diagnostic, Severity
from tritonctl.repo_schema.render import summary_line
from tritonctl.repo_schema.validate import ValidationReport

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def display_path(path: Path, cwd: Path | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the current directory) when it lies
    inside it, else absolute; always with '/' separators."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.path.abspath(cwd or os.curdir))
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return Path(absolute).as_posix()
    return Path(relative).as_posix()


def annotation(d: Diagnostic, cwd: Path | None = None) -> str:
    props: list[tuple[str, object]] = []
    if d.path is not None:
        props.append(("file", display_path(d.path, cwd)))
    if d.span is not None:
        props += [("line", d.span.line), ("endLine", d.span.end_line)]
        if d.span.end_line == d.span.line:
            props += [("col", d.span.col), ("endColumn", d.span.end_col)]
    props.append(("title", d.code))
    message = d.message + "".join(f"\nhelp: {d.hint}" for _ in [d.hint] if d.hint)
    message += "".join(f"\nnote: {note}" for note in d.notes)
    fields = ",".join(f"{key}={escape_property(str(value))}" for key, value in props)
    return f"::{_COMMAND[d.severity]} {fields}::{escape_data(message)}"


def render_github(report: ValidationReport, cwd: Path | None = None) -> str:
    lines = [annotation(d, cwd) for d in report.diagnostics]
    lines.append(f"tritonctl validate: {summary_line(report)}")
    return "\n".join(lines) + "\n"

