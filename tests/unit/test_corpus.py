"""Every corpus config gets exactly the diagnostics its header promises."""

from __future__ import annotations

import pytest

from helpers.corpus_harness import cases, materialize
from tritonctl.repo_schema.validate import validate_paths

INVALID = cases("invalid")
VALID = cases("valid")


@pytest.fixture(autouse=True)
def _server_with_one_gpu(monkeypatch):
    """Expectations describe a server with one GPU, whatever machine runs the tests."""
    monkeypatch.setenv("TRITONCTL_ASSUME_GPUS", "1")


def _diagnostics(case, tmp_path):
    repo = tmp_path / "repo"
    model_dir = materialize(case, repo)
    report = validate_paths([repo])
    config = model_dir / "config.pbtxt"
    return [d for d in report.diagnostics if d.path in (config, model_dir) or d.model == case.model], config


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_config_reports_expected_diagnostics(case, tmp_path):
    assert case.expected, f"{case.path} has no '# expect:' line"
    found, config = _diagnostics(case, tmp_path)
    got = {(d.code, d.span.line, d.span.col) for d in found if d.span is not None and d.path == config}
    missing = [e for e in case.expected if e not in got]
    assert not missing, f"missing {missing}; got {[(d.code, str(d.span), d.message) for d in found]}"
    expected_codes = {code for code, _, _ in case.expected}
    stray = [(d.code, str(d.span), d.message) for d in found
             if d.severity.value == "error" and (d.code, d.span and d.span.line, d.span and d.span.col)
             not in set(case.expected) and d.code not in expected_codes]
    assert not stray, f"unexpected errors: {stray}"


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
def test_valid_config_is_clean(case, tmp_path):
    found, _ = _diagnostics(case, tmp_path)
    assert not found, [(d.code, d.location, d.message) for d in found]


def test_corpus_is_large_enough():
    assert len(INVALID) >= 150 and len(VALID) >= 30, (len(INVALID), len(VALID))
