"""The bodies of the HTTP shared-memory register requests (serving_protocol.md A.1 rows 16 and
19), read as Triton's HTTP front end reads them and handed to the core's SharedMemoryManager."""

from __future__ import annotations

import base64
import binascii

from tritonctl.serve.core.errors import invalid_arg
from tritonctl.serve.core.shm import CUDA, SharedMemoryManager


def check_name(kind: str, name: str) -> None:
    """What Triton refuses before it reads the body: no region name."""
    if not name:
        raise invalid_arg(f"'region name' is necessary to register {kind} shared memory region")


def check_cuda(shm: SharedMemoryManager, kind: str, name: str) -> None:
    """A CUDA region on a server that cannot open one, refused once the body is read as JSON (a
    body that is not JSON is refused first, as Triton refuses it)."""
    if kind == CUDA and not shm.cuda_supported():
        raise invalid_arg(f"failed to register CUDA shared memory region: '{name}', GPUs not supported")


def register(shm: SharedMemoryManager, kind: str, name: str, body: dict) -> None:
    """``{"key", "offset", "byte_size"}`` (system) or ``{"raw_handle": {"b64"}, "device_id",
    "byte_size"}`` (CUDA)."""
    if kind != CUDA:
        key = _field(body, "key", str, "string")
        offset = _field(body, "offset", int, "unsigned integer", default=0)
        shm.register_system(name, key, offset, _field(body, "byte_size", int, "unsigned integer"))
        return
    encoded = _field(body, "raw_handle", dict, "object").get("b64")
    try:
        raw_handle = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except (binascii.Error, ValueError):
        raw_handle = b""  # refused below, as a handle of the wrong size
    shm.register_cuda(name, raw_handle, _field(body, "device_id", int, "unsigned integer"),
                      _field(body, "byte_size", int, "unsigned integer"))


def _field(body: dict, key: str, kind: type, what: str, default=None):
    value = body.get(key, default)
    if value is None:
        raise invalid_arg(f"Shared memory register request has no '{key}' field")
    if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 0):
        raise invalid_arg(f"Shared memory register request has an invalid '{key}' field: expected {what}, got "
                          f"{value!r}")
    return value
