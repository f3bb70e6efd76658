"""The HTTP port: the agent card, the JSON-RPC and HTTP+JSON faces, the JWKS of the keys that sign, and /metrics. Bound (its routes ready) before
the cards are signed, since they name it; serving once the signed card's document is made."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.log import server_logger
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from a2a_grpc.assembly.grpc_port import SHUTDOWN_SETTLE_SHARE
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.card.http import CACHE_CONTROL, CardDocument
from a2a_grpc.faces import HttpFaces
from a2a_grpc.faces.guard import MAX_HEADER_BYTES
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.http_guard import ConnectionGuard
from a2a_grpc.listen_errors import cannot_listen
from a2a_grpc.network_logs import HttpServerLog
from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.push.service import JWKS_PATH
from a2a_grpc.telemetry import METRICS_PATH, Metrics
from a2a_grpc.telemetry.worker_metrics import WorkerMetrics
from a2a_grpc.tls import ServerTLS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]  # of an HTTP route
MIN_SHUTDOWN_SECONDS = 0.1


class HttpPort:
    def __init__(
        self, settings: ServerSettings, tls: ServerTLS | None, metrics: Metrics | None, faces: HttpFaces
    ) -> None:
        self._settings = settings
        self._faces = faces
        self._tls = tls
        self._metrics = metrics
        self.port = 0  # once bound
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._worker_metrics: WorkerMetrics | None = None
        self._document: CardDocument | None = None  # what the port serves, made once the card is signed
        self.guard: ConnectionGuard | None = None  # its connections, once bound

    @property
    def target(self) -> str:
        host = self._settings.http_listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def bind(self, undo: AsyncExitStack, jwks: dict[str, Any] | None) -> None:
        """Bind the port with its routes, not accepting connections yet; `jwks` served when not None. OSError,
        naming the address, when it cannot be bound."""
        undo.push_async_callback(self.close)
        try:
            await self._bind(jwks)
        except OSError as error:
            listen = self._settings.http_listen
            raise cannot_listen("serve the agent card on", listen, "--http-listen", error) from None

    def advertise(self, *cards: a2a_pb2.AgentCard | None) -> None:
        """List the HTTP faces served in each card, at this port's address (bound)."""
        self._faces.advertise(cards, f"{'http' if self._tls is None else 'https'}://{self.target}")

    async def serve(self, document: CardDocument) -> None:
        """Accept connections, serving `document` as the agent card."""
        assert self._server is not None, "bound first"
        self._document = document
        await self._server.start_serving()

    def refuse_calls(self) -> None:
        """The drain's first step: the faces refuse new calls (UNAVAILABLE); the card is still served."""
        self._faces.refuse_calls()

    async def drain(self, grace: float, fail_running: Callable[[], Awaitable[int]]) -> int:
        """Give the requests in flight `grace` seconds (new calls refused, the card still served); the port stays
        open. Shortly before the grace ends, `fail_running` fails the tasks still running and ends waiting streams
        (as GrpcPort.drain). Returns what `fail_running` returned (0 when not called)."""
        failed = 0
        if self.guard is not None and self._server is not None:
            idle = asyncio.ensure_future(self.guard.until_idle())
            done, _ = await asyncio.wait({idle}, timeout=grace * SHUTDOWN_SETTLE_SHARE)
            if not done:
                failed = await fail_running()
                await asyncio.wait({idle}, timeout=grace * (1 - SHUTDOWN_SETTLE_SHARE))
            idle.cancel()
        return failed

    async def close(self) -> None:
        """Close the port and what serves it, as far as they were made."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._worker_metrics is not None:
            await self._worker_metrics.close()
            self._worker_metrics = None

    async def _bind(self, jwks: dict[str, Any] | None) -> None:
        settings = self._settings

        async def agent_card(request: web.Request) -> web.Response:
            assert self._document is not None  # made before the port accepts connections
            return self._document.respond(request)

        guard = ConnectionGuard(max_connections=settings.http_max_connections, head_seconds=settings.http_head_seconds)
        self.guard = guard
        app = web.Application(middlewares=[guard.middleware])
        app.router.add_get(AGENT_CARD_PATH, agent_card)
        app[MAX_HEADER_BYTES] = settings.max_metadata_bytes  # the faces' bound on a request's headers, as gRPC's
        self._faces.add_routes(app)
        if jwks is not None:

            async def signing_keys(request: web.Request) -> web.Response:
                return web.json_response(jwks, headers={"Cache-Control": CACHE_CONTROL})

            app.router.add_get(JWKS_PATH, signing_keys)
        if self._metrics is not None:
            app.router.add_get(METRICS_PATH, await self._metrics_handler(self._metrics.registry))
        runner = web.AppRunner(
            app,
            max_field_size=settings.max_metadata_bytes,  # one header as large as gRPC takes
            access_log=None,
            logger=HttpServerLog(server_logger),
            keepalive_timeout=settings.http_head_seconds,
            handler_cancellation=True,
            # what a request still served when the port closes is given (aiohttp reads 0 as no bound at all)
            shutdown_timeout=max(
                settings.grace_seconds, MIN_SHUTDOWN_SECONDS
            ),  # a client gone ends its call, as on gRPC (and a stream gives back its slot)
        )
        await runner.setup()
        guard.protocols = runner.server
        self._runner = runner
        host, _, port = settings.http_listen.rpartition(":")
        tls = self._tls.ssl_context() if self._tls is not None else None
        self._server = await asyncio.get_running_loop().create_server(
            guard,
            host.strip("[]") or "127.0.0.1",
            int(port),
            ssl=tls,
            ssl_handshake_timeout=settings.http_head_seconds if tls is not None else None,
            reuse_port=settings.worker_mode,
            start_serving=False,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _metrics_handler(self, registry: CollectorRegistry) -> Handler:
        """What serves `/metrics`: this server's registry, or in a worker every worker's metrics."""
        if self._settings.worker_metrics is None:
            return make_aiohttp_handler(registry)
        index, directory = self._settings.worker_metrics
        self._worker_metrics = WorkerMetrics(registry, Path(directory), index)
        await self._worker_metrics.start()
        return self._worker_metrics.handle
