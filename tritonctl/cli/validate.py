"""``tritonctl validate``: lint config.pbtxt files and repository layouts."""

from __future__ import annotations

from pathlib import Path

import typer

from tritonctl.cli.app import CliError, app


@app.command(
    help="Check model repositories, model directories or config.pbtxt files offline.\n\n"
    "Examples:\n\n"
    "  tritonctl validate ./model_repository\n\n"
    "  tritonctl validate models/resnet/config.pbtxt --format json\n\n"
    "  tritonctl validate --explain IO03",
    no_args_is_help=True,
)
def validate(
    paths: list[Path] = typer.Argument(None, help="Repositories, model directories or config.pbtxt files."),
    model_config_name: str = typer.Option(None, "--model-config-name",
                                          help="Use configs/<NAME>.pbtxt where present, like tritonserver."),
) -> None:
    from tritonctl.repo_schema.validate import UsageError, validate_paths

    try:
        report = validate_paths(list(paths or []), model_config_name)
    except UsageError as exc:
        raise CliError(str(exc), 2) from None
    for d in report.diagnostics:
        typer.echo(f"{d.location}: {d.severity.value}[{d.code}]: {d.message}")
        if d.hint:
            typer.echo(f"  help: {d.hint}")
    raise typer.Exit(1 if report.errors else 0)
