"""What a fix is and what it sees.

A fixer is ``def fix(ctx: FixContext) -> Fix | None`` registered for one diagnostic
code. It looks at the diagnostic, the config text and the model directory, and
returns text edits at exact offsets of the original text, or None when the fix
is not unambiguous. Fixers never re-serialize the config: comments, order and
layout stay as written.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Callable

from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.diagnostics import Diagnostic, register_fix
from tritonctl.repo_schema.normalize import _first_version_dir
from tritonctl.repo_schema.schema import model_config_pb2


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` with ``new``."""

    start: int
    end: int
    new: str


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    description: str
    # The part of the original text the fix is about. A fix may bring out problems inside it that
    # the parser skipped before (a renamed field's value is read now), never outside it.
    scope: tuple[int, int] | None = None

    @property
    def start(self) -> int:
        return min(e.start for e in self.edits)

    @property
    def end(self) -> int:
        return max(e.end for e in self.edits)

    @property
    def region(self) -> tuple[int, int]:
        low, high = self.scope or (self.start, self.end)
        return min(low, self.start), max(high, self.end)


Fixer = Callable[["FixContext"], "Fix | None"]
FIXERS: dict[str, Fixer] = {}


def fixer(code: str, description: str) -> Callable[[Fixer], Fixer]:
    """Register ``func`` as the fixer of ``code``; ``description`` is what --explain says it does."""

    def wrap(func: Fixer) -> Fixer:
        if code in FIXERS:
            raise ValueError(f"two fixers for {code}")
        FIXERS[code] = func
        register_fix(code, description)
        return func

    return wrap


# -- the text as a tree of fields --------------------------------------------------


@dataclass(eq=False)
class Node:
    """One field as written (or one ``{ ... }`` item of a list, with ``name`` None)."""

    name: str | None
    start: int  # the field name, or the item's opening brace
    value_start: int
    end: int  # end of the value
    kind: str  # "scalar", "block" or "list"
    value_tokens: list = field(default_factory=list)  # the value's tokens for a scalar
    children: list["Node"] = field(default_factory=list)  # fields of a block, items of a list
    parent: "Node | None" = None

    def child(self, name: str) -> "Node | None":
        return next((c for c in self.children if c.name == name), None)

    @property
    def in_list(self) -> bool:
        return self.parent is not None and self.parent.kind == "list"


class _Stop(Exception):
    pass


def syntax_tree(tokens: list) -> Node:
    """The fields of the text as far as its brackets can be followed; never raises."""
    root = Node(None, 0, 0, 0, "block")
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        tok = peek()
        if tok is None:
            raise _Stop
        pos += 1
        return tok

    def is_sym(tok, chars: str) -> bool:
        return tok is not None and tok.kind == "sym" and tok.text in chars

    def scalar_tokens() -> list:
        first = take()
        if first.kind == "sym":
            raise _Stop
        out = [first]
        while first.kind == "string" and peek() is not None and peek().kind == "string":
            out.append(take())
        return out

    def block(node: Node, opener) -> None:
        closer = {"{": "}", "<": ">"}[opener.text]
        fields(node, closer)
        node.end = tokens[pos - 1].end

    def fields(parent: Node, closer: str | None) -> None:
        while True:
            tok = peek()
            if tok is None:
                if closer is None:
                    return
                raise _Stop
            if is_sym(tok, closer or ""):
                take()
                return
            if tok.kind != "ident":
                raise _Stop
            take()
            node = Node(tok.text, tok.start, tok.start, tok.end, "scalar", parent=parent)
            parent.children.append(node)
            if is_sym(peek(), ":"):
                take()
            value = peek()
            if value is None:
                raise _Stop
            node.value_start = value.start
            if is_sym(value, "{<"):
                node.kind = "block"
                block(node, take())
            elif is_sym(value, "["):
                node.kind = "list"
                take()
                while not is_sym(peek(), "]"):
                    item_tok = peek()
                    if is_sym(item_tok, "{<"):
                        item = Node(None, item_tok.start, item_tok.start, item_tok.end, "block", parent=node)
                        block(item, take())
                    else:
                        parts = scalar_tokens()
                        item = Node(None, parts[0].start, parts[0].start, parts[-1].end, "scalar", parts, parent=node)
                    node.children.append(item)
                    if is_sym(peek(), ","):
                        take()
                    elif not is_sym(peek(), "]"):
                        raise _Stop
                node.end = take().end
            else:
                node.value_tokens = scalar_tokens()
                node.end = node.value_tokens[-1].end
            if is_sym(peek(), ",;"):
                take()

    try:
        fields(root, None)
    except _Stop:
        pass
    root.end = tokens[-1].end if tokens else 0
    return root


def walk(node: Node):
    for child in node.children:
        yield child
        yield from walk(child)


def field_path(node: Node) -> list[str]:
    """Field names from the top of the file down to ``node`` (list items add nothing)."""
    names = []
    while node is not None and node.parent is not None:
        if node.name is not None:
            names.append(node.name)
        node = node.parent
    return names[::-1]


def descriptor_of(names: list[str]):
    """The message descriptor a block at ``names`` holds, or None when a name is unknown."""
    desc = model_config_pb2().ModelConfig.DESCRIPTOR
    for name in names:
        fd = desc.fields_by_name.get(name)
        if fd is None or fd.message_type is None:
            return None
        desc = fd.message_type
    return desc


def field_descriptor(node: Node):
    """The FieldDescriptor of a written field, or None."""
    if node.name is None or node.parent is None:
        return None
    desc = descriptor_of(field_path(node.parent))
    return desc.fields_by_name.get(node.name) if desc is not None else None


# Each diagnostic gets its own FixContext; the texts they look at are few, so parse each once.
# Fixers only read these.
@lru_cache(maxsize=32)
def _parse(text: str) -> textproto.ParseResult:
    return textproto.parse(text, model_config_pb2().ModelConfig)


@lru_cache(maxsize=32)
def _tokens(text: str) -> list:
    return textproto.tokenize(text)


@lru_cache(maxsize=32)
def _tree(text: str) -> Node:
    return syntax_tree(_tokens(text))


# -- what a fixer sees ----------------------------------------------------------------


@dataclass
class FixContext:
    diagnostic: Diagnostic
    config_path: Path
    text: str  # the config as it is now (line ends as in the file)

    @property
    def model_dir(self) -> Path:
        parent = self.config_path.parent
        return parent.parent if parent.name == "configs" else parent

    @cached_property
    def _line_starts(self) -> list[int]:
        starts = [0]
        for i, char in enumerate(self.text):
            if char == "\n":
                starts.append(i + 1)
        return starts

    def offset(self, line: int, col: int) -> int:
        starts = self._line_starts
        return starts[min(line, len(starts)) - 1] + col - 1

    @cached_property
    def span(self) -> tuple[int, int] | None:
        """The diagnostic's span as offsets into ``text``."""
        span = self.diagnostic.span
        if span is None:
            return None
        return self.offset(span.line, span.col), self.offset(span.end_line, span.end_col)

    @property
    def parsed(self) -> textproto.ParseResult:
        return _parse(self.text)

    @property
    def config(self):
        """The parsed config, None when the text does not parse."""
        return self.parsed.message

    @property
    def tokens(self) -> list:
        return _tokens(self.text)

    @property
    def tree(self) -> Node:
        return _tree(self.text)

    def token_at(self, offset: int):
        """Index of the token starting at ``offset``, or None."""
        starts = [t.start for t in self.tokens]
        i = bisect.bisect_left(starts, offset)
        return i if i < len(self.tokens) and self.tokens[i].start == offset else None

    def paths_at(self, part: str = "value") -> list[tuple]:
        """Sourcemap paths whose value (or key) is exactly the diagnostic's span."""
        if self.span is None or self.config is None:
            return []
        index = 2 if part == "value" else 0
        return [path for path, entry in self.parsed.sourcemap.entries.items()
                if (entry[index], entry[index + 1]) == self.span]

    def entry(self, path: tuple) -> tuple[int, int, int, int] | None:
        return self.parsed.sourcemap.entries.get(tuple(path))

    def node_at(self, offset: int) -> Node | None:
        """The innermost written field (or list item) starting at ``offset``."""
        found = None
        for node in walk(self.tree):
            if node.start == offset or node.value_start == offset:
                found = node
        return found

    def version_dir(self) -> Path | None:
        return _first_version_dir(self.model_dir)


# -- text helpers ------------------------------------------------------------------------


def quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def typo_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from ``a`` to ``b``."""
    previous2, previous = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if previous2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def unique_candidate(word: str, choices, aliases: dict[str, str] | None = None) -> str | None:
    """The one name ``word`` was meant to be, or None when there is none or more than one.

    A known alias or a case slip wins; then the nearest of the names one or two typing
    slips away (one for short words), when only one is nearest; failing those, the only
    close spelling.
    """
    choices = list(choices)
    if aliases and aliases.get(word) in choices:
        return aliases[word]
    folded = [c for c in choices if word.lower() == c.lower() or any(
        word.upper() == c[len(p):] for p in ("TYPE_", "KIND_") if c.startswith(p))]
    if folded:
        return folded[0] if len(folded) == 1 else None
    limit = 1 if len(word) < 6 else 2
    distances = {c: typo_distance(word.lower(), c.lower()) for c in choices}
    near = [c for c in choices if distances[c] <= limit]
    if near:  # the one nearest name: KIND_CPUU is KIND_CPU (one slip), not KIND_GPU (two)
        best = min(distances[c] for c in near)
        nearest = [c for c in near if distances[c] == best]
        return nearest[0] if len(nearest) == 1 else None
    close = difflib.get_close_matches(word, choices, n=2, cutoff=0.75)
    return close[0] if len(close) == 1 else None


def line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return line_start, len(text) if line_end == -1 else line_end


def removal(text: str, start: int, end: int) -> Edit:
    """Remove ``text[start:end]`` (a field) with its separator; drop the line when nothing else is on it."""
    stop = end
    while stop < len(text) and text[stop] in " \t":
        stop += 1
    if stop < len(text) and text[stop] in ",;":
        stop += 1
        while stop < len(text) and text[stop] in " \t":
            stop += 1
    line_start, line_end = line_bounds(text, start, stop)
    before, after = text[line_start:start], text[stop:line_end]
    if not before.strip() and not after.strip():
        return Edit(line_start, min(line_end + 1, len(text)), "")
    if not after.strip() or after.lstrip().startswith("#"):
        # keep a trailing comment; take the spaces before the field with it
        back = start
        while back > line_start and text[back - 1] in " \t":
            back -= 1
        return Edit(back, end if after.lstrip().startswith("#") else stop, "")
    return Edit(start, stop, "")


def remove_node(text: str, node: Node) -> Edit:
    """Remove a written field, or one item of a ``[ ... ]`` list with its comma."""
    if not node.in_list:
        return removal(text, node.start, node.end)
    siblings = node.parent.children
    i = siblings.index(node)
    if i + 1 < len(siblings):  # "a, " up to the next item
        nxt = siblings[i + 1]
        between = text[node.end:nxt.start]
        if "\n" in between:  # items on their own lines: remove the whole line of this one
            line_start, _ = line_bounds(text, node.start, node.end)
            if not text[line_start:node.start].strip():
                return Edit(line_start, node.end + between.index("\n") + 1, "")
        return Edit(node.start, nxt.start, "")
    if i > 0:  # the last item: ", z"
        return Edit(siblings[i - 1].end, node.end, "")
    return Edit(node.start, node.end, "")


def newline(text: str) -> str:
    """The file's line end: CRLF stays CRLF."""
    return "\r\n" if "\r\n" in text else "\n"


def insert_line_after(text: str, node: Node, line: str) -> Edit:
    """A new line below the line where ``node`` ends, indented like ``node``."""
    nl = newline(text)
    line = line.replace("\n", nl)
    line_start, _ = line_bounds(text, node.start, node.start)
    _, line_end = line_bounds(text, node.end, node.end)
    indent = text[line_start:node.start]
    indent = indent if not indent.strip() else ""
    if line_end >= len(text):
        return Edit(len(text), len(text), ("" if text.endswith("\n") or not text else nl) + indent + line + nl)
    return Edit(line_end + 1, line_end + 1, indent + line + nl)


def insert_top_level(ctx: FixContext, line: str, after: tuple[str, ...] = ("name",)) -> Edit:
    """A new top-level field on its own line: after the first of ``after`` that is written,
    else before the first field, else at the end of the file."""
    fields = ctx.tree.children
    nl = newline(ctx.text)
    line = line.replace("\n", nl)
    for name in after:
        node = next((n for n in fields if n.name == name), None)
        if node is not None:
            return insert_line_after(ctx.text, node, line)
    if fields:
        line_start, _ = line_bounds(ctx.text, fields[0].start, fields[0].start)
        indent = ctx.text[line_start:fields[0].start]
        if not indent.strip():
            return Edit(line_start, line_start, indent + line + nl)
        return Edit(fields[0].start, fields[0].start, line + nl)
    text = ctx.text
    return Edit(len(text), len(text), ("" if text.endswith("\n") or not text else nl) + line + nl)


def insert_after_field(text: str, node: Node, field_text: str) -> Edit:
    """``field_text`` right after the field ``node``: on a new line like it when the field ends
    its line, else on the same line after a space."""
    _, line_end = line_bounds(text, node.end, node.end)
    rest = text[node.end:line_end].strip()
    if rest and not rest.startswith("#"):
        return Edit(node.end, node.end, " " + field_text)
    return insert_line_after(text, node, field_text)
