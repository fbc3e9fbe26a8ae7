"""Run every rule over repositories, model directories or single config files."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonctl.repo_schema.context import (NOT_CHECKED_ORDER, CheckOptions, ModelContext, RepositoryContext,
                                           complete_python_models, default_options)
from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, code_info
from tritonctl.repo_schema.gpus import ASSUME_GPUS_ENV
from tritonctl.repo_schema.repository import CONFIG_FILENAME, ModelSource, looks_like_model_dir, model_dirs
from tritonctl.repo_schema.rules import MODEL_RULES, REPOSITORY_RULES
from tritonctl.repo_schema.rules.instances import GPUS_NOT_CHECKED
from tritonctl.repo_schema.rules.layout import NOT_CHECKED


@dataclass
class ValidationReport:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    models_checked: int = 0
    filled: set[str] = field(default_factory=set)  # template variables that options.values filled

    def count(self, severity: Severity) -> int:
        return sum(1 for d in self.diagnostics if d.severity is severity)

    @property
    def errors(self) -> int:
        return self.count(Severity.ERROR)

    @property
    def warnings(self) -> int:
        return self.count(Severity.WARNING)


class UsageError(Exception):
    """A path that is neither a repository, a model directory nor a config file."""


def classify(path: Path) -> str:
    """'config', 'model', 'repository' or 'configs' (a directory of .pbtxt files, no models)."""
    if path.is_file():
        if path.suffix != ".pbtxt":
            raise UsageError(f"{path} is a file but not a .pbtxt config")
        return "config"
    if not path.is_dir():
        raise UsageError(f"{path} does not exist")
    if looks_like_model_dir(path):
        return "model"
    if not any(p.is_dir() for p in path.iterdir()) and any(path.glob("*.pbtxt")):
        return "configs"
    return "repository"


def config_files(directory: Path) -> list[Path]:
    """Every .pbtxt file under ``directory``, hidden directories left out."""
    return sorted(p for p in directory.rglob("*.pbtxt") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(directory).parts))


def check_model(ctx: ModelContext) -> None:
    if ctx.checked:
        return
    ctx.checked = True
    parsed = ctx.source.parsed
    ctx.diagnostics.extend(parsed.diagnostics)
    if not parsed.ok:
        return
    before = len(ctx.diagnostics)
    for rule in MODEL_RULES:
        rule(ctx)
    if parsed.placeholders:
        # A field holding an unfilled placeholder is unset for the rules: what they say
        # about that very field is the placeholder's doing, already reported as TXT11.
        held = [d.span for d in parsed.placeholders]
        ctx.diagnostics[before:] = [d for d in ctx.diagnostics[before:]
                                    if d.span is None or d.path != ctx.config_path
                                    or not any(_overlaps(d.span, span) for span in held)]


def _overlaps(a, b) -> bool:
    return (a.line, a.col) < (b.end_line, b.end_col) and (b.line, b.col) < (a.end_line, a.end_col)


def validate_repository(root: Path, config_name: str | None = None,
                        options: CheckOptions | None = None) -> RepositoryContext:
    repo = RepositoryContext(root, options=options or default_options())
    for model_dir in model_dirs(root):
        repo.models[model_dir.name] = ModelContext(ModelSource(model_dir, config_name, values=repo.options.fill_values), repo)
    for rule in REPOSITORY_RULES:
        rule(repo)
    complete_python_models(repo.models.values())
    for ctx in repo.models.values():
        check_model(ctx)
    return repo


def check_config_file(path: Path, config_name: str | None, options: CheckOptions) -> ModelContext:
    """One config file on its own: every check that needs only the config."""
    # <model>/config.pbtxt or a custom <model>/configs/<name>.pbtxt name their model directory.
    custom = path.parent.name == "configs" and looks_like_model_dir(path.parent.parent)
    named_dir = path.name == CONFIG_FILENAME or custom
    model_dir = path.parent.parent if custom else path.parent
    source = ModelSource(model_dir, config_name, config_file=path, values=options.fill_values)
    if not named_dir:
        parsed = source.parsed.message
        source.name_override = (parsed.name if parsed is not None else "") or path.stem
    repo = RepositoryContext(None, options=options)
    ctx = ModelContext(source, repo)
    repo.models[source.name] = ctx
    check_model(ctx)
    return ctx


def validate_paths(paths: list[Path], config_name: str | None = None,
                   ignore: frozenset[str] = frozenset(), options: CheckOptions | None = None) -> ValidationReport:
    """Check ``paths``: repositories and model directories get every check, config files
    (and directories with ``options.config_only``) the checks that need only the config."""
    options = options or default_options()
    report = ValidationReport()
    not_checked: set[str] = set()
    for path in paths:
        kind = classify(path)
        if kind in ("config", "configs") or options.config_only:
            files = [path] if kind == "config" else config_files(path)
            lone = replace(options, config_only=True)
            for file in files:
                ctx = check_config_file(file, config_name, lone)
                report.diagnostics.extend(ctx.diagnostics)
                report.models_checked += 1
                not_checked |= ctx.repository.not_checked
                report.filled |= _filled(ctx.repository)
            continue
        if kind == "repository":
            repo = validate_repository(path, config_name, options)
            report.diagnostics.extend(repo.diagnostics)
            for ctx in repo.models.values():
                report.diagnostics.extend(ctx.diagnostics)
            report.models_checked += len(repo.models)
            not_checked |= repo.not_checked
            report.filled |= _filled(repo)
            continue
        source = ModelSource(path, config_name, values=options.fill_values)
        # A lone model still sees its siblings, so ensembles can be checked.
        repo = RepositoryContext(path.parent, options=options)
        for sibling in model_dirs(path.parent):
            if sibling != path:
                sibling_source = ModelSource(sibling, config_name, values=options.fill_values)
                repo.models[sibling.name] = ModelContext(sibling_source, repo)
        ctx = ModelContext(source, repo)
        repo.models[path.name] = ctx
        check_model(ctx)
        report.diagnostics.extend(ctx.diagnostics)
        report.models_checked += 1
        not_checked |= repo.not_checked
        report.filled |= _filled(repo)
    report.diagnostics.extend(_not_checked_notes(not_checked, paths[0] if paths else None))
    report.diagnostics = [d for d in report.diagnostics if d.code not in ignore]
    report.diagnostics.sort(key=Diagnostic.sort_key)
    return report


def _filled(repo: RepositoryContext) -> set[str]:
    return {name for ctx in repo.models.values() if ctx.checked for name in ctx.source.parsed.filled}


def _not_checked_notes(not_checked: set[str], where: Path | None) -> list[Diagnostic]:
    """The info lines saying, once per run, what was left unchecked and how to check it."""
    notes = []
    skipped = [what for what in NOT_CHECKED_ORDER if what in not_checked]
    if skipped:
        notes.append(Diagnostic(
            NOT_CHECKED, code_info(NOT_CHECKED).severity,
            f"not checked without the repository: {', '.join(skipped)}", where,
            hint="validate the model repository (or model directory) to check them too"))
    if "gpus" in not_checked:
        notes.append(Diagnostic(
            GPUS_NOT_CHECKED, code_info(GPUS_NOT_CHECKED).severity,
            "GPU ids and KIND_GPU instance groups not checked: the target server's GPUs are unknown", where,
            hint=f"pass --gpus N (or set {ASSUME_GPUS_ENV}=N) for a server with N GPUs, or --gpus local "
                 "for this machine's"))
    return notes
