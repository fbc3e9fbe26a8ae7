"""The ``tritonctl`` command: global options, error handling and sub-commands."""

from __future__ import annotations

import sys
import traceback

import typer

from tritonctl import __version__
from tritonctl.cli import analyze, build, export, generate, perf, serve, validate
from tritonctl.cli.errors import CliError
from tritonctl.optional import missing_dependency

# The sub-commands, in the order `tritonctl --help` lists them (the order of the workflow); each
# module's register() adds its own.
COMMANDS = (validate, generate, build, serve, perf, analyze, export)

_state: dict = {"debug": False, "command": None}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tritonctl {__version__}")
        raise typer.Exit()


def _main(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _state["debug"] = debug
    _state["command"] = ctx.invoked_subcommand


def create_app() -> typer.Typer:
    """The ``tritonctl`` typer application with its global options and every sub-command."""
    app = typer.Typer(
        name="tritonctl",
        help="Build, validate, serve and tune Triton model repositories.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
    )
    app.callback()(_main)
    for command in COMMANDS:
        command.register(app)
    return app


def main(argv: list[str] | None = None) -> None:
    try:
        create_app()(args=argv)  # click handles usage errors (exit 2) and typer.Exit itself
    except CliError as exc:
        _fail(str(exc), exc.exit_code, exc)
    except KeyboardInterrupt:
        _fail("interrupted", 130, None)
    except ImportError as exc:
        command = f"tritonctl {_state['command']}" if _state["command"] else "tritonctl"
        missing = missing_dependency(exc, command)
        _fail(str(missing) if missing else f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", 1, exc)
    except Exception as exc:
        _fail(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", 1, exc)


def _fail(message: str, code: int, exc: BaseException | None) -> None:
    if _state["debug"] and exc is not None:
        traceback.print_exception(exc)
    typer.echo(f"error: {message}", err=True)
    sys.exit(code)
