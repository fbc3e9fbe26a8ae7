"""Apply fixes to a fixed point: validate, fix what is fixable, validate the edited texts
again (in memory), until nothing more changes. Files are written only at the end.

Every edit must leave the text parsing at least as far as before: on a config that
parses, the result parses; on one that does not, the parse never stops earlier and no
new error appears outside the edited field.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.diagnostics import Diagnostic, Severity
from tritonctl.repo_schema.fixes.base import FIXERS, Edit, Fix, FixContext
from tritonctl.repo_schema.repository import config_overlay
from tritonctl.repo_schema.schema import model_config_pb2

MAX_ROUNDS = 10


@dataclass(frozen=True)
class AppliedFix:
    code: str
    line: int | None  # where the diagnostic was, in the text the fix was made on
    description: str


@dataclass
class FileChange:
    path: Path  # as the diagnostics name it
    before: str
    after: str
    fixes: list[AppliedFix] = field(default_factory=list)

    def diff(self) -> str:
        name = self.path.as_posix().lstrip("/")
        lines = list(difflib.unified_diff(self.before.splitlines(keepends=True),
                                          self.after.splitlines(keepends=True), f"a/{name}", f"b/{name}"))
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)


@dataclass
class FixOutcome:
    changes: list[FileChange]
    report: object  # the ValidationReport of the fixed texts

    @property
    def fixed(self) -> int:
        return sum(len(c.fixes) for c in self.changes)

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)

    def write(self) -> None:
        for change in self.changes:
            # In place: the file keeps its mode, owner and links.
            with open(change.path, "r+b") as handle:
                handle.write(change.after.encode("utf-8"))
                handle.truncate()


def _fixer_for(diag: Diagnostic):
    """The fixer for a diagnostic on a config file that exists, or None."""
    fix_one = FIXERS.get(diag.code)
    if fix_one is None or diag.path is None or diag.path.suffix != ".pbtxt" or not diag.path.is_file():
        return None
    return fix_one


def _read(path: Path) -> str | None:
    """The config text with its own line ends; None when it cannot be edited safely."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "\r" in text.replace("\r\n", ""):
        return None  # lone CRs: lines would not match what the validator saw
    return text


def fix_to_fixed_point(run_validation: Callable[[], object], max_rounds: int = MAX_ROUNDS) -> FixOutcome:
    """``run_validation`` returns a ValidationReport; it is called with the edited texts in place."""
    originals: dict[Path, str] = {}
    texts: dict[Path, str] = {}
    shown: dict[Path, Path] = {}
    applied: dict[Path, list[AppliedFix]] = {}
    seen_states: set[tuple] = set()
    report = None
    for _ in range(max_rounds + 1):
        with config_overlay({p: t.replace("\r\n", "\n") for p, t in texts.items()}):
            report = run_validation()
        proposals: dict[Path, list[tuple[Fix, Diagnostic]]] = {}
        for diag in report.diagnostics:
            fix_one = _fixer_for(diag)
            if fix_one is None:
                continue
            key = diag.path.resolve()
            if key not in originals:
                text = _read(diag.path)
                if text is None:
                    continue
                originals[key], shown[key] = text, diag.path
            text = texts.get(key, originals[key])
            fix = _propose(fix_one, FixContext(diag, diag.path, text))
            if fix is not None and fix.edits:
                proposals.setdefault(key, []).append((fix, diag))
        if not proposals:
            break
        changed = False
        for key, fixes in proposals.items():
            text = texts.get(key, originals[key])
            new_text, used = _apply(text, fixes)
            if new_text != text:
                texts[key] = new_text
                applied.setdefault(key, []).extend(used)
                changed = True
        state = tuple(sorted((str(k), v) for k, v in texts.items()))
        if not changed or state in seen_states:
            break
        seen_states.add(state)
    else:  # ran out of rounds: the report must still describe the final texts
        with config_overlay({p: t.replace("\r\n", "\n") for p, t in texts.items()}):
            report = run_validation()
    changes = [FileChange(shown[k], originals[k], texts[k], applied.get(k, []))
               for k in sorted(texts, key=lambda k: str(shown[k])) if texts[k] != originals[k]]
    return FixOutcome(changes, report)


def _apply(text: str, fixes: list[tuple[Fix, Diagnostic]]) -> tuple[str, list[AppliedFix]]:
    """Apply the fixes that do not overlap and pass the parse check, last first."""
    chosen: list[tuple[Fix, Diagnostic]] = []
    taken: list[tuple[int, int]] = []
    for fix, diag in sorted(fixes, key=lambda item: item[0].region):
        low, high = fix.region
        if any(low <= t_high and t_low <= high for t_low, t_high in taken):
            continue  # touches a fix already chosen: the next round sees it again
        if any(a.start < b.end and b.start < a.end for i, a in enumerate(fix.edits) for b in fix.edits[i + 1:]):
            continue
        taken.append((low, high))
        chosen.append((fix, diag))
    used: list[AppliedFix] = []
    for fix, diag in sorted(chosen, key=lambda item: item[0].region, reverse=True):
        new_text = _apply_edits(text, fix.edits)
        if new_text == text or not _parses_no_worse(text, new_text, fix, diag):
            continue
        text = new_text
        used.append(AppliedFix(diag.code, diag.span.line if diag.span else None, fix.description))
    return text, used[::-1]


def _apply_edits(text: str, edits: tuple[Edit, ...]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:edit.start] + edit.new + text[edit.end:]
    return text


@dataclass
class _ParseState:
    stop: int  # where parsing gave up; the text's length when it did not
    problems: list[tuple[int, str, Severity]]  # (offset, code, severity) of each parse diagnostic

    @property
    def errors(self) -> list[tuple[int, str, Severity]]:
        return [p for p in self.problems if p[2] is Severity.ERROR]


def parse_state(text: str) -> _ParseState:
    parser = textproto._Parser(text, None)
    stopped = False
    try:
        parser.parse_fields(model_config_pb2().ModelConfig(), (), closer=None, opener=None)
    except textproto._Fatal:
        stopped = True
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def offset(d: Diagnostic) -> int:
        return starts[d.span.line - 1] + d.span.col - 1 if d.span else 0

    problems = [(offset(d), d.code, d.severity) for d in parser.diagnostics]
    stop = problems[-1][0] if stopped and problems else len(text)
    return _ParseState(stop, problems)


def _parses_no_worse(old_text: str, new_text: str, fix: Fix, diag: Diagnostic) -> bool:
    old, new = parse_state(old_text), parse_state(new_text)
    if not old.errors:
        return not new.errors
    low, high = fix.region
    delta = len(new_text) - len(old_text)
    new_high = high + delta

    def old_to_new(offset: int) -> int:
        return offset if offset < low else (offset + delta if offset >= high else low)

    if new.stop < old_to_new(old.stop):
        return False  # the parse now gives up earlier
    outside_old = [p for p in old.errors if not low <= p[0] < high]
    outside_new = [p for p in new.errors if not low <= p[0] < max(new_high, low)]
    if len(outside_new) > len(outside_old):
        return False
    target = FixContext(diag, Path(), old_text).span
    if target is None:
        return len(new.errors) < len(old.errors)
    return not any(code == diag.code and offset == old_to_new(target[0]) for offset, code, _ in new.problems)


def _propose(fix_one, ctx: FixContext):
    """The fixer's edit, or None where the text nests too deep for the syntax tree (no
    one-candidate fix is to be had in such a file; validate has reported it)."""
    try:
        return fix_one(ctx)
    except RecursionError:
        return None


def count_fixable(report) -> int:
    """How many of the report's diagnostics a fixer has an edit for (before the parse check)."""
    texts: dict[Path, str | None] = {}
    count = 0
    for diag in report.diagnostics:
        fix_one = _fixer_for(diag)
        if fix_one is None:
            continue
        key = diag.path.resolve()
        if key not in texts:
            texts[key] = _read(diag.path)
        if texts[key] is not None and _propose(fix_one, FixContext(diag, diag.path, texts[key])) is not None:
            count += 1
    return count
