"""Runs the tritonctl command in the test's own process, as a user would type it."""

from __future__ import annotations

from tritonctl.cli.app import main


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run tritonctl with ``args``; returns (exit status, stdout, stderr)."""
    message = ""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):  # what Python would print to stderr on the way out
            message = f"{exc.code}\n"
    captured = capsys.readouterr()
    return code, captured.out, captured.err + message
