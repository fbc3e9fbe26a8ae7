"""What a rule sees: one model (config as written, its positions, its files) and
the repository around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, code_info
from tritonctl.repo_schema.repository import ModelSource, VersionDir


@dataclass
class RepositoryContext:
    root: Path | None
    models: dict[str, "ModelContext"] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def report(self, code: str, message: str, path: Path | None = None, hint: str | None = None,
               severity: Severity | None = None, notes: list[str] | None = None) -> None:
        self.diagnostics.append(Diagnostic(
            code, severity or code_info(code).severity, message, path or self.root, None, hint,
            notes=notes or []))


@dataclass
class ModelContext:
    source: ModelSource
    repository: RepositoryContext | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Set when the rules have run (or are running) on this model: an ensemble rule
    # may check a composing model before the repository loop reaches it.
    checked: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def model_dir(self) -> Path:
        return self.source.model_dir

    @property
    def config_path(self) -> Path | None:
        return self.source.config_path if self.source.has_config else None

    @property
    def config(self):
        """The ModelConfig as written in the file (empty when there is no file)."""
        return self.source.parsed.message

    @property
    def sourcemap(self):
        return self.source.parsed.sourcemap

    @property
    def versions(self) -> list[VersionDir]:
        return self.source.versions

    @cached_property
    def effective(self):
        """The config after Triton's core normalization (name, platform/backend,
        default filename, version policy, preferred sizes, pinned memory)."""
        from tritonctl.repo_schema.normalize import core_normalize

        return core_normalize(self.config, self.model_dir)

    @property
    def backend(self) -> str:
        return self.effective.backend

    @property
    def platform(self) -> str:
        return self.effective.platform

    @property
    def is_ensemble(self) -> bool:
        return self.effective.platform == "ensemble"

    def written(self, path: tuple) -> bool:
        """Whether the field at ``path`` appears in the config file."""
        return self.sourcemap.has(path)

    def report(self, code: str, message: str, path: tuple = (), hint: str | None = None,
               part: str = "value", severity: Severity | None = None, notes: list[str] | None = None,
               file: Path | None = None) -> None:
        """Record a diagnostic about the field at ``path`` (a sourcemap path)."""
        span = self.sourcemap.locate(path, part) if (path and file is None) else None
        where = file or self.config_path or self.model_dir
        self.diagnostics.append(Diagnostic(
            code, severity or code_info(code).severity, message, where, span, hint, self.name, notes or []))
