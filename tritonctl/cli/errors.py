"""The error a command raises for the user."""

from __future__ import annotations


class CliError(Exception):
    """An error for the user: printed as one line, exit code attached."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
