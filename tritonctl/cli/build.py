"""``tritonctl build``: a PyTorch or ONNX model -> a checked model repository entry."""

from __future__ import annotations

import contextlib
import enum
import time
from pathlib import Path
from typing import Iterator

import typer

from tritonctl.cli.errors import CliError
from tritonctl.cli.generate import Kind


class Format(str, enum.Enum):
    onnx = "onnx"
    plan = "plan"
    torchscript = "torchscript"


class Precision(str, enum.Enum):
    fp32 = "fp32"
    fp16 = "fp16"
    bf16 = "bf16"
    int8 = "int8"
    fp8 = "fp8"


HELP = """Build a model repository entry from an ONNX or PyTorch model.

SOURCE is an ONNX file, a TorchScript archive, a torch.export program
(.pt2), or module:function returning a torch.nn.Module (describe its inputs
with --input). PyTorch models are exported to ONNX with a dynamic batch
axis; ONNX models are checked, shape-inferred, given a dynamic batch when
they were exported with batch 1 (verified row by row) and constant-folded;
--format plan then builds a TensorRT engine; --format torchscript saves a
PyTorch source as a TorchScript model.pt (traced at batch 2) for Triton's
PyTorch backend instead of exporting it. The result is compared with the
source on the same inputs, written to REPO/NAME/VERSION with a config.pbtxt
and a build.json, and checked with tritonctl validate. A re-run with the
same source, options and tool versions reuses the earlier result.

[bold]Examples[/bold]

  tritonctl build resnet50.onnx --repo model_repository --name resnet50

  tritonctl build models.py:make_classifier --input image:fp32:3x224x224 --repo repo --name classifier

  tritonctl build bert.onnx --repo repo --name bert --format plan --precision fp16 --shape input_ids:1,128,512 --shape attention_mask:1,128,512 --timing-cache ~/.cache/trt.cache
"""


def build(
    source: str = typer.Argument(..., metavar="SOURCE", show_default=False,
                                 help="ONNX file, TorchScript (.pt), torch.export (.pt2) or module:function."),
    repo: Path = typer.Option(..., "--repo", metavar="DIR", help="Model repository to write into."),
    name: str = typer.Option(..., "--name", help="Model name (the directory under --repo)."),
    output_format: Format = typer.Option(Format.onnx, "--format",
                                         help="onnx (runs anywhere), plan (TensorRT) or torchscript (Triton's "
                                              "PyTorch backend; from PyTorch sources)."),
    version: int = typer.Option(1, "--version", metavar="N", help="Version directory."),
    max_batch_size: int = typer.Option(None, "--max-batch-size", metavar="B",
                                       help="Largest batch (default 8 when the model can batch, else 0)."),
    opt_batch_size: int = typer.Option(None, "--opt-batch-size", metavar="B",
                                       help="Batch TensorRT optimizes for (default: a power of two near max)."),
    shape: list[str] = typer.Option(None, "--shape", metavar="NAME:MIN,OPT,MAX",
                                    help="Range of an input's dims after the batch, each like 3x224x224 "
                                         "(repeatable); needed for dynamic dims of plans."),
    input_spec: list[str] = typer.Option(None, "--input", metavar="NAME:DTYPE:DIMS",
                                         help="A PyTorch model's input, dims after the batch, -1 for dynamic "
                                              "(repeatable, in forward() order)."),
    output_name: list[str] = typer.Option(None, "--output", metavar="NAME",
                                          help="Name of a PyTorch model's output (repeatable, in order)."),
    opset: int = typer.Option(18, "--opset", help="ONNX opset for PyTorch export."),
    precision: Precision = typer.Option(Precision.fp32, "--precision", help="TensorRT precision (plans)."),
    calibration_data: Path = typer.Option(None, "--calibration-data", metavar="PATH",
                                          help=".npz (or a directory of them) with real inputs: INT8 "
                                               "calibration and the accuracy check's inputs."),
    workspace: int = typer.Option(None, "--workspace", metavar="MiB", help="TensorRT workspace limit."),
    timing_cache: Path = typer.Option(None, "--timing-cache", metavar="PATH",
                                      help="TensorRT timing cache, read and updated (reused across builds)."),
    check: bool = typer.Option(True, "--check/--no-check", help="Compare the result with the source."),
    atol: float = typer.Option(None, "--atol", help="Absolute tolerance (default 1e-4; 1e-2 for fp16)."),
    rtol: float = typer.Option(None, "--rtol", help="Relative tolerance (default 1e-4; 1e-2 for fp16)."),
    dynamic_batching: bool = typer.Option(None, "--dynamic-batching/--no-dynamic-batching",
                                          help="Triton's dynamic batcher (default: on when max_batch_size > 1)."),
    preferred_batch_size: list[int] = typer.Option(None, "--preferred-batch-size", metavar="N",
                                                   help="Dynamic batcher preferred size (repeatable)."),
    max_queue_delay_us: int = typer.Option(None, "--max-queue-delay-us", metavar="N",
                                           help="Dynamic batcher queue delay in microseconds."),
    instances: int = typer.Option(None, "--instances", metavar="N", help="Instance count."),
    kind: Kind = typer.Option(None, "--kind", help="Instance kind (default: KIND_GPU for plans, Triton's choice "
                                                   "for ONNX)."),
    force: bool = typer.Option(False, "--force", help="Replace files this command did not write (kept as .bak)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the random check inputs."),
) -> None:
    from tritonctl.convert.errors import BuildError
    from tritonctl.convert.options import BuildOptions
    from tritonctl.convert.pipeline import build as run_build
    from tritonctl.convert.spec import SpecError, parse_input, parse_shape

    try:
        options = BuildOptions(
            source=source, repo=repo, name=name, format=output_format.value, version=version,
            max_batch_size=max_batch_size, opt_batch_size=opt_batch_size,
            shapes=[parse_shape(s) for s in shape or []], inputs=[parse_input(s) for s in input_spec or []],
            output_names=list(output_name or []), opset=opset, precision=precision.value,
            calibration_data=calibration_data, workspace_mib=workspace, timing_cache=timing_cache, check=check,
            atol=atol, rtol=rtol, dynamic_batching=dynamic_batching,
            preferred_batch_sizes=list(preferred_batch_size or []), max_queue_delay_us=max_queue_delay_us,
            instances=instances, kind=kind.value if kind else None, force=force, seed=seed)
    except SpecError as exc:
        raise CliError(str(exc), 2) from None
    reporter = RichReporter()
    try:
        result = run_build(options, reporter)
    except BuildError as exc:
        raise CliError(str(exc)) from None
    finally:
        reporter.close()
    console = reporter.console
    if result.reused:
        console.print(f"[green]up to date[/green] {result.model_path}")
        return
    console.print(f"[green]built[/green] {result.model_path}")
    console.print(f"[green]wrote[/green] {result.config_path} and {result.model_path.parent / 'build.json'}")
    console.print(f"tritonctl validate {result.model_dir}: no errors")


class RichReporter:
    """Stages as check-marked lines with times, TensorRT phases as nested progress bars,
    the accuracy check as a table; all on stderr."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self._progress = None
        self._tasks: dict[str, int] = {}
        self._depth: dict[str, int] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        with self.console.status(f"{name} ..."):
            yield
        self._stop_progress()
        self.console.print(f"[green]✓[/green] {name} [dim]({time.perf_counter() - start:.1f}s)[/dim]")

    def note(self, message: str) -> None:
        self.console.print(f"  [dim]{message}[/dim]")

    def engine_progress(self, event) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=self.console, transient=True)
            self._progress.start()
        if event.kind == "start":
            depth = self._depth.get(event.parent, -1) + 1 if event.parent else 0
            self._depth[event.phase] = depth
            self._tasks[event.phase] = self._progress.add_task("  " * depth + event.phase, total=event.steps or None)
        elif event.kind == "step" and event.phase in self._tasks:
            self._progress.update(self._tasks[event.phase], completed=event.steps + 1)
        elif event.kind == "finish" and event.phase in self._tasks:
            self._progress.remove_task(self._tasks.pop(event.phase))

    def accuracy(self, report) -> None:
        from rich.table import Table

        from tritonctl.convert.accuracy import table

        grid = Table(title=f"accuracy (atol {report.atol:g}, rtol {report.rtol:g})", title_justify="left")
        for column in ("output", "max abs error", "max rel error", "mismatched", "result"):
            grid.add_column(column, justify="left" if column in ("output", "result") else "right")
        for row in table(report):
            style = "green" if row[-1] == "ok" else "red"
            grid.add_row(*row[:-1], f"[{style}]{row[-1]}[/{style}]")
        self.console.print(grid)
        self.console.print(f"  [dim]inputs: {report.inputs}[/dim]")

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress, self._tasks, self._depth = None, {}, {}

    def close(self) -> None:
        self._stop_progress()


def register(app: typer.Typer) -> None:
    """Add ``tritonctl build`` to ``app``."""
    app.command("build", help=HELP, no_args_is_help=True)(build)
