"""What the front ends over the C++ transports (gRPC and HTTP) share: the choice between the
C++ transport and the Python one, the transport, which binds when it is made, and its event
file descriptor, watched by the server's event loop."""

from __future__ import annotations

import asyncio
import importlib
import logging
from types import ModuleType
from typing import Callable

log = logging.getLogger("tritonctl.serve")


# Reinstalling from source runs setup.py, which builds each C++ transport whose library it finds.
REINSTALL = ("reinstall tritonctl from source (pip install -e . in a checkout, else pip install --force-reinstall "
             "--no-deps --no-binary tritonctl tritonctl)")


def import_native(name: str) -> tuple[ModuleType | None, str, bool]:
    """A C++ transport's extension module: (the module or None, why it cannot be used, whether it
    was never built). It is not built where setup.py did not find its library."""
    try:
        return importlib.import_module(name), "", False
    except ImportError as exc:
        return None, str(exc), isinstance(exc, ModuleNotFoundError)  # else built, but it does not load


def use_native(protocol: str, transport: str, fallback: str, native: ModuleType, library: str,
               debian_package: str) -> bool:
    """Whether ``transport`` ("auto", "native" or ``fallback``, the Python transport) means the
    C++ one, given whether ``native`` (the front-end module, with ``available()`` and
    ``UNAVAILABLE_REASON``) was built; ``library`` (``debian_package`` on Debian and Ubuntu) is
    what setup.py builds it with, and is named, with how to rebuild, where it was not built."""
    choices = ("auto", "native", fallback)
    if transport not in choices:
        raise ValueError(f"unknown {protocol} transport '{transport}': expected one of {', '.join(choices)}")
    if native.available():
        return transport != fallback
    how = (f"install {library} (Debian/Ubuntu: apt-get install {debian_package} pkg-config g++), then "
           f"{REINSTALL}")
    if transport == "native":
        raise RuntimeError(f"the native {protocol} transport is not built ({native.UNAVAILABLE_REASON}); {how}; "
                           f"or use the {fallback} transport")
    if transport == "auto":
        why = "is not built" if native.NOT_BUILT else f"does not load ({native.UNAVAILABLE_REASON})"
        log.info("%s: the C++ transport %s, so %s runs on its Python transport. For the C++ one, %s", protocol, why,
                 protocol, how)
    return False


def make_transport(make: Callable, keeps: dict, protocol: str, fallback: str):
    """``make(**keeps)``: a transport that keeps what header forwarding needs (``keeps``, empty
    without forwarding). A transport built before it could keep it is refused only when asked to."""
    try:
        return make(**keeps)
    except TypeError:
        if not keeps:
            raise
        raise RuntimeError(f"this build of the C++ {protocol} transport cannot forward headers as request "
                           f"parameters; {REINSTALL}, or use the {fallback} transport") from None


class NativeFrontEnd:
    """Subclasses handle what ``transport.take_events()`` gives in ``_on_events``."""

    def __init__(self, make_transport: Callable):
        try:
            self.transport = make_transport()
        except RuntimeError as exc:  # the port is taken or the address is not one of this host
            raise OSError(str(exc)) from None
        self.port: int = self.transport.port
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.transport.fd, self._on_events)

    async def stop(self, grace_s: float) -> None:
        """Stop accepting; what is in flight gets ``grace_s`` seconds to be answered (the
        transport's shutdown blocks, so it runs off the loop, which goes on answering)."""
        await self._loop.run_in_executor(None, self.transport.shutdown, grace_s)
        self._loop.remove_reader(self.transport.fd)

    def _on_events(self) -> None:
        raise NotImplementedError
