"""The gRPC port: one grpc.aio server for the services, bound directly or, with a cap per address, behind the
connection front. Bound (its undo registered first), then started; drained at a graceful stop, closed at any."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import grpc

from a2a_grpc.assembly.services import Services
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.connection_front import INNER_HOST, ConnectionFront
from a2a_grpc.connections import GRPC_INT_MAX, connection_options, default_max_connections
from a2a_grpc.listen_errors import cannot_listen
from a2a_grpc.network_logs import quiet_grpc_client_logs
from a2a_grpc.tls import ServerTLS

SHUTDOWN_SETTLE_SHARE = 0.8  # of the grace period, spent waiting for calls before running tasks are failed


def check_not_in_use(listen: str) -> None:
    """Raise OSError when every address `listen` (HOST:PORT) resolves to is in use. gRPC would refuse it
    too, but only after its C core has logged a line of its own to stderr."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        addresses = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return  # gRPC reports it
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    continue
            return  # bindable, or failing for a reason gRPC reports itself
    raise cannot_listen("listen on", listen, "--listen")


class GrpcPort:
    def __init__(self, settings: ServerSettings, services: Services, tls: ServerTLS | None, send_bytes: int) -> None:
        """`send_bytes`: the largest message sent (a task within its limits, with room for a 0.3 client's form
        of it); never more than grpc core's C int holds (2 GiB, protobuf's own bound on a message)."""
        self._settings = settings
        self._services = services
        self._tls = tls
        self._send_bytes = min(GRPC_INT_MAX, send_bytes)
        self.port = 0  # once bound
        self._server: grpc.aio.Server | None = None
        self._front: ConnectionFront | None = None
        self._inner_port = 0  # behind the front: the port grpc listens on
        self._started = False

    async def bind(self, undo: AsyncExitStack) -> None:
        """Make the server and bind the port, not accepting calls yet. OSError, naming the address, when it
        cannot be bound."""
        settings = self._settings
        quiet_grpc_client_logs()
        others = settings.http_max_connections if settings.http_listen else 0
        per_address = settings.max_connections_per_address
        max_connections = settings.max_connections or default_max_connections(others, 3 if per_address else 1)
        undo.push_async_callback(self.close)
        self._server = server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", settings.max_message_bytes),
                ("grpc.max_send_message_length", self._send_bytes),
                # soft = hard limit: gRPC otherwise refuses headers between 8 and 16 KiB at random
                ("grpc.max_metadata_size", settings.max_metadata_bytes),
                ("grpc.absolute_max_metadata_size", settings.max_metadata_bytes),
                ("grpc.so_reuseport", int(settings.worker_mode)),
                *connection_options(max_connections, settings.handshake_seconds, settings.connection_idle_seconds),
            ],
        )
        self._services.register(server)
        if not settings.worker_mode:  # a worker's port is held by its parent, which checked it
            check_not_in_use(settings.listen)
        if per_address:
            self._front = ConnectionFront(per_address=per_address, max_connections=max_connections)
        listen = f"{INNER_HOST}:0" if self._front is not None else settings.listen  # behind the front: on loopback
        try:
            if self._tls is None:
                self.port = server.add_insecure_port(listen)
            else:
                self.port = server.add_secure_port(listen, self._tls.grpc_credentials())
            if self._front is not None:
                self._inner_port = self.port
                self.port = await self._front.bind(settings.listen, reuse_port=settings.worker_mode)
        except (RuntimeError, OSError):  # grpcio raises RuntimeError when nothing could be bound
            self.port = 0
        if self.port == 0:
            raise OSError(
                f"cannot listen on {settings.listen}: address in use or not valid (choose another with --listen HOST:PORT)"
            )

    @property
    def target(self) -> str:
        host = self._settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Take calls."""
        assert self._server is not None, "bound first"
        self._started = True
        await self._server.start()
        if self._front is not None:
            await self._front.start(self._inner_port)

    def refuse_connections(self) -> None:
        """The drain's first step: no new connection (behind the front; grpc's own refuses at `drain`)."""
        if self._front is not None:
            self._front.close()

    async def drain(self, grace: float, fail_running: Callable[[], Awaitable[int]]) -> int:
        """Refuse new calls and give those in flight `grace` seconds. Shortly before it ends, `fail_running` fails
        the tasks still running and ends waiting streams, so that their callers get that answer rather than
        UNAVAILABLE when gRPC cancels the calls. Returns what `fail_running` returned (0 when not called)."""
        server, self._server = self._server, None
        if server is None:
            return 0
        stopping = asyncio.ensure_future(server.stop(grace))
        done, _ = await asyncio.wait({stopping}, timeout=grace * SHUTDOWN_SETTLE_SHARE)
        failed = 0 if done else await fail_running()
        await stopping
        return failed

    async def close(self) -> None:
        """Close the port at once, as far as it was bound."""
        self.refuse_connections()
        server, self._server = self._server, None
        if server is None:
            return
        try:
            if not self._started:  # grpc core listens from the bind on, and stops only once started and stopped
                await server.start()
        finally:
            await server.stop(0)
