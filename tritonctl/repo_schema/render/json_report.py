"""Machine-readable JSON. The shape is stable and documented in docs/validate.md:

    {"version": 1,
     "tool": {"name": "tritonctl", "version": "0.1.0"},
     "summary": {"errors": 2, "warnings": 1, "notes": 0, "models_checked": 14},
     "diagnostics": [{"code", "severity", "title", "message", "path", "line", "column",
                      "end_line", "end_column", "hint", "model", "notes", "triton_rule"}]}

Lines and columns are 1-based, end_column is exclusive, columns count characters;
location fields are null for diagnostics about a directory or file as a whole.
"""

from __future__ import annotations

import json

from tritonctl import __version__
from tritonctl.repo_schema.diagnostics import all_codes
from tritonctl.repo_schema.validate import ValidationReport

JSON_FORMAT_VERSION = 1


def report_dict(report: ValidationReport) -> dict:
    codes = all_codes() if report.diagnostics else {}
    diagnostics = []
    for d in report.diagnostics:
        entry = d.to_dict()
        info = codes.get(d.code)
        entry["title"] = info.title if info else ""
        entry["triton_rule"] = (info.triton_rule or None) if info else None
        diagnostics.append(entry)
    return {
        "version": JSON_FORMAT_VERSION,
        "tool": {"name": "tritonctl", "version": __version__},
        "summary": {
            "errors": report.errors,
            "warnings": report.warnings,
            "notes": len(report.diagnostics) - report.errors - report.warnings,
            "models_checked": report.models_checked,
        },
        "diagnostics": diagnostics,
    }


def render_json(report: ValidationReport) -> str:
    return json.dumps(report_dict(report), indent=2) + "\n"
