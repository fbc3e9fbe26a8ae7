"""PyTorch backend naming rules for config tensors (``<name>__<index>``)."""

from __future__ import annotations

import re

INDEXED_NAME = re.compile(r"^.+__(\d+)$")


def tensor_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` tensor name; None when the name has no index."""
    match = INDEXED_NAME.match(name)
    return int(match.group(1)) if match else None


def naming_style(names: list[str]) -> str:
    """'indexed', 'named' (forward() argument names), 'mixed', or '' for no names."""
    indexed = [tensor_index(n) is not None for n in names]
    if not indexed:
        return ""
    if all(indexed):
        return "indexed"
    return "mixed" if any(indexed) else "named"
