"""Run every rule over repositories, model directories or single config files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.repo_schema.context import ModelContext, RepositoryContext
from tritonctl.repo_schema.diagnostics import Diagnostic, Severity
from tritonctl.repo_schema.repository import ModelSource, looks_like_model_dir, model_dirs


@dataclass
class ValidationReport:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    models_checked: int = 0

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
    """'config', 'model' or 'repository'."""
    if path.is_file():
        if path.suffix != ".pbtxt":
            raise UsageError(f"{path} is a file but not a .pbtxt config")
        return "config"
    if not path.is_dir():
        raise UsageError(f"{path} does not exist")
    return "model" if looks_like_model_dir(path) else "repository"


def check_model(ctx: ModelContext) -> None:
    from tritonctl.repo_schema.rules import MODEL_RULES

    if ctx.checked:
        return
    ctx.checked = True
    ctx.diagnostics.extend(ctx.source.parsed.diagnostics)
    if not ctx.source.parsed.ok:
        return
    for rule in MODEL_RULES:
        rule(ctx)


def validate_repository(root: Path, config_name: str | None = None) -> RepositoryContext:
    from tritonctl.repo_schema.rules import REPOSITORY_RULES

    repo = RepositoryContext(root)
    for model_dir in model_dirs(root):
        repo.models[model_dir.name] = ModelContext(ModelSource(model_dir, config_name), repo)
    for rule in REPOSITORY_RULES:
        rule(repo)
    for ctx in repo.models.values():
        check_model(ctx)
    return repo


def validate_paths(paths: list[Path], config_name: str | None = None,
                   ignore: frozenset[str] = frozenset()) -> ValidationReport:
    report = ValidationReport()
    for path in paths:
        kind = classify(path)
        if kind == "repository":
            repo = validate_repository(path, config_name)
            report.diagnostics.extend(repo.diagnostics)
            for ctx in repo.models.values():
                report.diagnostics.extend(ctx.diagnostics)
            report.models_checked += len(repo.models)
            continue
        model_dir = path
        if kind == "config":
            # <model>/config.pbtxt or a custom <model>/configs/<name>.pbtxt
            model_dir = path.parent.parent if path.parent.name == "configs" else path.parent
        source = ModelSource(model_dir, config_name, config_file=path if kind == "config" else None)
        # A lone model still sees its siblings, so ensembles can be checked.
        repo = RepositoryContext(model_dir.parent)
        for sibling in model_dirs(model_dir.parent):
            if sibling != model_dir:
                repo.models[sibling.name] = ModelContext(ModelSource(sibling, config_name), repo)
        ctx = ModelContext(source, repo)
        repo.models[model_dir.name] = ctx
        check_model(ctx)
        report.diagnostics.extend(ctx.diagnostics)
        report.models_checked += 1
    report.diagnostics = [d for d in report.diagnostics if d.code not in ignore]
    report.diagnostics.sort(key=Diagnostic.sort_key)
    return report
