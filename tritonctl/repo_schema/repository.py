"""The on-disk layout of a model repository: which directories are models,
which config file each one uses, and its version directories."""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.diagnostics import Span
from tritonctl.repo_schema.schema import model_config_pb2

CONFIG_FILENAME = "config.pbtxt"
# max_batch_size of a template whose max_batch_size is an unfilled placeholder.
UNKNOWN_MAX_BATCH_SIZE = 2**31 - 1
# Subdirectories of a model that Triton never treats as versions (VP-01).
SPECIAL_SUBDIRS = frozenset({"warmup", "initial_state", "configs"})
# Config texts that stand in for the files on disk (``validate --fix`` checks its edits before writing).
_CONFIG_OVERLAY: ContextVar[dict[Path, str] | None] = ContextVar("config_overlay", default=None)


@contextmanager
def config_overlay(texts: dict[Path, str]):
    """Read these texts instead of the files at their (resolved) paths while the block runs."""
    token = _CONFIG_OVERLAY.set({path.resolve(): text for path, text in texts.items()})
    try:
        yield
    finally:
        _CONFIG_OVERLAY.reset(token)


def read_config_text(path: Path) -> str:
    overlay = _CONFIG_OVERLAY.get()
    if overlay:
        text = overlay.get(path.resolve())
        if text is not None:
            return text
    return path.read_text(encoding="utf-8", errors="replace")


def not_utf8_warning(path: Path) -> textproto.Diagnostic | None:
    """TXT54 at the first byte of ``path`` that is not UTF-8, or None."""
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
        return None
    except OSError:
        return None
    except UnicodeDecodeError as exc:
        start = exc.start
    before = raw[:start]
    line = before.count(b"\n") + 1
    col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
    return textproto.Diagnostic(
        textproto.NOT_UTF8, textproto.Severity.WARNING,
        f"{path.name} is not UTF-8: byte 0x{raw[start]:02x} at line {line}, column {col}", path,
        Span(line, col, line, col + 1), hint="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)")


@dataclass(frozen=True)
class VersionDir:
    """A subdirectory of a model directory and what Triton makes of its name (VP-02)."""

    path: Path
    version: int | None  # None: Triton ignores this directory
    reason: str = ""  # why it is ignored, or how the name was read

    @property
    def name(self) -> str:
        return self.path.name


def parse_version_dir_name(name: str) -> tuple[int | None, str]:
    """Triton reads version names with std::stoll after skipping leading-zero names."""
    if len(name) > 1 and name.startswith("0"):
        return None, "it has leading zeros"
    match = re.match(r"[ \t]*[+-]?\d+", name)
    if match is None:
        return None, "it is not a number"
    value = int(match.group())
    if not -(2**63) <= value < 2**63:
        return None, "the number is out of range"
    if match.end() != len(name):
        return value, f"Triton reads it as version {value} and ignores the rest of the name"
    return value, ""


def version_dirs(model_dir: Path) -> list[VersionDir]:
    result = []
    try:
        entries = sorted(p for p in model_dir.iterdir() if p.is_dir())
    except OSError:
        return result
    for path in entries:
        if path.name in SPECIAL_SUBDIRS:
            continue
        version, reason = parse_version_dir_name(path.name)
        result.append(VersionDir(path, version, reason))
    return result


def config_path_for(model_dir: Path, config_name: str | None = None) -> Path:
    """The file Triton reads for this model (REPO-05): configs/<name>.pbtxt when it exists."""
    if config_name:
        custom = model_dir / "configs" / f"{config_name}.pbtxt"
        if custom.is_file():
            return custom
    return model_dir / CONFIG_FILENAME


@dataclass
class ModelSource:
    """One model directory and its config as written on disk."""

    model_dir: Path
    config_name: str | None = None
    config_file: Path | None = None  # an explicitly chosen config file, instead of Triton's lookup
    # A config file not named config.pbtxt has no model directory to take its name from.
    name_override: str | None = None
    # Template placeholders filled before parsing (validate --set NAME=VALUE).
    values: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return self.name_override or self.model_dir.name

    @cached_property
    def config_path(self) -> Path:
        return self.config_file or config_path_for(self.model_dir, self.config_name)

    @cached_property
    def has_config(self) -> bool:
        try:
            return self.config_path.is_file()
        except OSError:
            return True  # there, but unreadable: ``parsed`` says so (TXT08)

    @cached_property
    def parsed(self) -> textproto.ParseResult:
        """The config file parsed; an empty config when there is no file (auto-complete)."""
        model_config = model_config_pb2().ModelConfig
        if not self.has_config:
            return textproto.parse("", model_config, None)
        try:
            text = read_config_text(self.config_path)
        except OSError as exc:
            result = textproto.parse("", model_config, self.config_path)
            result.message = None
            result.diagnostics.append(textproto.Diagnostic(
                textproto.UNREADABLE, textproto.Severity.ERROR,
                f"cannot read {self.config_path.name}: {exc.strerror or exc}", self.config_path,
                hint="make the file readable (chmod a+r) and its directories searchable (chmod a+x) "
                     "for the user the server runs as"))
            return result
        result = textproto.parse(text, model_config, self.config_path, self.values)
        if "\ufffd" in text:
            warning = not_utf8_warning(self.config_path)
            if warning is not None:
                result.diagnostics.append(warning)
        if result.ok and ("max_batch_size",) in result.placeholder_paths:
            # A template that leaves max_batch_size open is a batching model; checked as one
            # with no upper bound (0 would make every batching field look wrong).
            result.message.max_batch_size = UNKNOWN_MAX_BATCH_SIZE
        return result

    @cached_property
    def versions(self) -> list[VersionDir]:
        return version_dirs(self.model_dir)


def looks_like_model_dir(path: Path) -> bool:
    if (path / CONFIG_FILENAME).is_file():
        return True
    return any(v.version is not None for v in version_dirs(path))


def model_dirs(repository: Path) -> list[Path]:
    """Every subdirectory of a repository root is a model candidate, hidden ones too (REPO-01)."""
    return sorted(p for p in repository.iterdir() if p.is_dir())
