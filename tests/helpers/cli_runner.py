"""Runs the tritonctl command in the test's own process, as a user would type it."""

from __future__ import annotations

from tritonctl.cli.app import main


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run tritonctl with ``args``; returns (exit status, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err
