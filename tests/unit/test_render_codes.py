"""Code lookup for --ignore/--explain and the examples --explain shows."""

from __future__ import annotations

import pytest

from dataclasses import replace

from tritonctl.repo_schema import diagnostics
from tritonctl.repo_schema.diagnostics import all_codes
from tritonctl.repo_schema.render.code_examples import example_output
from tritonctl.repo_schema.render.codes import codes_table, explain_text, normalize_code, resolve_code


@pytest.mark.parametrize("text", ["TXT02", "txt02", "txt-02", "TXT2", " txt_02 "])
def test_spellings_of_a_code(text):
    assert normalize_code(text) == "TXT02"
    assert resolve_code(text) == ("TXT02", None)


def test_unknown_codes_get_a_close_suggestion_or_none():
    assert resolve_code("TXY02") == (None, "TXT02")
    assert resolve_code("QQQQ99") == (None, None)


EXAMPLES = {code: info.example for code, info in all_codes().items() if info.example is not None}


def test_most_codes_carry_their_example():
    assert len(EXAMPLES) >= 150


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_example_produces_its_code(code):
    run = example_output(code)
    example = EXAMPLES[code]
    if example.config is not None:
        assert run.configs[0] == (f"models/{example.model}/config.pbtxt", example.config)
    assert f"[{code}]: " in run.output, (
        f"the example registered with {code} no longer produces it")
    assert " --> models/" in run.output
    assert any(name.startswith(f"models/{EXAMPLES[code].model}/") for name in run.files)


def test_explain_page_for_a_code_without_an_example_still_explains(monkeypatch):
    code = next(iter(sorted(all_codes())))
    monkeypatch.setitem(diagnostics._REGISTRY, code, replace(all_codes()[code], example=None))
    page = explain_text(code)
    assert page.startswith(f"{code}: {all_codes()[code].title}\n")
    assert "Example: none recorded" in page


def test_codes_table_lists_every_code_once():
    rows = codes_table().splitlines()[1:]
    assert [row.split()[0] for row in rows] == sorted(all_codes())


def test_explain_says_whether_and_how_a_code_is_fixed():
    page = explain_text("TOP02")
    assert "fixable:  yes, with tritonctl validate --fix" in page and "What --fix does:" in page
    assert '    -name: "resnet"\n    +name: "resnet50"\n' in page  # the example, fixed by the real engine
    page = explain_text("TXT05")
    assert "fixable:  no" in page and "--fix models/" not in page
