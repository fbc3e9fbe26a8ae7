"""PyTorch backend naming rules for config tensors (``<name>__<index>``)."""

from __future__ import annotations

DIGITS = frozenset("0123456789")


def tensor_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` tensor name, read as Triton's PyTorch backend reads it:
    what follows the first ``__``, when that is ASCII digits only (none reads as 0). None when
    the name has no index."""
    start = name.find("__")
    if start < 0:
        return None
    rest = name[start + 2:]
    return int(rest or 0) if DIGITS.issuperset(rest) else None


def naming_style(names: list[str]) -> str:
    """'indexed', 'named' (forward() argument names), 'mixed', or '' for no names."""
    indexed = [tensor_index(n) is not None for n in names]
    if not indexed:
        return ""
    if all(indexed):
        return "indexed"
    return "mixed" if any(indexed) else "named"
