"""``tritonctl validate``: lint config.pbtxt files and repository layouts."""

from __future__ import annotations

import enum
import sys
from dataclasses import replace
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError


class OutputFormat(str, enum.Enum):  # the names of tritonctl.repo_schema.render.FORMATS
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class ColorChoice(str, enum.Enum):
    auto = "auto"
    always = "always"
    never = "never"

HELP = """Check model repositories, model directories or config.pbtxt files offline,
the way Triton would when loading them.

A config file on its own (or a directory with --config-only) gets every
check that needs only the config; version directories, model files and
ensemble members need the repository. GPU ids and KIND_GPU are checked
against the target server's GPUs given with --gpus N (or
TRITONCTL_ASSUME_GPUS=N), or this machine's with --gpus local.

Exit status: 0 no errors, 1 errors found (or warnings with --strict), 2
usage error. After --fix (or --diff) it is about what remains (or would
remain) after the fixes.

[bold]Examples[/bold]

  tritonctl validate ./model_repository

  tritonctl validate models/resnet/config.pbtxt --format json

  tritonctl validate configs/*.pbtxt --gpus 1

  tritonctl validate models/ --config-only

  tritonctl validate tensorrt_llm/config.pbtxt --set triton_max_batch_size=64

  tritonctl validate models/ --format sarif --output tritonctl.sarif

  tritonctl validate models/ --strict --ignore TXT52 --ignore IO51

  tritonctl validate models/ --fix

  tritonctl validate models/ --diff

  tritonctl validate --explain IO03

  tritonctl validate --list-codes
"""


def validate(
    paths: list[Path] = typer.Argument(None, metavar="PATH...", show_default=False,
                                       help="Repositories, model directories, config files or directories of config files."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="Output format."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 on warnings too."),
    ignore: list[str] = typer.Option(None, "--ignore", metavar="CODE",
                                     help="Do not report CODE (repeatable, or comma-separated)."),
    model_config_name: str = typer.Option(None, "--model-config-name", metavar="NAME",
                                          help="Use configs/<NAME>.pbtxt where present, like tritonserver."),
    config_only: bool = typer.Option(False, "--config-only",
                                     help="Check only the config files under each PATH, without version "
                                     "directories, model files or ensemble members."),
    gpus: str = typer.Option(None, "--gpus", metavar="N|local", envvar="TRITONCTL_ASSUME_GPUS", show_envvar=True,
                             help="The target server's GPU count, or 'local' for this machine's GPUs. "
                             "Unset: GPU ids and KIND_GPU are not checked."),
    values: list[str] = typer.Option(None, "--set", metavar="NAME=VALUE",
                                     help="Fill the template placeholder ${NAME} (or $NAME) with VALUE before "
                                     "checking, as tools/fill_template.py does (repeatable)."),
    explain: str = typer.Option(None, "--explain", metavar="CODE",
                                help="Explain a diagnostic code (no PATH needed)."),
    list_codes: bool = typer.Option(False, "--list-codes", help="List every diagnostic code."),
    output: Path = typer.Option(None, "--output", "-o", metavar="FILE",
                                help="Write the report to FILE instead of standard output."),
    color: ColorChoice = typer.Option(ColorChoice.auto, "--color",
                                      help="Colour the text format: auto means on a terminal, unless NO_COLOR "
                                      "is set."),
    fix: bool = typer.Option(False, "--fix", help="Apply the unambiguous fixes to the config files (comments and "
                             "layout kept), print them as a unified diff, then report what remains."),
    diff: bool = typer.Option(False, "--diff", help="Print the fixes --fix would make as a unified diff; "
                              "write nothing."),
    no_exec: bool = typer.Option(False, "--no-exec",
                                 help="Never run model code. By default a Python model's auto_complete_config "
                                 "runs in a separate process (30 s limit), as in Triton, and the config it "
                                 "completes is checked."),
) -> None:
    if explain is not None:
        from tritonctl.repo_schema.render.codes import explain_text

        _emit(explain_text(_known_code(explain)), output)
        raise typer.Exit(0)
    if list_codes:
        from tritonctl.repo_schema.render.codes import codes_table

        _emit(codes_table(), output)
        raise typer.Exit(0)
    if not paths:
        raise CliError("give at least one repository, model directory or config.pbtxt "
                       "(or --explain CODE, --list-codes)", 2)
    ignored = frozenset(_known_code(code) for item in ignore or [] for code in item.split(",") if code.strip())

    from tritonctl.repo_schema.context import CheckOptions
    from tritonctl.repo_schema.gpus import target_gpus
    from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy
    from tritonctl.repo_schema.render import render, summary_line, use_color
    from tritonctl.repo_schema.validate import UsageError, validate_paths

    try:
        options = CheckOptions(config_only=config_only, gpus=target_gpus(gpus),
                               model_code=ModelCodePolicy(run=not no_exec))
    except ValueError as exc:
        raise CliError(f"{exc} (from --gpus or TRITONCTL_ASSUME_GPUS)", 2) from None
    options = replace(options, values=_template_values(values or []))
    if options.values and (fix or diff):
        raise CliError("--set cannot be combined with --fix or --diff: the fixes would write filled values "
                       "into the template", 2)

    def run():
        return validate_paths(list(paths), model_config_name, ignored, options)

    try:
        if fix or diff:
            report = _apply_fixes(run, write=not diff, output=output, diff_to_stderr=output_format.value != "text")
            if diff:
                raise typer.Exit(1 if report.errors > 0 or (strict and report.warnings > 0) else 0)
        report = run()
    except UsageError as exc:
        raise CliError(str(exc), 2) from None
    for name in dict(options.values):
        if name not in report.filled:
            typer.echo(f"warning: --set {name}: no ${{{name}}} placeholder in the checked configs", err=True)
    to_file = output is not None and str(output) != "-"
    fmt = output_format.value
    text = render(report, fmt, color=fmt == "text" and use_color(color.value, None if to_file else sys.stdout))
    _emit(text, output)
    if to_file:
        typer.echo(f"wrote {output}: {summary_line(report)}", err=True)
    if fmt == "text" and not fix:
        _hint_fixable(report)
    failed = report.errors > 0 or (strict and report.warnings > 0)
    raise typer.Exit(1 if failed else 0)


def _hint_fixable(report) -> None:
    from tritonctl.repo_schema.fixes.engine import count_fixable

    count = count_fixable(report)
    if count:
        typer.echo(f"{count} of these can be fixed with `tritonctl validate --fix` (preview: --diff)", err=True)


def _apply_fixes(run, write: bool, output: Path | None, diff_to_stderr: bool):
    """--fix / --diff: the diff goes to standard output (standard error when the report there is
    machine-readable); a summary line to standard error. Returns the report after the fixes."""
    from tritonctl.repo_schema.fixes import fix_to_fixed_point
    from tritonctl.repo_schema.render import summary_line

    outcome = fix_to_fixed_point(run)
    text = outcome.diff()
    if write:
        try:
            outcome.write()
        except OSError as exc:
            raise CliError(f"cannot write the fixes: {exc.strerror or exc} ({exc.filename})", 2) from None
        if text:
            (sys.stderr if diff_to_stderr else sys.stdout).write(text)
    else:
        _emit(text, output)
    files = len(outcome.changes)
    done = "fixed" if write else "would fix"
    remains = "remains" if write else "would remain"
    typer.echo(f"{done} {outcome.fixed} problem{'s' if outcome.fixed != 1 else ''} in {files} "
               f"file{'s' if files != 1 else ''}; {remains}: {summary_line(outcome.report)}", err=True)
    return outcome.report


def _template_values(items: list[str]) -> tuple[tuple[str, str], ...]:
    """--set NAME=VALUE items, in order (a later NAME wins)."""
    import re

    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[_A-Za-z][_A-Za-z0-9]*", name):
            raise CliError(f"--set takes NAME=VALUE with NAME a template variable (letters, digits, _), not "
                           f"{item!r}", 2)
        values[name] = value
    return tuple(values.items())


def _known_code(text: str) -> str:
    from tritonctl.repo_schema.render.codes import resolve_code, unknown_code_message

    code, suggestion = resolve_code(text.strip())
    if code is None:
        raise CliError(unknown_code_message(text.strip(), suggestion), 2)
    return code


def _emit(text: str, output: Path | None) -> None:
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}", 2) from None


def register(app: typer.Typer) -> None:
    """Add ``tritonctl validate`` to ``app``."""
    app.command("validate", help=HELP, no_args_is_help=True)(validate)
