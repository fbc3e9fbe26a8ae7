"""Validation rules. Each rule module declares its diagnostic codes with
``diagnostics.register`` and its checks with ``@model_rule`` / ``@repository_rule``.

A model rule is ``def check(ctx: ModelContext) -> None`` and reports through
``ctx.report(code, message, path=(...), hint=...)``; it runs only on models whose
config parsed. A repository rule gets the ``RepositoryContext``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

MODEL_RULES: list[Callable] = []
REPOSITORY_RULES: list[Callable] = []


def model_rule(func: Callable) -> Callable:
    MODEL_RULES.append(func)
    return func


def repository_rule(func: Callable) -> Callable:
    REPOSITORY_RULES.append(func)
    return func


def _import_rule_modules() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        importlib.import_module(f"{__name__}.{info.name}")


_import_rule_modules()
