"""The gRPC port's cap on connections per address (`--max-connections-per-address`), which grpc core lacks.

grpc core counts connections for all addresses together, and grpc's Python API hands the application no
accepted socket. So with a cap per address the server accepts on the gRPC port itself: ConnectionFront takes
each connection, closes it at once when its address already has as many open as the cap (or the port as
many as `max_connections`; a WARNING a minute says so while it lasts), and otherwise relays its bytes, both
ways and as they come (TLS included: grpc still does the handshake), to grpc listening on a loopback port. grpc
sees every connection coming from that loopback address, so the front records, for each connection it opened
to grpc, the caller's own peer (PEERS), and the chain reads the caller from there (a2a_grpc.arrival): the
limits, the throttle and the access log keep seeing the caller's address.

What it costs (bench case send.bare-front beside send.bare): no measurable rate or CPU per call at 64
concurrent calls on one connection; two more file descriptors per connection (the default `max_connections`
counts three per connection then); and a loopback port that local processes could reach directly.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from typing import cast

log = logging.getLogger(__name__)

REFUSAL_LOG_SECONDS = 60.0
INNER_HOST = "127.0.0.1"  # where grpc listens behind the front
PEERS: dict[str, str] = {}  # grpc's peer of a relayed connection ("ipv4:127.0.0.1:PORT") -> the caller's


def grpc_peer(address: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """A socket address as grpc writes a peer, a URI: `ipv4:1.2.3.4:5`, `ipv6:%5B::1%5D:5` (the brackets, and a zone's
    `%`, percent-encoded)."""
    host, port = address[0], address[1]
    return f"ipv6:%5B{host.replace('%', '%25')}%5D:{port}" if ":" in host else f"ipv4:{host}:{port}"


class ConnectionFront:
    def __init__(self, *, per_address: int, max_connections: int) -> None:
        self.per_address = per_address
        self.max_connections = max_connections
        self.open: Counter[str] = Counter()  # address -> connections open
        self.total = 0
        self.inner_port = 0
        self._server: asyncio.Server | None = None
        self._refusals_logged_at = -REFUSAL_LOG_SECONDS

    async def bind(self, listen: str, *, reuse_port: bool) -> int:
        """Bind `listen` (HOST:PORT) without accepting yet; the port bound."""
        host, _, port = listen.rpartition(":")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Accepted(self),
            host.strip("[]") or None,
            int(port),
            reuse_port=reuse_port or None,
            start_serving=False,
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, inner_port: int) -> None:
        """Accept, relaying to grpc on `inner_port`."""
        assert self._server is not None, "bound first"
        self.inner_port = inner_port
        await self._server.start_serving()

    def close(self) -> None:
        """Accept no more; relayed connections end as grpc ends them."""
        if self._server is not None:
            self._server.close()

    def admit(self, address: str) -> bool:
        if self.open[address] >= self.per_address or self.total >= self.max_connections:
            now = time.monotonic()
            if now - self._refusals_logged_at >= REFUSAL_LOG_SECONDS:
                self._refusals_logged_at = now
                log.warning(
                    "the gRPC port closes new connections: %d open in all (at most %d), %d from %s (at most %d)",
                    self.total,
                    self.max_connections,
                    self.open[address],
                    address,
                    self.per_address,
                )
            return False
        self.open[address] += 1
        self.total += 1
        return True

    def closed(self, address: str) -> None:
        self.total -= 1
        self.open[address] -= 1
        if not self.open[address]:
            del self.open[address]


class _Side(asyncio.Protocol):
    """One end of a relayed connection: what it receives is written to the other end."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _Side | None = None
        self._early: list[bytes] = []  # received before the other end was linked

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio.Transport's

    def link(self, other: _Side) -> None:
        """Relay to `other` from now on, what arrived before it first."""
        self.other = other
        assert other.transport is not None
        for data in self._early:
            other.transport.write(data)
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.write(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool | None:
        """HTTP/2 has no use for half a connection: one end done, both are (returning None closes this one)."""
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


class _Accepted(_Side):
    """A caller's connection: admitted by the front, then relayed to grpc."""

    def __init__(self, front: ConnectionFront) -> None:
        super().__init__()
        self._front = front
        self._address = ""
        self._inner_peer = ""
        self._counted = False
        self._relaying: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        if not self._front.admit(address):
            transport.abort()  # type: ignore[attr-defined]
            return
        self._address, self._counted = address, True
        transport.pause_reading()  # type: ignore[attr-defined]
        self._relaying = asyncio.get_running_loop().create_task(self._relay(grpc_peer(peer) if peer else "unknown"))

    async def _relay(self, caller: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, inner = await loop.create_connection(_Side, INNER_HOST, self._front.inner_port)
        except OSError:
            if self.transport is not None:
                self.transport.abort()
            return
        assert inner.transport is not None
        if self.transport is None or self.transport.is_closing():
            inner.transport.close()
            return
        self._inner_peer = grpc_peer(inner.transport.get_extra_info("sockname"))
        PEERS[self._inner_peer] = caller
        inner.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        inner.link(self)
        self.link(inner)
        self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self._counted = False
            self._front.closed(self._address)
            PEERS.pop(self._inner_peer, None)
        super().connection_lost(exc)
