"""Fixes for the text format (TXT codes): spelling, quoting and punctuation slips."""

from __future__ import annotations

import re

from google.protobuf import descriptor as _d

from tritonctl.repo_schema import textproto
from tritonctl.repo_schema.fixes.base import (
    Edit, Fix, FixContext, Node, descriptor_of, field_descriptor, field_path, fixer, remove_node, unique_candidate,
)

VALUE_KINDS = ("number", "string", "ident", "placeholder")
_INTS = frozenset(textproto._INT_RANGES)


def _value_node(ctx: FixContext) -> tuple[Node, object] | None:
    """The field (or list item) whose value is at the diagnostic, and its FieldDescriptor."""
    if ctx.span is None:
        return None
    node = ctx.node_at(ctx.span[0])
    if node is None:
        return None
    fd = field_descriptor(node.parent if node.name is None else node)
    return (node, fd) if fd is not None else None


def _string_content(token) -> str | None:
    if token.kind != "string":
        return None
    try:
        return textproto.c_unescape(token.text[1:-1]).decode("utf-8")
    except (UnicodeDecodeError, ValueError):
        return None


@fixer("TXT01", """
    Three slips with one possible repair: a missing `:` between a field name and its value
    (`max_batch_size 8` becomes `max_batch_size: 8`), a missing `,` between list items
    (`dims: [ 3 224 224 ]` becomes `dims: [ 3, 224, 224 ]`) and a `,` after the last item of
    a list (`dims: [ 3, 224, ]` becomes `dims: [ 3, 224 ]`). Other syntax errors are left to you.
    """)
def fix_syntax(ctx: FixContext) -> Fix | None:
    if ctx.span is None:
        return None
    index = ctx.token_at(ctx.span[0])
    if not index:
        return None
    tok, prev = ctx.tokens[index], ctx.tokens[index - 1]
    message = ctx.diagnostic.message
    if message.startswith("expected ':' after") and prev.kind == "ident" and (
            tok.kind in VALUE_KINDS or (tok.kind == "sym" and tok.text == "[")):
        return Fix((Edit(prev.end, prev.end, ":"),), f"added ':' after '{prev.text}'")
    if message.startswith("expected ',' or ']' in the list") and (
            (prev.kind in VALUE_KINDS and tok.kind in VALUE_KINDS) or (prev.text in "}>" and tok.text in "{<")):
        return Fix((Edit(prev.end, prev.end, ","),), "added ',' between list items")
    if message.startswith("a ',' after the last") and tok.text == ",":
        return Fix((Edit(tok.start, tok.end, ""),), "removed the ',' after the last list item")
    return None


@fixer("TXT02", """
    Renames a misspelt field when exactly one field of that message fits (`inputs` ->
    `input`, `dtype` -> `data_type`, `max_batch_sise` -> `max_batch_size`). A field that
    belongs to an enclosing message (a missing brace) is left alone.
    """)
def fix_unknown_field(ctx: FixContext) -> Fix | None:
    if ctx.span is None:
        return None
    node = ctx.node_at(ctx.span[0])
    if node is None or node.name is None or node.start != ctx.span[0]:
        return None
    names = field_path(node.parent)
    desc = descriptor_of(names)
    if desc is None:
        return None
    for depth in range(len(names)):  # the name is a field of an enclosing message: a brace is missing
        outer = descriptor_of(names[:depth])
        if outer is not None and node.name in outer.fields_by_name:
            return None
    candidate = unique_candidate(node.name, desc.fields_by_name, textproto.FIELD_ALIASES)
    if candidate is None:
        return None
    fd = desc.fields_by_name[candidate]
    is_message = fd.message_type is not None
    holds_blocks = node.kind == "block" or (node.kind == "list" and all(c.kind == "block" for c in node.children))
    if is_message != holds_blocks or (node.kind == "list" and not textproto.is_repeated(fd)):
        return None
    if not textproto.is_repeated(fd) and node.parent.child(candidate) is not None:
        return None
    return Fix((Edit(node.start, node.start + len(node.name), candidate),),
               f"renamed '{node.name}' to '{candidate}'", scope=(node.start, node.end))


@fixer("TXT03", """
    Rewrites a value written in the wrong form when its meaning is plain: quotes around
    a number or boolean are removed (`max_batch_size: "8"`), a bare word for a string is
    quoted (`name: resnet`), `8.0` for an integer becomes `8`, and a one-item list for a
    single-valued field is unwrapped (`max_batch_size: [ 8 ]`).
    """)
def fix_wrong_type(ctx: FixContext) -> Fix | None:
    found = _value_node(ctx)
    if found is None:
        return None
    node, fd = found
    if node.kind == "list" and not textproto.is_repeated(fd) and len(node.children) == 1:
        item = node.children[0]
        return Fix((Edit(node.value_start, node.end, ctx.text[item.start:item.end]),),
                   f"unwrapped the one-item list of '{fd.name}'")
    index = ctx.token_at(ctx.span[0])
    if index is None or fd.message_type is not None or fd.enum_type is not None:
        return None
    tok = ctx.tokens[index]
    content = _string_content(tok)
    ftype = fd.type
    new = None
    if ftype == _d.FieldDescriptor.TYPE_STRING and tok.kind in ("ident", "number"):
        new = f'"{tok.text}"'
    elif ftype in _INTS:
        if content is not None and re.fullmatch(r"-?\d+", content.strip()):
            new = str(int(content.strip()))
        elif tok.kind == "number" and re.fullmatch(r"-?\d+\.0*", tok.text):
            new = tok.text.split(".")[0]
    elif ftype in (_d.FieldDescriptor.TYPE_FLOAT, _d.FieldDescriptor.TYPE_DOUBLE):
        if content is not None and re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", content.strip()):
            new = content.strip()
    elif ftype == _d.FieldDescriptor.TYPE_BOOL and content in ("true", "false"):
        new = content
    if new is None or new == tok.text:
        return None
    following = ctx.tokens[index + 1] if index + 1 < len(ctx.tokens) else None
    if tok.kind == "string" and following is not None and following.kind == "string":
        return None  # "a" "b" is one value in two parts
    return Fix((Edit(tok.start, tok.end, new),), f"wrote {fd.name} as {new}")


@fixer("TXT04", """
    Replaces an enum value when exactly one value fits (`TYPE_FLOAT32` -> `TYPE_FP32`,
    `fp16` -> `TYPE_FP16`, `KIND_CUDA` -> `KIND_GPU`) and removes quotes around a valid
    enum value (`kind: "KIND_CPU"`).
    """)
def fix_unknown_enum(ctx: FixContext) -> Fix | None:
    found = _value_node(ctx)
    if found is None:
        return None
    _, fd = found
    index = ctx.token_at(ctx.span[0])
    if index is None or fd.enum_type is None:
        return None
    tok = ctx.tokens[index]
    names = [v.name for v in fd.enum_type.values]
    word = _string_content(tok) if tok.kind == "string" else tok.text
    if word is None:
        return None
    candidate = word if word in names else unique_candidate(word, names, textproto.ENUM_ALIASES)
    if candidate is None or candidate == tok.text:
        return None
    return Fix((Edit(tok.start, tok.end, candidate),), f"wrote {fd.name}: {candidate}")


def _same_value(ctx: FixContext, a: Node, b: Node) -> bool:
    def tokens(node: Node) -> list[tuple[str, str]]:
        return [(t.kind, t.text) for t in textproto.tokenize(ctx.text[node.value_start:node.end])]

    return a.kind == b.kind and tokens(a) == tokens(b)


@fixer("TXT06", """
    Removes the second copy of a field written twice with the same value. When the two
    values differ, which one is meant is yours to decide.
    """)
def fix_duplicate_field(ctx: FixContext) -> Fix | None:
    if ctx.span is None:
        return None
    node = ctx.node_at(ctx.span[0])
    if node is None or node.name is None or node.start != ctx.span[0]:
        return None
    first = next((c for c in node.parent.children if c.name == node.name), None)
    if first is None or first is node or not _same_value(ctx, first, node):
        return None
    return Fix((remove_node(ctx.text, node),), f"removed the repeated '{node.name}'")


def _map_key(node: Node) -> tuple[str, str] | None:
    key = node.child("key")
    if key is None or not key.value_tokens:
        return None
    tokens = key.value_tokens
    if tokens[0].kind == "string":
        parts = [_string_content(t) for t in tokens]
        return None if None in parts else ("string", "".join(parts))
    return ("other", tokens[0].text)


@fixer("TXT52", """
    Removes the earlier entry of a map key written twice. Triton keeps only the last
    one, so the config means the same after the fix.
    """)
def fix_duplicate_map_key(ctx: FixContext) -> Fix | None:
    if ctx.span is None:
        return None
    node = ctx.node_at(ctx.span[0])
    if node is None or node.kind != "block":
        return None
    field = node.parent if node.name is None else node
    container = field.parent
    if field.name is None or container is None:
        return None
    entries: list[Node] = []
    for sibling in container.children:
        if sibling.name == field.name:
            entries.extend(sibling.children if sibling.kind == "list" else [sibling])
    key = _map_key(node)
    if key is None or node not in entries:
        return None
    earlier = [e for e in entries[:entries.index(node)] if _map_key(e) == key]
    if not earlier:
        return None
    target = earlier[-1]
    if target.in_list and len(target.parent.children) == 1:
        target = target.parent
    return Fix((remove_node(ctx.text, target),), f"removed the earlier entry for key {key[1]!r} of '{field.name}'")
