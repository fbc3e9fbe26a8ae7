"""``tritonctl serve --engine triton``: validate the repository as ``tritonctl validate`` does, then run a
real tritonserver with the same options."""

from __future__ import annotations

import sys

import typer

from tritonctl.cli.errors import CliError
from tritonctl.serve.tritonserver import (TritonserverError, TritonserverOptions, find_tritonserver,
                                          run_tritonserver, tritonserver_command)


def serve_with_tritonserver(options: TritonserverOptions, binary: str | None, validate: bool = True) -> int:
    """Validate, then run tritonserver in the foreground; its exit status."""
    try:
        found = find_tritonserver(binary)
    except TritonserverError as exc:
        raise CliError(str(exc), 2) from None
    if validate:
        _validate_or_refuse(options)
    command = tritonserver_command(found, options)
    typer.echo("starting " + " ".join(command), err=True)
    try:
        return run_tritonserver(command)
    except TritonserverError as exc:
        raise CliError(str(exc)) from None


def _validate_or_refuse(options: TritonserverOptions) -> None:
    """Errors in the models tritonserver will load (every model unless explicit mode names some) stop
    the start, as they would stop tritonserver's own start-up (it exits on a model that fails)."""
    from tritonctl.repo_schema.context import CheckOptions
    from tritonctl.repo_schema.gpus import target_gpus
    from tritonctl.repo_schema.render import render, summary_line, use_color
    from tritonctl.repo_schema.validate import UsageError, validate_paths

    try:
        report = validate_paths([options.repository], options.model_config_name,
                                options=CheckOptions(gpus=target_gpus("local")))
    except UsageError as exc:
        raise CliError(str(exc), 2) from None
    explicit = options.control_mode == "explicit"
    loaded = None if not explicit or "*" in options.load_models else set(options.load_models)
    if loaded is not None:  # explicit mode: only the models loaded at start, and the repository itself
        report.diagnostics = [d for d in report.diagnostics if d.model is None or d.model in loaded]
    if report.diagnostics:
        typer.echo(render(report, "text", color=use_color("auto", sys.stderr)), err=True, nl=False)
    if report.errors:
        raise CliError(f"validate found errors in the repository ({summary_line(report)}); tritonserver was not "
                       "started. Fix them, or pass --skip-validation to start it anyway", 1)
    typer.echo(f"validated {options.repository}: {summary_line(report)}", err=True)
