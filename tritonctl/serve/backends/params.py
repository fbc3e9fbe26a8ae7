"""Model ``parameters`` values as Triton's backends parse them (booleans and integers), with their
error texts."""

from __future__ import annotations

from tritonctl.serve.core.backend_api import BackendLoadError


def parse_bool(value: str, key: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "on", "1"):
        return True
    if lowered in ("false", "off", "0"):
        return False
    raise BackendLoadError(f"failed to convert '{value}' to boolean for parameter '{key}'")


def parse_int(value: str, key: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise BackendLoadError(f"failed to convert '{value}' to integral number for parameter '{key}'") from None
