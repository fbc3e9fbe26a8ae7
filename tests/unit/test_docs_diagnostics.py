"""docs/diagnostics.md is exactly what the current tritonctl prints for its ten cases.

When this fails because an output changed on purpose, regenerate the page:
    python -m tritonctl.cli.diagnostics_page docs/diagnostics.md
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tritonctl.cli.diagnostics_page import CASES, render_page, run_case

DOC = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def test_diagnostics_page_matches_current_output():
    expected = render_page()
    current = DOC.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(current.splitlines(True), expected.splitlines(True),
                                        "docs/diagnostics.md", "generated", n=1))
    assert current == expected, (
        "docs/diagnostics.md is stale; run `python -m tritonctl.cli.diagnostics_page "
        f"docs/diagnostics.md`\n{diff}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.title)
def test_every_case_shows_a_real_problem(case):
    status, output = run_case(case)
    assert "error[" in output or "warning[" in output, output
    assert "no problems" not in output


def test_ten_cases():
    assert len(CASES) == 10
