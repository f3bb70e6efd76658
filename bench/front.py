"""An accepting step of our own in front of a grpc server, the shape a per-address connection cap would need
(grpc's Python API hands the application no accepted socket): the front accepts on the public port, refuses an
address past its cap of open connections, and relays each connection's bytes both ways to the grpc server on
loopback. Transports and protocols, with flow control, no stream objects: the cheapest relay asyncio allows.
send.bare-front measures what it costs beside send.bare (issue 29, finding 4). grpc sees every caller as the
front's loopback address, which the per-caller limits would also need told."""

from __future__ import annotations

import asyncio
from collections import Counter

MAX_CONNECTIONS_PER_ADDRESS = 64


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection: what it receives is written to `peer`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Pipe | None = None
        self.early: list[bytes] = []  # received before the other side is connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.peer is None or self.peer.transport is None:
            self.early.append(data)
        else:
            self.peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Accepted(_Pipe):
    def __init__(self, front: CappedFront) -> None:
        super().__init__()
        self._front = front
        self._address = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._address = str(transport.get_extra_info("peername")[0])
        if self._front.open[self._address] >= MAX_CONNECTIONS_PER_ADDRESS:
            transport.close()
            return
        self._front.open[self._address] += 1
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        _, upstream = await loop.create_connection(_Pipe, "127.0.0.1", self._front.target_port)
        upstream.peer, self.peer = self, upstream
        for side in (self, upstream):
            assert side.peer is not None and side.peer.transport is not None
            for data in side.early:
                side.peer.transport.write(data)
            side.early.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address:
            self._front.open[self._address] -= 1
        super().connection_lost(exc)


class CappedFront:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.open: Counter[str] = Counter()

    async def start(self) -> tuple[asyncio.Server, int]:
        server = await asyncio.get_running_loop().create_server(lambda: _Accepted(self), "127.0.0.1", 0)
        return server, int(server.sockets[0].getsockname()[1])
