"""Model names as the server takes them from a client: one directory of the repository."""

from __future__ import annotations

from tritonctl.serve.core.errors import invalid_arg

FORBIDDEN = ("/", "\\", "\0")


def check_model_name(name: str) -> None:
    """Refuse (400 / INVALID_ARGUMENT) a name that is not one plain directory of the repository:
    empty, ``.``, ``..``, or holding ``/``, ``\\`` or NUL. A name that is not UTF-8 never gets
    here: each transport refuses it while decoding."""
    if name in ("", ".", "..") or any(c in name for c in FORBIDDEN):
        raise invalid_arg(f"invalid model name {name!r}: a model name is one directory of the model repository; "
                          "it cannot be empty, '.' or '..', or contain '/', '\\' or NUL")


def check_version(name: str, version: str) -> None:
    """Refuse a requested version that is not a decimal number (empty: the model's latest)."""
    if version and not (version.isascii() and version.isdigit()):
        raise invalid_arg(f"invalid version {version!r} for model '{name}': a version is a non-negative integer")
