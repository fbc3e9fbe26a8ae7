"""``tritonctl generate``: write config.pbtxt from a model file, or show the config
Triton would run a model directory with (``--effective``)."""

from __future__ import annotations

import enum
import json
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError


class Kind(str, enum.Enum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


class Backend(str, enum.Enum):
    onnxruntime = "onnxruntime"
    tensorrt = "tensorrt"


class ConfigFormat(str, enum.Enum):
    pbtxt = "pbtxt"
    json = "json"


HELP = """Write a config.pbtxt (and a repository entry) from an ONNX model or TensorRT plan.

Inputs, outputs and max_batch_size come from the model file, the rest from
Triton's defaults and your options. The result is checked with tritonctl validate.
With --effective, PATH is a model directory and the command prints the config
Triton would run it with, after normalization and auto-complete.

[bold]Examples[/bold]

  tritonctl generate resnet50.onnx --repo model_repository

  tritonctl generate model.onnx --name detector --max-batch-size 16 --preferred-batch-size 8 --max-queue-delay-us 500

  tritonctl generate bert.onnx --kind cpu --instances 4 --stdout

  tritonctl generate --effective model_repository/resnet50 --format json
"""


def generate(
    path: Path = typer.Argument(..., metavar="MODEL_FILE", show_default=False,
                                help="ONNX model or TensorRT plan (a model directory with --effective)."),
    repo: Path = typer.Option(Path("model_repository"), "--repo", metavar="DIR",
                              help="Model repository to write the entry into."),
    name: str = typer.Option(None, "--name", help="Model name (default: the model file's name)."),
    version: int = typer.Option(1, "--version", metavar="N", help="Version directory for the model file."),
    copy: bool = typer.Option(True, "--copy/--no-copy",
                              help="Copy the model file to <repo>/<name>/<version>/."),
    max_batch_size: int = typer.Option(None, "--max-batch-size", metavar="N",
                                       help="Largest batch (default: 4, Triton's auto-complete value; a plan's "
                                       "own limit; 0 when the model cannot batch)."),
    dynamic_batching: bool = typer.Option(None, "--dynamic-batching/--no-dynamic-batching",
                                          help="Enable Triton's dynamic batcher (default: when max_batch_size > 1)."),
    preferred_batch_size: list[int] = typer.Option(None, "--preferred-batch-size", metavar="N",
                                                   help="Preferred batch size for the dynamic batcher (repeatable)."),
    max_queue_delay_us: int = typer.Option(None, "--max-queue-delay-us", metavar="N",
                                           help="How long the batcher may wait to fill a batch, in microseconds."),
    instances: int = typer.Option(None, "--instances", metavar="N", help="Instances of the model (count)."),
    kind: Kind = typer.Option(None, "--kind", help="Where instances run (default: Triton's, GPU when present)."),
    backend: Backend = typer.Option(None, "--backend", help="Backend (default: from the file extension)."),
    force: bool = typer.Option(False, "--force", help="Replace existing files (kept as <file>.bak)."),
    stdout: bool = typer.Option(False, "--stdout", help="Print the config instead of writing files."),
    effective: bool = typer.Option(False, "--effective",
                                   help="Print the config Triton would run MODEL_DIR with."),
    output_format: ConfigFormat = typer.Option(ConfigFormat.pbtxt, "--format",
                                               help="With --effective: pbtxt, or json as GET /v2/models/<m>/config."),
    model_config_name: str = typer.Option(None, "--model-config-name", metavar="NAME",
                                          help="With --effective: use configs/<NAME>.pbtxt where present."),
    gpus: int = typer.Option(None, "--gpus", metavar="N",
                             help="With --effective: assume N GPUs (default: the GPUs of this machine)."),
) -> None:
    if effective:
        _show_effective(path, output_format, model_config_name, gpus)
        return
    from tritonctl.repo_schema.generate import GenerateError, GenerateOptions, config_from_model_file
    from tritonctl.repo_schema.modelfiles import ModelFileError

    if not path.exists():
        raise CliError(f"{path} does not exist", 2)
    options = GenerateOptions(
        name=name, backend=backend.value if backend else None, max_batch_size=max_batch_size,
        dynamic_batching=dynamic_batching, preferred_batch_sizes=list(preferred_batch_size or []),
        max_queue_delay_us=max_queue_delay_us, instances=instances, kind=kind.value if kind else None)
    try:
        generated = config_from_model_file(path, options)
    except (GenerateError, ModelFileError) as exc:
        raise CliError(str(exc)) from None
    for note in generated.notes:
        typer.echo(f"note: {note}", err=True)
    if stdout:
        typer.echo(generated.text(path), nl=False)
        return
    _write(generated, path, repo, version, copy, force)


def _write(generated, model_file: Path, repo: Path, version: int, copy: bool, force: bool) -> None:
    from tritonctl.repo_schema.generate import GenerateError, write_model_entry
    from tritonctl.repo_schema.validate import validate_paths

    try:
        entry = write_model_entry(generated, model_file, repo, version, copy=copy, force=force)
    except GenerateError as exc:
        raise CliError(str(exc)) from None
    for backup in entry.backups:
        typer.echo(f"kept the previous file as {backup}", err=True)
    typer.echo(f"wrote {entry.config_path}", err=True)
    if entry.model_path is not None:
        typer.echo(f"copied {model_file} to {entry.model_path}", err=True)
    placed = entry.model_dir / str(version) / generated.filename
    if not placed.exists():
        typer.echo(f"note: put the model at {placed}, then check the entry with "
                   f"tritonctl validate {entry.model_dir}", err=True)
        return
    report = validate_paths([entry.model_dir])
    _print_diagnostics(report.diagnostics)
    if report.errors:
        raise CliError(f"the generated entry has {report.errors} error(s) under tritonctl validate")
    typer.echo(f"tritonctl validate {entry.model_dir}: no errors", err=True)


def _show_effective(model_dir: Path, output_format: ConfigFormat, config_name: str | None,
                    gpus: int | None) -> None:
    from tritonctl.repo_schema.autocomplete import effective_config
    from tritonctl.repo_schema.diagnostics import Severity
    from tritonctl.repo_schema.writer import to_json_dict, to_pbtxt

    if not model_dir.is_dir():
        raise CliError(f"{model_dir} is not a model directory (--effective takes <repo>/<model>)", 2)
    if gpus is None:
        from tritonctl.repo_schema.gpus import detect_gpus

        gpu_ids = detect_gpus().ids
    elif gpus < 0:
        raise CliError("--gpus must be 0 or more", 2)
    else:
        gpu_ids = list(range(gpus))
    from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy

    # A Python model's auto_complete_config runs as in validate and in Triton.
    config, diagnostics = effective_config(model_dir, config_name, gpu_ids, model_code=ModelCodePolicy())
    _print_diagnostics(diagnostics)
    if config is not None:
        if output_format is ConfigFormat.json:
            typer.echo(json.dumps(to_json_dict(config), indent=2))
        else:
            typer.echo(to_pbtxt(config), nl=False)
    if config is None or any(d.severity is Severity.ERROR for d in diagnostics):
        raise typer.Exit(1)


def _print_diagnostics(diagnostics) -> None:
    for d in diagnostics:
        typer.echo(f"{d.location}: {d.severity.value}[{d.code}]: {d.message}", err=True)
        if d.hint:
            typer.echo(f"  help: {d.hint}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``tritonctl generate`` to ``app``."""
    app.command("generate", help=HELP, no_args_is_help=True)(generate)
