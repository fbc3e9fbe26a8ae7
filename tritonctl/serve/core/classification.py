"""Triton's classification extension (serving_protocol.md A.8): the top-N elements of an
output as ``"<value>:<index>[:<label>]"`` strings."""

from __future__ import annotations

import numpy as np


def _format(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):f}"
    return str(value)


def _top(row: np.ndarray, count: int, labels: list[str] | None) -> list[bytes]:
    flat = row.reshape(-1)
    order = np.argsort(-flat.astype(np.float64), kind="stable")[:count]
    result = []
    for index in order:
        text = f"{_format(flat[index])}:{index}"
        if labels and index < len(labels):
            text += f":{labels[index]}"
        result.append(text.encode())
    return result


def classify(data: np.ndarray, count: int, batched: bool, labels: list[str] | None) -> np.ndarray:
    """[batch, min(N, per-row elements)] when batched, else [min(N, elements)] of BYTES."""
    if batched:
        rows = [_top(row, count, labels) for row in data]
        width = len(rows[0]) if rows else 0
        out = np.empty((len(rows), width), dtype=object)
        for i, row in enumerate(rows):
            out[i, :] = row
        return out
    top = _top(data, count, labels)
    out = np.empty((len(top),), dtype=object)
    out[:] = top
    return out
