"""The HTTP port's guard: a bounded number of open connections, each given a deadline for its request's head.

aiohttp reads a request's head without a time limit and keeps every connection a client opens, so clients
sending a byte a second hold their connections for ever, and enough of them use up the process's file
descriptors. Here every connection of the HTTP port goes through ConnectionGuard: past `max_connections`
open ones a new one is closed at once (a WARNING a minute says so while it lasts), and a connection that has
not sent a whole request head within `head_seconds` of opening, or of its last response, is closed. Over TLS
a connection counts once its handshake is done (asyncio hands it over only then); handshakes under way are
bounded by the server's handshake timeout instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

log = logging.getLogger(__name__)

REFUSAL_LOG_SECONDS = 60.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionGuard:
    """A protocol factory for `loop.create_server`, around `protocols` (aiohttp's web.Server, set once its
    runner is set up); `middleware` must run in the application, so that the guard knows when a request's
    head has arrived."""

    def __init__(self, *, max_connections: int, head_seconds: float) -> None:
        self.protocols: Callable[[], asyncio.Protocol] | None = None
        self.max_connections = max_connections
        self.head_seconds = head_seconds
        self.open = 0
        self.requests = 0  # being served
        self._idle: asyncio.Event | None = None  # set when the last request being served ends, while one waits
        self._by_transport: dict[asyncio.BaseTransport, _Guarded] = {}
        self._refusals_logged_at = -REFUSAL_LOG_SECONDS

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        guarded = self._by_transport.get(request.transport) if request.transport is not None else None
        if guarded is not None:
            guarded.serving()
        self.requests += 1
        try:
            return await handler(request)
        finally:
            self.requests -= 1
            if guarded is not None:
                guarded.waiting()
            if self._idle is not None and not self.requests:
                self._idle.set()

    async def until_idle(self) -> None:
        """Return once no request is being served (a graceful stop's wait for the calls in flight)."""
        while self.requests:
            self._idle = asyncio.Event()
            await self._idle.wait()

    def _admit(self, guarded: _Guarded, transport: asyncio.BaseTransport) -> bool:
        if self.open >= self.max_connections:
            now = time.monotonic()
            if now - self._refusals_logged_at >= REFUSAL_LOG_SECONDS:
                self._refusals_logged_at = now
                log.warning("the HTTP port has %d connections open, its most: new ones are closed", self.open)
            return False
        self.open += 1
        self._by_transport[transport] = guarded
        return True

    def _closed(self, transport: asyncio.BaseTransport) -> None:
        self.open -= 1
        del self._by_transport[transport]


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's protocol behind the guard's cap and head deadline."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._guard._admit(self, transport):
            transport.abort()  # type: ignore[attr-defined]
            return
        protocols = self._guard.protocols
        assert protocols is not None, "the guard serves once its runner is set up"
        self._transport = transport
        self._inner = protocols()
        self._inner.connection_made(transport)
        self.waiting()

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is None or self._transport is None:
            return  # refused
        self.serving()
        self._guard._closed(self._transport)
        self._inner.connection_lost(exc)

    def serving(self) -> None:
        """A request's head arrived: no deadline while it is served."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def waiting(self) -> None:
        """Waiting for a request's head: it must arrive within the guard's head_seconds."""
        self.serving()
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self._guard.head_seconds, self._too_slow)

    def _too_slow(self) -> None:
        self._deadline = None
        if self._transport is not None:  # aborted: a close waits for a send buffer the client may never drain
            self._transport.abort()  # type: ignore[attr-defined]
