"""Models loaded from files sent with the load request (``file:<version>/<name>`` parameters), as
Triton loads them: the files and the request's config make a model directory of their own in a
temporary directory, the model is loaded from there (its name need not be in the repository, and
the repository's files of that name are not used), and the directory goes with the model (on
unload, or when a later load replaces it; a load without files goes back to the repository).
"""

from __future__ import annotations

import base64
import binascii
import shutil
import tempfile
from pathlib import Path

from tritonctl.serve.core.errors import invalid_arg

PREFIX = "file:"


def poll_failure(name: str, reason: str):
    """Triton's refusal of a load whose files or config cannot make a model directory."""
    return invalid_arg(f"failed to load '{name}', failed to poll from model repository: {reason}")


def decode_base64_files(name: str, parameters: dict) -> dict:
    """``parameters`` with the ``file:`` values that travel as base64 text (HTTP's JSON, a stub's
    messages) decoded to bytes; other values as they are."""
    decoded = dict(parameters)
    for key, value in parameters.items():
        if key.startswith(PREFIX) and isinstance(value, str):
            try:
                decoded[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise poll_failure(name, f"File parameter '{key}' must hold the file's bytes in base64: {exc}") \
                    from None
    return decoded


def write_model_dir(name: str, files: dict[str, bytes]) -> Path:
    """A new ``<temporary directory>/<name>`` holding ``files`` (``file:`` key -> content), each
    key already checked to stay inside (``confine.check_file_override``)."""
    model_dir = Path(tempfile.mkdtemp(prefix="tritonctl-override-")) / name
    model_dir.mkdir()
    for key, content in files.items():
        target = model_dir / key[len(PREFIX):]
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        except OSError as exc:
            remove_model_dir(model_dir)
            raise poll_failure(name, f"Invalid file parameter '{key}': {exc.strerror or exc}") from None
    return model_dir


def remove_model_dir(model_dir: Path) -> None:
    """Remove a directory ``write_model_dir`` made (with the temporary directory around it)."""
    shutil.rmtree(model_dir.parent, ignore_errors=True)
