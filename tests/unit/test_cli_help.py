"""Every command's --help, as a terminal shows it: rich reads ':name:' in help text as an emoji
code, so a usage such as START:END:STEP once showed as START🔚STEP."""

from __future__ import annotations

import pytest
import typer.main
from rich._emoji_codes import EMOJI

from helpers.cli_runner import cli
from tritonctl.cli.app import create_app

EMOJI_CHARACTERS = {char for emoji in EMOJI.values() for char in emoji if ord(char) > 0x2000}


def _command_paths(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    for name, sub in getattr(command, "commands", {}).items():  # a group's sub-commands
        paths += _command_paths(sub, (*path, name))
    return paths


@pytest.mark.parametrize("path", _command_paths(typer.main.get_command(create_app())), ids=" ".join)
def test_help_is_shown_as_written(capsys, monkeypatch, path):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli(capsys, *path, "--help")
    assert code == 0 and "Usage:" in out
    assert not EMOJI_CHARACTERS & set(out), sorted(EMOJI_CHARACTERS & set(out))
