"""Model names as the server takes them from a client: one directory of the repository."""

from __future__ import annotations

import re

from tritonctl.serve.core.errors import invalid_arg

FORBIDDEN = ("/", "\\", "\0")


def check_model_name(name: str) -> None:
    """Refuse (400 / INVALID_ARGUMENT) a name that is not one plain directory of the repository:
    empty, ``.``, ``..``, or holding ``/``, ``\\`` or NUL. A name that is not UTF-8 never gets
    here: each transport refuses it while decoding."""
    if name in ("", ".", "..") or any(c in name for c in FORBIDDEN):
        raise invalid_arg(f"invalid model name {name!r}: a model name is one directory of the model repository; "
                          "it cannot be empty, '.' or '..', or contain '/', '\\' or NUL")


VERSION = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
INT64 = range(-(1 << 63), 1 << 63)


def check_version(name: str, version: str) -> None:
    """Refuse a requested version that is not a number, or not one Triton takes (negative, past
    int64), in Triton's words (empty: the model's latest)."""
    if not version:
        return
    match = VERSION.fullmatch(version)
    if match is None or int(match.group(1)) not in INT64:
        raise invalid_arg(f"failed to get model version from specified version string '{version}' (details: stol), "
                          "version should be an integral value > 0")
    if int(match.group(1)) < 0:
        raise invalid_arg(f"invalid model version specified '{version}' , version should be an integral value > 0")
