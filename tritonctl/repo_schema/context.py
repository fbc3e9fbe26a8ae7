"""What a rule sees: one model (config as written, its positions, its files) and
the repository around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tritonctl.repo_schema.autocomplete import complete_python_model
from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, code_info
from tritonctl.repo_schema.gpus import GpuInfo, detect_gpus
from tritonctl.repo_schema.normalize import core_normalize
from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy, NOT_READ, PARALLEL_STUBS, PythonCompletion
from tritonctl.repo_schema.repository import ModelSource, VersionDir

# What a config-only check leaves out, in the order the info line lists them.
VERSION_DIRS = "version directories"
MODEL_FILES = "model files"
ENSEMBLE_MEMBERS = "ensemble members"
LABEL_FILES = "label files"
DATA_FILES = "warmup and initial-state data files"
NOT_CHECKED_ORDER = (VERSION_DIRS, MODEL_FILES, ENSEMBLE_MEMBERS, LABEL_FILES, DATA_FILES)


@dataclass(frozen=True)
class CheckOptions:
    """How much of the model's world a check may look at.

    ``config_only``: only the config files; version directories, model files, label
    and data files, sibling models and the directory layout are not looked at.
    ``gpus``: the target server's GPUs; None when unknown, so GPU ids and GPU kinds
    are not checked against any machine.
    ``model_code``: whether model code (a Python model's auto_complete_config) may run.
    """

    config_only: bool = False
    gpus: GpuInfo | None = None
    model_code: ModelCodePolicy = ModelCodePolicy()
    values: tuple[tuple[str, str], ...] = ()  # template placeholders to fill (--set NAME=VALUE)

    @property
    def fill_values(self) -> dict[str, str] | None:
        return dict(self.values) or None


def default_options() -> CheckOptions:
    """Every check, against the GPUs of this machine (or TRITONCTL_ASSUME_GPUS): what a
    server started here would do. `tritonctl validate` passes its own options."""
    return CheckOptions(gpus=detect_gpus())


@dataclass
class RepositoryContext:
    root: Path | None
    models: dict[str, "ModelContext"] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    options: CheckOptions = field(default_factory=default_options)
    # What could not be checked under ``options`` (VERSION_DIRS, ..., "gpus").
    not_checked: set[str] = field(default_factory=set)

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
    def options(self) -> CheckOptions:
        return self.repository.options if self.repository is not None else default_options()

    def can_check(self, what: str) -> bool:
        """Whether ``what`` (VERSION_DIRS, MODEL_FILES, ...) is there to be checked;
        when only the config is checked it is not, and the skip is noted once."""
        if not self.options.config_only:
            return True
        if self.repository is not None:
            self.repository.not_checked.add(what)
        return False

    def target_gpus(self) -> GpuInfo | None:
        """The target server's GPUs, or None (noted) when they are unknown."""
        gpus = self.options.gpus
        if gpus is None and self.repository is not None:
            self.repository.not_checked.add("gpus")
        return gpus

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
        """The version directories; none are looked at when only the config is checked."""
        return [] if self.options.config_only else self.source.versions

    @cached_property
    def normalized(self):
        """The config after Triton's core normalization (name, platform/backend,
        default filename, version policy, preferred sizes, pinned memory)."""
        return core_normalize(self.config, self.model_dir, detect=not self.options.config_only)

    @cached_property
    def python_completion(self):
        """What the Python model's ``auto_complete_config`` made of the config (None: not Python)."""
        return self._complete_python()

    def _complete_python(self):
        if self.normalized.backend != "python":
            return None
        if not self.can_check(MODEL_FILES):
            return PythonCompletion(NOT_READ)  # model.py is not looked at: what it completes is unknown
        return complete_python_model(self.normalized, self.model_dir, self.options.model_code)

    @cached_property
    def effective(self):
        """The config Triton checks and runs: normalized, completed by a Python model's
        ``auto_complete_config`` when it has one, and normalized again."""
        completion = self.python_completion
        if completion is None or completion.config is None:
            return self.normalized

        return core_normalize(completion.config, self.model_dir)

    @property
    def io_left_to_backend(self) -> bool:
        """Whether the backend fills in inputs and outputs at load in a way not known here: DALI
        reads them from its pipeline; a Python model's auto_complete_config that was not run."""
        if self.normalized.backend == "dali":
            return True
        completion = self.python_completion
        return completion is not None and not completion.evaluated

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


def complete_python_models(contexts) -> None:
    """Run the auto_complete_config of every Python model in ``contexts`` side by side, as Triton
    loads models on several threads (--model-load-thread-count, 4 by default), so the models'
    stub processes do not wait on each other; each model's rules then find the result."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [ctx for ctx in contexts if not ctx.checked and "python_completion" not in ctx.__dict__
            and ctx.source.parsed.ok and ctx.normalized.backend == "python"]
    if len(todo) < 2:
        return
    # Not through the cached_property: Python 3.11 runs those under one lock for all instances.
    with ThreadPoolExecutor(min(PARALLEL_STUBS, len(todo))) as pool:
        for ctx, completion in zip(todo, pool.map(ModelContext._complete_python, todo)):
            ctx.__dict__["python_completion"] = completion
