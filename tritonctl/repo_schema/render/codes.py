"""Looking up diagnostic codes for --ignore, --explain and --list-codes: spelling
tolerance ('io-03', 'IO3'), did-you-mean, the code table and the explanation page."""

from __future__ import annotations

import difflib
import re
import textwrap

from tritonctl.repo_schema.diagnostics import CodeInfo, Severity, all_codes
from tritonctl.repo_schema.render import reflow
from tritonctl.repo_schema.render.code_examples import example_output

WIDTH = 88


def normalize_code(text: str) -> str:
    """'io-03', 'IO3' and ' IO03 ' all mean IO03."""
    code = re.sub(r"[\s_-]+", "", text).upper()
    match = re.fullmatch(r"([A-Z]+)(\d)", code)
    return f"{match.group(1)}0{match.group(2)}" if match else code


def resolve_code(text: str) -> tuple[str | None, str | None]:
    """(the code, None) when known, else (None, a did-you-mean suggestion or None)."""
    codes = all_codes()
    code = normalize_code(text)
    if code in codes:
        return code, None
    close = difflib.get_close_matches(code, list(codes), n=1, cutoff=0.7)
    return None, (close[0] if close else None)


def unknown_code_message(text: str, suggestion: str | None) -> str:
    message = f"unknown diagnostic code '{text}'"
    if suggestion:
        message += f"; did you mean {suggestion}?"
    return message + " (tritonctl validate --list-codes shows them all)"


def mirrors(info: CodeInfo) -> str:
    if info.severity is Severity.INFO:
        related = f" (related to Triton rule {info.triton_rule})" if info.triton_rule else ""
        return f"a note, not a problem{related}"
    if info.triton_rule and int(re.sub(r"\D", "", info.code) or 0) < 50:
        return f"Triton rule {info.triton_rule}: Triton itself rejects this"
    if info.triton_rule:
        return (f"tritonctl check beyond Triton (related to Triton rule {info.triton_rule}): "
                "Triton accepts this without a word")
    return "tritonctl check beyond Triton: Triton accepts this without a word"


def codes_table() -> str:
    codes = all_codes()
    width = max((len(info.title) for info in codes.values()), default=0)
    lines = [f"{'CODE':<7} {'SEVERITY':<8} {'FIX':<3} {'TITLE':<{width}}  TRITON RULE"]
    for info in codes.values():
        fix = "yes" if info.fix else "-"
        lines.append(f"{info.code:<7} {info.severity.value:<8} {fix:<3} {info.title:<{width}}  "
                     f"{info.triton_rule or '-'}".rstrip())
    return "\n".join(lines) + "\n"


def explain_text(code: str) -> str:
    """The page --explain prints: title, severity, explanation, Triton rule, example."""
    info = all_codes()[code]
    out = [f"{info.code}: {info.title}", "",
           f"severity: {info.severity.value}",
           f"mirrors:  {mirrors(info)}",
           f"fixable:  {'yes, with tritonctl validate --fix (--diff to preview)' if info.fix else 'no'}", ""]
    for paragraph in reflow(info.explanation):
        indent = "  " if paragraph.startswith(("- ", "* ")) else ""
        out.extend(textwrap.wrap(paragraph, WIDTH, subsequent_indent=indent, break_on_hyphens=False))
        out.append("")
    if info.fix:
        out.append("What --fix does:")
        for paragraph in reflow(info.fix):
            out.extend(textwrap.wrap(paragraph, WIDTH, initial_indent="  ", subsequent_indent="  ",
                                     break_on_hyphens=False))
        out.append("")
    run = example_output(code)
    if run is None:
        out.append("Example: none recorded for this code yet.")
        return "\n".join(out).rstrip() + "\n"
    out.append("Example: a repository holding")
    out.append("")
    out.extend(f"    {name}" for name in run.files)
    for path, config in run.configs:
        out += ["", f"where {path} is", ""]
        out.extend(f"    {line}" if line else "" for line in config.splitlines())
    out += ["", "makes `tritonctl validate models/` report:", ""]
    out.extend(f"    {line}" if line else "" for line in run.output.splitlines())
    if run.fix_diff:
        out += ["", "and `tritonctl validate --fix models/` changes it (--diff shows this without writing):", ""]
        out.extend(f"    {line}" for line in run.fix_diff.splitlines())
    return "\n".join(out).rstrip() + "\n"
