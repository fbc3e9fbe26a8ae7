"""What the server and a Python model's stub process say to each other.

Control messages are small JSON objects, each framed by its length (4 bytes, little endian), on
Unix socket pairs (orders and their results; calls and their answers). Tensors never travel in
them: each message that carries tensors writes them into
a shared-memory file of its own (``/dev/shm`` where there is one), and the message names the file
and where each tensor lies in it. The reader maps the file copy-on-write, so its arrays are
writable views without a copy, and unlinks it at once. Files are named after the instance
(``prefix``), so what a dead process left behind can be removed (``remove_leftovers``).
BYTES tensors are written as Triton serializes them: each element a 4-byte length and its bytes
(an element that is not bytes as its ``str()``, so ``1``, ``1.5`` and ``True`` arrive as text).
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import socket
import struct
import tempfile
import threading

import numpy as np

_LENGTH = struct.Struct("<I")
_ALIGN = 64
BYTES = "BYTES"


def shm_directory() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def remove_leftovers(prefix: str) -> None:
    """Unlink the tensor files of an instance's messages that were never read."""
    for path in glob.glob(os.path.join(shm_directory(), glob.escape(prefix) + "*")):
        try:
            os.unlink(path)
        except OSError:
            pass


class Channel:
    """One end of the socket pair: ``send`` from any thread, ``receive`` from one."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        with self._send_lock:
            self.sock.sendall(_LENGTH.pack(len(data)) + data)

    def receive(self) -> dict | None:
        """The next message, or None once the other side has gone."""
        header = self._exactly(_LENGTH.size)
        if header is None:
            return None
        body = self._exactly(_LENGTH.unpack(header)[0])
        return None if body is None else json.loads(body)

    def _exactly(self, size: int) -> bytes | None:
        chunks, left = [], size
        while left:
            try:
                chunk = self.sock.recv(min(left, 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _serialize_bytes(array: np.ndarray) -> bytes:
    parts = []
    for element in array.reshape(-1):  # as Triton writes BYTES: an element not bytes as its str()
        value = bytes(element) if isinstance(element, (bytes, bytearray, memoryview)) else str(element).encode("utf-8")
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def _deserialize_bytes(buffer: memoryview, shape: list[int]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    out = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        (length,) = _LENGTH.unpack_from(buffer, offset)
        offset += _LENGTH.size
        out[i] = bytes(buffer[offset:offset + length])
        offset += length
    return out.reshape(shape)


def pack(tensors: list[tuple[str, np.ndarray]], prefix: str) -> tuple[list[dict], str | None]:
    """Write ``tensors`` (name, array) into a new shared-memory file: their descriptions, in
    order, and the file's path (None when they hold no bytes)."""
    metas, pieces, total = [], [], 0
    for name, array in tensors:
        array = np.asarray(array)
        if array.dtype.kind in "OSU":
            data = _serialize_bytes(array)
            meta = {"name": name, "dtype": BYTES, "shape": list(array.shape), "offset": total, "size": len(data)}
        else:
            data = np.ascontiguousarray(array)
            meta = {"name": name, "dtype": data.dtype.str, "shape": list(array.shape), "offset": total,
                    "size": data.nbytes}
        metas.append(meta)
        pieces.append(data)
        total += -(-meta["size"] // _ALIGN) * _ALIGN
    if total == 0:
        return metas, None
    fd, path = tempfile.mkstemp(prefix=prefix, dir=shm_directory())
    try:
        os.ftruncate(fd, total)
        with mmap.mmap(fd, total) as mapped:
            for meta, data in zip(metas, pieces):
                if not meta["size"]:
                    continue
                if isinstance(data, bytes):
                    mapped[meta["offset"]:meta["offset"] + meta["size"]] = data
                else:
                    np.ndarray(data.shape, data.dtype, buffer=mapped, offset=meta["offset"])[...] = data
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return metas, path


def unpack(metas: list[dict], path: str | None) -> list[tuple[str, np.ndarray]]:
    """The tensors ``pack`` wrote, as arrays over the file mapped copy-on-write; the file is
    unlinked (the mapping lives as long as the arrays)."""
    mapped = None
    if path is not None:
        fd = os.open(path, os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
        finally:
            os.close(fd)
            os.unlink(path)
    tensors = []
    for meta in metas:
        shape = meta["shape"]
        if meta["dtype"] == BYTES:
            view = memoryview(mapped)[meta["offset"]:meta["offset"] + meta["size"]] if meta["size"] else memoryview(b"")
            array = _deserialize_bytes(view, shape)
        elif meta["size"]:
            array = np.ndarray(shape, np.dtype(meta["dtype"]), buffer=mapped, offset=meta["offset"])
        else:
            array = np.empty(shape, np.dtype(meta["dtype"]))
        tensors.append((meta["name"], array))
    return tensors


def pack_groups(groups: list, prefix: str) -> tuple[list, str | None]:
    """``pack`` for several lists of tensors (or None) in one file: their descriptions by list."""
    flat = [tensor for group in groups if group is not None for tensor in group]
    metas, path = pack(flat, prefix)
    out, at = [], 0
    for group in groups:
        if group is None:
            out.append(None)
        else:
            out.append(metas[at:at + len(group)])
            at += len(group)
    return out, path


def unpack_groups(groups: list, path: str | None) -> list:
    flat = unpack([meta for group in groups if group is not None for meta in group], path)
    out, at = [], 0
    for group in groups:
        if group is None:
            out.append(None)
        else:
            out.append(flat[at:at + len(group)])
            at += len(group)
    return out
