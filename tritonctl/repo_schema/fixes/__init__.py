"""``tritonctl validate --fix``: the fixes whose answer is unambiguous, applied to the
config text at the diagnostics' positions (comments and layout kept).

Each fixer module registers its fixers with ``base.fixer``, which also marks the code
fixable for ``--explain`` and ``--list-codes``. ``engine.fix_to_fixed_point`` runs them.
"""

from __future__ import annotations

from tritonctl.repo_schema import rules  # noqa: F401  (registers the codes first)
from tritonctl.repo_schema.fixes import config, ensemble, files, syntax  # noqa: F401  (registers the fixers)
from tritonctl.repo_schema.fixes.base import FIXERS
from tritonctl.repo_schema.fixes.engine import FileChange, FixOutcome, fix_to_fixed_point

__all__ = ["FIXERS", "FileChange", "FixOutcome", "fix_to_fixed_point"]
