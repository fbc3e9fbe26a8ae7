"""The four renderers on real repositories written to disk."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, Span, all_codes
from tritonctl.repo_schema.render import render, summary_line, use_color
from tritonctl.repo_schema.render.code_examples import working_directory, write_model
from tritonctl.repo_schema.render.github import annotation, escape_data, escape_property
from tritonctl.repo_schema.validate import ValidationReport, validate_paths

ANSI = re.compile(r"\x1b\[[0-9;]*m")

BROKEN = '''backend: "python"
max_batch_size: 8
inputs [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''
NEGATIVE = '''backend: "python"
max_batch_size: -2
parameters { key: "mode" value { string_value: "a" } }
parameters { key: "mode" value { string_value: "b" } }
'''
CLEAN = '''backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''


@pytest.fixture
def repo(tmp_path: Path):
    """A repository with one syntax error, one rule error plus a warning, one clean model;
    validated from inside tmp_path so paths are relative."""
    write_model(tmp_path / "models" / "broken", BROKEN)
    write_model(tmp_path / "models" / "negative", NEGATIVE)
    write_model(tmp_path / "models" / "clean", CLEAN)
    with working_directory(tmp_path):
        yield validate_paths([Path("models")])


def test_text_shows_header_location_frame_caret_label_help_and_summary(repo):
    text = render(repo, "text")
    assert "error[TXT02]: unknown field 'inputs' in ModelConfig\n" in text
    block = text.split("error[TXT02]")[1].split("\n\n")[0]
    assert block.splitlines()[1:] == [
        " --> models/broken/config.pbtxt:3:1",
        "  |",
        "3 | inputs [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] } ]",
        "  | ^^^^^^ unknown field",
        "  |",
        "  = help: did you mean 'input'?",
    ]
    assert "error[TOP03]: max_batch_size is -2; it must be 0 or more" in text
    assert "2 | max_batch_size: -2\n  |                 ^^ max_batch_size is negative" in text
    assert "warning[TXT52]" in text
    assert text.endswith("2 errors, 1 warning in 3 models\n")
    assert not ANSI.search(text)


def test_text_in_colour_only_adds_styling(repo):
    coloured = render(repo, "text", color=True)
    assert "\x1b[1;31merror[TXT02]" in coloured
    assert ANSI.sub("", coloured) == render(repo, "text")


def test_text_frames_tabs_multiline_spans_and_pathless_diagnostics(tmp_path):
    config = tmp_path / "config.pbtxt"
    config.write_text("dynamic_batching {\n\tmax_queue_delay_microseconds: 100\n  a: 1\n  b: 2\n  c: 3\n}\n")
    report = ValidationReport([
        Diagnostic("TXT02", Severity.ERROR, "tab line", config, Span(2, 2, 2, 30), "fix it"),
        Diagnostic("TXT05", Severity.ERROR, "long block", config, Span(1, 18, 6, 2), None, notes=["see here"]),
        Diagnostic("TOP02", Severity.WARNING, "a directory problem", tmp_path, None, "rename it"),
    ], models_checked=1)
    text = render(report, "text")
    # The tab is shown as four spaces and the caret still lines up under the field name.
    assert "2 |     max_queue_delay_microseconds: 100\n  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^ unknown field" in text
    # A six-line span shows its first two and last two lines around an elision.
    long_block = text.split("error[TXT05]")[1].split("\n\n")[0]
    assert "1 | dynamic_batching {" in long_block and "..." in long_block and "6 | }" in long_block
    assert "  = note: see here" in long_block
    # Without a span only the path is printed, then the help.
    pathless = text.split("warning[TOP02]: a directory problem\n")[1].split("\n\n")[0]
    assert pathless.splitlines() == [f" --> {tmp_path}", "  = help: rename it"]


def test_text_renders_thousands_of_diagnostics_fast(tmp_path):
    config = tmp_path / "config.pbtxt"
    config.write_text("".join(f"field_{i}: {i}\n" for i in range(500)))
    diagnostics = [Diagnostic("TXT02", Severity.ERROR, f"unknown field 'field_{i % 500}'", config,
                              Span(i % 500 + 1, 1, i % 500 + 1, 9), "did you mean 'name'?") for i in range(5000)]
    report = ValidationReport(diagnostics, models_checked=500)
    render(report, "text", color=True)  # warm up rich's style parser
    start = time.perf_counter()
    text = render(report, "text", color=True)
    elapsed = time.perf_counter() - start
    assert text.count("error[TXT02]") == 5000
    assert elapsed < 0.5, f"{elapsed:.3f}s for 5000 diagnostics"


def test_summary_line_wording():
    assert summary_line(ValidationReport([], 1)) == "no problems in 1 model"
    one = Diagnostic("TXT52", Severity.WARNING, "w")
    assert summary_line(ValidationReport([one], 14)) == "1 warning in 14 models"


def test_use_color_respects_choice_no_color_and_terminal(monkeypatch, tmp_path):
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color("auto", Terminal()) is True
    with open(tmp_path / "out.txt", "w") as not_a_terminal:
        assert use_color("auto", not_a_terminal) is False
        assert use_color("always", not_a_terminal) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color("auto", Terminal()) is False
    assert use_color("always", Terminal()) is True
    assert use_color("never", Terminal()) is False


def test_json_has_the_documented_stable_shape(repo):
    data = json.loads(render(repo, "json"))
    assert data["version"] == 1
    assert data["summary"] == {"errors": 2, "warnings": 1, "notes": 0, "models_checked": 3}
    first = data["diagnostics"][0]
    assert set(first) == {"code", "severity", "title", "message", "path", "line", "column", "end_line",
                          "end_column", "hint", "model", "notes", "triton_rule"}
    assert (first["code"], first["path"], first["line"], first["column"], first["end_column"]) == (
        "TXT02", "models/broken/config.pbtxt", 3, 1, 7)
    assert first["title"] == "unknown field" and first["triton_rule"] == "TXT-02"


def test_sarif_has_the_required_2_1_0_structure(repo, tmp_path):
    with working_directory(tmp_path):
        log = json.loads(render(repo, "sarif"))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tritonctl" and driver["version"]
    assert re.match(r"https?://", driver["informationUri"])
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == sorted(all_codes())
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", rule["name"])
        assert "\n    " not in rule["fullDescription"]["text"]  # reflowed, not the source indentation
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == tmp_path.resolve().as_uri() + "/"
    assert len(run["results"]) == 3
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note") and result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not location["artifactLocation"]["uri"].startswith(("/", "file:"))
        region = location["region"]
        assert all(isinstance(region[k], int) and region[k] >= 1
                   for k in ("startLine", "startColumn", "endLine", "endColumn"))
    txt02 = next(r for r in run["results"] if r["ruleId"] == "TXT02")
    assert txt02["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "models/broken/config.pbtxt", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 7}}
    assert txt02["message"]["text"] == "unknown field 'inputs' in ModelConfig\nhelp: did you mean 'input'?"


def test_sarif_uses_absolute_uris_outside_the_current_directory(repo, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with working_directory(tmp_path):
        absolute = [Diagnostic(d.code, d.severity, d.message, d.path.resolve(), d.span) for d in repo.diagnostics]
    with working_directory(elsewhere):
        log = json.loads(render(ValidationReport(absolute, 3), "sarif"))
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": (tmp_path / "models/broken/config.pbtxt").resolve().as_uri()}


def test_github_escaping_follows_the_runner():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotations(repo):
    lines = render(repo, "github").splitlines()
    assert lines[0] == ("::error file=models/broken/config.pbtxt,line=3,endLine=3,col=1,endColumn=7,"
                        "title=TXT02::unknown field 'inputs' in ModelConfig%0Ahelp: did you mean 'input'?")
    assert any(line.startswith("::warning file=models/negative/config.pbtxt,line=4,") for line in lines)
    assert lines[-1] == "tritonctl validate: 2 errors, 1 warning in 3 models"


def test_github_multiline_span_and_odd_file_names(tmp_path):
    odd = tmp_path / "a,b:c" / "config.pbtxt"
    diagnostic = Diagnostic("TXT05", Severity.INFO, "50% of\nit", odd, Span(1, 3, 4, 2), "h")
    line = annotation(diagnostic, cwd=tmp_path)
    assert line == "::notice file=a%2Cb%3Ac/config.pbtxt,line=1,endLine=4,title=TXT05::50%25 of%0Ait%0Ahelp: h"
