"""What the server and a Python model's stub process say to each other.

Control messages are small JSON objects on Unix socket pairs (orders and their results; calls and
their answers), each framed by two lengths (4 bytes each, little endian): the JSON's, then that of
the tensor bytes that follow it. Tensors never travel in the JSON, and are never pickled: a
message's tensors, laid out one after the other (``pack``), follow it on the socket when they
hold at most ``INLINE_BYTES`` (no file to make, map and remove: most requests), else they are
written into a shared-memory file of the message's own (``/dev/shm`` where there is one), which
the message names. Either way the message's ``shm`` says where its tensors are, and the reader's
arrays are writable views without a copy: over the bytes received, or over the file mapped
copy-on-write (unlinked at once). Files are named after the instance (``prefix``), so what a dead
process left behind can be removed (``remove_leftovers``).
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
_FRAME = struct.Struct("<II")  # the JSON's length, the inline tensor bytes' length
_ALIGN = 64
BYTES = "BYTES"
INLINE_BYTES = 64 * 1024  # tensors up to this size follow their message on the socket
_INLINE = "inline"  # a message's ``shm`` on the socket when its tensors follow it


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
        """Send ``message``; tensor bytes in its ``shm`` (from ``pack``) follow the JSON."""
        payload = message.get("shm")
        if isinstance(payload, (bytes, bytearray)):
            message = {**message, "shm": _INLINE}
        else:
            payload = b""
        data = json.dumps(message, separators=(",", ":")).encode()
        with self._send_lock:
            self.sock.sendall(b"".join((_FRAME.pack(len(data), len(payload)), data, payload)))

    def receive(self) -> dict | None:
        """The next message (with its inline tensor bytes, writable, as its ``shm``), or None once
        the other side has gone."""
        header = self._exactly(_FRAME.size)
        if header is None:
            return None
        size, payload_size = _FRAME.unpack(header)
        body = self._exactly(size)
        payload = self._exactly(payload_size) if body is not None and payload_size else bytearray()
        if body is None or payload is None:
            return None
        message = json.loads(body)
        if message.get("shm") == _INLINE:
            message["shm"] = payload
        return message

    def _exactly(self, size: int) -> bytearray | None:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            try:
                count = self.sock.recv_into(view[got:], min(size - got, 1 << 20))
            except OSError:
                return None
            if not count:
                return None
            got += count
        return buffer

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def serialize_bytes(array: np.ndarray) -> bytes:
    """Triton's BYTES wire form of ``array``, in C order (pb_utils.serialize_byte_tensor's too)."""
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


def pack(tensors: list[tuple[str, np.ndarray]], prefix: str) -> tuple[list[dict], bytearray | str | None]:
    """Lay ``tensors`` (name, array) out for a message's ``shm``: their descriptions, in order, and
    where they are: their bytes (at most INLINE_BYTES, sent after the message), else the path of
    a new shared-memory file holding them (None when they hold no bytes)."""
    metas, pieces, total = [], [], 0
    for name, array in tensors:
        array = np.asarray(array)
        if array.dtype.kind in "OSU":
            data = serialize_bytes(array)
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
    if total <= INLINE_BYTES:
        buffer = bytearray(total)
        _fill(buffer, metas, pieces)
        return metas, buffer
    fd, path = tempfile.mkstemp(prefix=prefix, dir=shm_directory())
    try:
        os.ftruncate(fd, total)
        with mmap.mmap(fd, total) as mapped:
            _fill(mapped, metas, pieces)
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return metas, path


def _fill(buffer, metas: list[dict], pieces: list) -> None:
    for meta, data in zip(metas, pieces):
        if not meta["size"]:
            continue
        if isinstance(data, bytes):
            buffer[meta["offset"]:meta["offset"] + meta["size"]] = data
        else:
            np.ndarray(data.shape, data.dtype, buffer=buffer, offset=meta["offset"])[...] = data


def unpack(metas: list[dict], where: bytearray | str | None) -> list[tuple[str, np.ndarray]]:
    """The tensors ``pack`` laid out, as writable arrays over the bytes received with the message,
    or over the file mapped copy-on-write (the file is unlinked; the mapping lives as long as the
    arrays)."""
    mapped = where
    if isinstance(where, str):
        fd = os.open(where, os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
        finally:
            os.close(fd)
            os.unlink(where)
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


def pack_groups(groups: list, prefix: str) -> tuple[list, bytearray | str | None]:
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


def unpack_groups(groups: list, where: bytearray | str | None) -> list:
    flat = unpack([meta for group in groups if group is not None for meta in group], where)
    out, at = [], 0
    for group in groups:
        if group is None:
            out.append(None)
        else:
            out.append(flat[at:at + len(group)])
            at += len(group)
    return out
