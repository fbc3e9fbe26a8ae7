"""Human output in the style of rustc and ruff:

    error[TXT02]: unknown field 'inputs' in ModelConfig
     --> models/resnet/config.pbtxt:3:1
      |
    3 | inputs [
      | ^^^^^^ unknown field
      |
      = help: did you mean 'input'?

Colour comes from rich's styles (imported only when colour is on); the text
itself is assembled directly, so thousands of diagnostics render in milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, all_codes
from tritonctl.repo_schema.render import summary_line
from tritonctl.repo_schema.validate import ValidationReport

TAB = "    "
MAX_FRAME_LINES = 4  # a longer span shows its first and last lines around a '...'

_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}
_SEVERITY_WORD = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}

Paint = Callable[[str, str], str]


def _plain(text: str, style: str) -> str:
    return text


def _painter() -> Paint:
    from rich.color import ColorSystem
    from rich.style import Style

    cache: dict[str, Style] = {}

    def paint(text: str, style: str) -> str:
        if not text:
            return text
        parsed = cache.get(style)
        if parsed is None:
            parsed = cache[style] = Style.parse(style)
        return parsed.render(text, color_system=ColorSystem.STANDARD)

    return paint


class _Sources:
    """Lines of the files diagnostics point into, read once each."""

    def __init__(self) -> None:
        self._lines: dict[Path, list[str] | None] = {}

    def lines(self, path: Path) -> list[str] | None:
        if path not in self._lines:
            try:
                self._lines[path] = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self._lines[path] = None
        return self._lines[path]


def render_text(report: ValidationReport, color: bool = False, summary: bool = True) -> str:
    paint = _painter() if color else _plain
    titles = {code: info.title for code, info in all_codes().items()} if report.diagnostics else {}
    sources = _Sources()
    out: list[str] = []
    for diagnostic in report.diagnostics:
        _render_one(diagnostic, titles.get(diagnostic.code, ""), sources, paint, out)
        out.append("")
    if not summary:
        return "\n".join(out[:-1]) + "\n" if out else ""
    style = "bold red" if report.errors else "bold yellow" if report.warnings else "bold green"
    out.append(paint(summary_line(report), style))
    return "\n".join(out) + "\n"


def _render_one(d: Diagnostic, title: str, sources: _Sources, paint: Paint, out: list[str]) -> None:
    style = _SEVERITY_STYLE[d.severity]
    out.append(paint(f"{_SEVERITY_WORD[d.severity]}[{d.code}]", style) + paint(f": {d.message}", "bold"))
    lines = sources.lines(d.path) if (d.span is not None and d.path is not None) else None
    frame_lines = _frame_line_numbers(d, lines)
    width = len(str(frame_lines[-1])) if frame_lines else 1
    gutter = " " * width + " " + paint("|", "bold blue")
    out.append(" " * width + paint("--> ", "bold blue") + d.location)
    if frame_lines:
        out.append(gutter)
        _render_frame(d, lines, frame_lines, title, width, gutter, style, paint, out)
        if d.hint or d.notes:
            out.append(gutter)
    for prefix, text in [("help", d.hint)] * bool(d.hint) + [("note", n) for n in d.notes]:
        first, *rest = text.splitlines() or [""]
        out.append(" " * (width + 1) + paint(f"= {prefix}:", "bold") + f" {first}")
        out.extend(" " * (width + 4 + len(prefix)) + line for line in rest)


def _frame_line_numbers(d: Diagnostic, lines: list[str] | None) -> list[int]:
    if lines is None or d.span is None:
        return []
    first = min(d.span.line, len(lines))
    last = min(max(d.span.end_line, first), len(lines))
    if first < 1:
        return []
    if last - first + 1 <= MAX_FRAME_LINES:
        return list(range(first, last + 1))
    return [first, first + 1, -1, last - 1, last]  # -1 marks the elision


def _render_frame(d: Diagnostic, lines: list[str], numbers: list[int], label: str, width: int, gutter: str,
                  style: str, paint: Paint, out: list[str]) -> None:
    span = d.span
    single = len(numbers) == 1
    for index, number in enumerate(numbers):
        if number == -1:
            out.append(paint("...", "bold blue"))
            continue
        raw = lines[number - 1]
        text = raw.replace("\t", TAB)
        out.append(paint(f"{number:>{width}} |", "bold blue") + (f" {text}" if text else ""))
        is_last = index == len(numbers) - 1
        if index > 0 and not is_last:
            continue  # inside a multi-line span only its first and last lines are underlined
        start_col = span.col if number == span.line else len(raw) - len(raw.lstrip()) + 1
        end_col = span.end_col if number == span.end_line else len(raw) + 1
        if single and span.end_line > span.line:  # a span running past the end of the file
            end_col = len(raw) + 1
        start = len(raw[:start_col - 1].replace("\t", TAB))
        length = max(1, len(raw[start_col - 1:end_col - 1].replace("\t", TAB)))
        tail = f" {label}" if (is_last and label) else ""
        out.append(gutter + " " + " " * start + paint("^" * length + tail, style))
