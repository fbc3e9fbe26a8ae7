"""A reply body sent while it is being made (HTTP/1.1 chunked transfer coding): the handler answers
with a ``ChunkedBody`` in place of bytes and ``push``es its parts, then ``end``s it, from any
thread; the transport ``attach``es where they go once the reply's head is out. Parts pushed
before that wait, and go out first, in order."""

from __future__ import annotations

import threading
from typing import Callable


class ChunkedBody:
    def __init__(self):
        self._lock = threading.Lock()
        self._waiting: list[bytes] = []
        self._ended = False
        self._write: Callable[[bytes], None] | None = None
        self._close: Callable[[], None] | None = None

    def push(self, part: bytes) -> None:
        with self._lock:  # writes keep the order of the pushes
            if self._ended:
                return
            if self._write is None:
                self._waiting.append(part)
            else:
                self._write(part)

    def end(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
            if self._close is not None:
                self._close()

    def attach(self, write: Callable[[bytes], None], close: Callable[[], None]) -> None:
        """Where the body goes: ``write(part)`` for each part, then ``close()``; both must not
        block (they run under the body's lock, on whatever thread pushes)."""
        with self._lock:
            for part in self._waiting:
                write(part)
            self._waiting.clear()
            self._write, self._close = write, close
            if self._ended:
                close()
