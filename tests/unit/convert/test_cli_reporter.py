"""The build command's display: stages, TensorRT builder phases as nested bars, the table."""

from __future__ import annotations

import io

from rich.console import Console

from tritonctl.cli.build import RichReporter
from tritonctl.convert.accuracy import AccuracyReport, OutputCheck
from tritonctl.convert.tensorrt_build import ProgressEvent


def _reporter() -> tuple[RichReporter, io.StringIO]:
    reporter = RichReporter()
    buffer = io.StringIO()
    reporter.console = Console(file=buffer, width=120, highlight=False, soft_wrap=True)
    return reporter, buffer


def test_builder_phases_nest_and_finish():
    reporter, buffer = _reporter()
    with reporter.stage("build TensorRT engine"):
        reporter.engine_progress(ProgressEvent("start", "Building engine", None, 3))
        reporter.engine_progress(ProgressEvent("start", "Tactic timing", "Building engine", 10))
        reporter.engine_progress(ProgressEvent("step", "Tactic timing", steps=4))
        progress = reporter._progress
        tasks = {t.description: t for t in progress.tasks}
        assert tasks["  Tactic timing"].completed == 5 and tasks["  Tactic timing"].total == 10
        assert tasks["Building engine"].total == 3
        reporter.engine_progress(ProgressEvent("finish", "Tactic timing"))
        assert [t.description for t in progress.tasks] == ["Building engine"]
        reporter.engine_progress(ProgressEvent("finish", "Building engine"))
    assert reporter._progress is None  # the bars end with their stage
    assert "✓ build TensorRT engine" in buffer.getvalue()


def test_accuracy_table_marks_failures():
    reporter, buffer = _reporter()
    report = AccuracyReport(1e-4, 1e-4, [OutputCheck("logits", 0.5, 0.25, 3, 40),
                                         OutputCheck("pooled", 0.0, 0.0, 0, 8)], inputs="random")
    reporter.accuracy(report)
    text = buffer.getvalue()
    assert "accuracy (atol 0.0001, rtol 0.0001)" in text
    assert "logits" in text and "3/40" in text and "FAIL" in text and "0.25" in text
    assert "pooled" in text and "ok" in text and "inputs: random" in text
