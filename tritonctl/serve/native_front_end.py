"""What the front ends over the C++ transports (gRPC and HTTP) share: the transport, which
binds when it is made, and its event file descriptor, watched by the server's event loop."""

from __future__ import annotations

import asyncio
from typing import Callable


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
