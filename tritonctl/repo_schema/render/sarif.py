"""SARIF 2.1.0 for code-scanning tools (GitHub code scanning, Azure DevOps, IDEs).

One run; ``tool.driver.rules`` lists every diagnostic code with its title,
explanation and default level; each result points at its file relative to
``%SRCROOT%`` (the current directory, given in ``originalUriBaseIds``) with a
region in 1-based lines and Unicode code-point columns (endColumn exclusive).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from tritonctl import __version__
from tritonctl.repo_schema.diagnostics import CodeInfo, Diagnostic, Severity, all_codes
from tritonctl.repo_schema.render import reflow, rule_name
from tritonctl.repo_schema.validate import ValidationReport

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://pypi.org/project/tritonctl/"
SRCROOT = "%SRCROOT%"

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule(info: CodeInfo) -> dict:
    explanation = "\n\n".join(reflow(info.explanation))
    rule = {
        "id": info.code,
        "name": rule_name(info.title),
        "shortDescription": {"text": info.title},
        "fullDescription": {"text": explanation},
        "help": {"text": f"{explanation}\n\nMore: tritonctl validate --explain {info.code}"},
        "defaultConfiguration": {"level": _LEVEL[info.severity]},
    }
    if info.triton_rule:
        rule["properties"] = {"tritonRule": info.triton_rule}
    return rule


def artifact_location(path: Path, cwd: Path | None = None) -> dict:
    """A URI relative to %SRCROOT% for paths inside ``cwd``, else an absolute file URI."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.path.abspath(cwd or os.curdir))
    suffix = "/" if os.path.isdir(absolute) else ""
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return {"uri": Path(absolute).as_uri() + suffix}
    if relative == os.curdir:
        return {"uri": "./", "uriBaseId": SRCROOT}
    return {"uri": quote(Path(relative).as_posix()) + suffix, "uriBaseId": SRCROOT}


def _result(d: Diagnostic, rule_index: int | None, cwd: Path | None) -> dict:
    text = d.message + (f"\nhelp: {d.hint}" if d.hint else "") + "".join(f"\nnote: {n}" for n in d.notes)
    result: dict = {"ruleId": d.code, "level": _LEVEL[d.severity], "message": {"text": text}}
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    if d.path is not None:
        physical: dict = {"artifactLocation": artifact_location(d.path, cwd)}
        if d.span is not None:
            physical["region"] = {"startLine": d.span.line, "startColumn": d.span.col,
                                  "endLine": d.span.end_line, "endColumn": d.span.end_col}
        result["locations"] = [{"physicalLocation": physical}]
    if d.model:
        result["properties"] = {"model": d.model}
    return result


def sarif_log(report: ValidationReport, cwd: Path | None = None) -> dict:
    codes = all_codes()
    index = {code: i for i, code in enumerate(codes)}
    root = Path(os.path.abspath(cwd or os.curdir)).as_uri().rstrip("/") + "/"
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "tritonctl",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(info) for info in codes.values()],
            }},
            "invocations": [{"executionSuccessful": True}],
            "originalUriBaseIds": {SRCROOT: {"uri": root}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(d, index.get(d.code), cwd) for d in report.diagnostics],
        }],
    }


def render_sarif(report: ValidationReport, cwd: Path | None = None) -> str:
    return json.dumps(sarif_log(report, cwd), indent=2) + "\n"
