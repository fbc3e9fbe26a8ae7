"""A server started as its own process for a test: a free loopback port, and a process that is
waited for until it answers and stopped with SIGTERM (SIGKILL when it does not exit)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from typing import Callable, Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def started(command: list[str], ready: Callable[[], bool], what: str, timeout_s: float = 60,
            stop_s: float = 30) -> Iterator[subprocess.Popen]:
    """Run ``command`` until ``ready()`` says yes (an exception counts as not yet: not listening);
    RuntimeError with its output when it exits or ``timeout_s`` passes first."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if ready():
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {process.stdout.read()}")
            time.sleep(0.2)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(stop_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
