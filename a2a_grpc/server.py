"""The server: the A2A gRPC service behind its interceptor chain, health, reflection and the HTTP agent card.
Its parts are built by a2a_grpc.assembly.build and started and stopped in the order a2a_grpc.assembly.lifecycle
gives; this is what an application holds."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import grpc

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.assembly import lifecycle
from a2a_grpc.assembly.agent import load_agent
from a2a_grpc.assembly.build import assemble
from a2a_grpc.assembly.readiness import LIVENESS_SERVICE, NOT_SERVING, READINESS_SERVICES, SERVING
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.auth import AuthSettings
from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.push.service import PushSettings
from a2a_grpc.store import TaskStore

__all__ = [
    "LIVENESS_SERVICE",
    "NOT_SERVING",
    "READINESS_SERVICES",
    "SERVING",
    "A2AServer",
    "AuthSettings",
    "PushSettings",
    "ServerSettings",
    "TaskStore",
    "load_agent",
    "run",
    "serve_until_signalled",
]

log = logging.getLogger(__name__)


class A2AServer:
    """One agent served over gRPC (and its card over HTTP). `start`, then `stop`; or `async with A2AServer(...) as
    server:`, which starts it (its ports bound: `server.port`, `server.http_port`) and stops it at the end.

    Building it loads and checks everything the settings name (the agent, the cards and their keys, the TLS files,
    the limits), raising before anything runs; the store is opened and the ports are bound by `start`."""

    def __init__(
        self,
        settings: ServerSettings,
        agent: AgentExecutor | None = None,
        store: TaskStore | None = None,
        *,
        tracer_provider: Any = None,  # with settings.tracing: its spans' provider (None: the global one)
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),  # then settings.interceptors': around the servicer
    ):
        self.settings = settings
        self._parts = parts = assemble(
            settings, agent, store, tracer_provider=tracer_provider, interceptors=interceptors
        )
        served = parts.served
        self.tracing = parts.telemetry.tracing
        self.agent = served.agent
        self.interceptors = served.interceptors
        self.registry = served.registry
        self.tls = served.tls
        self.card = served.card
        self.extended_card = served.extended_card
        self.authenticator = served.authenticator
        self.card_signer = served.card_signer
        self.store = parts.store
        self.metrics = parts.telemetry.metrics
        self.push = parts.push
        self.task_limits = parts.task_limits
        self.manager = parts.manager
        self.limits = parts.limits
        self.health = parts.readiness.health
        self._running: AsyncExitStack | None = None  # between a start and a stop: what undoes the start

    async def start(self) -> None:
        """Serve: the store open, the task manager started, both ports bound, then health SERVING. A start that
        fails undoes all it had started, leaving no port bound, no thread or task behind (and `stop` nothing to do)."""
        async with AsyncExitStack() as undo:
            await lifecycle.start(self._parts, undo)
            self._running = undo.pop_all()
        scheme = "http" if self.tls is None else "https"
        card_at = f"{scheme}://{self.http_target}{AGENT_CARD_PATH}" if self.settings.http_listen else "-"
        over_tls = " over TLS" if self.tls is not None else ""
        log.info("serving A2A on %s%s (card on %s)", self.grpc_target, over_tls, card_at)
        if self.tls is not None:
            required = "; client certificates required" if self.tls.client_certificates_required else ""
            log.info("TLS certificate %s%s", self.tls.summary, required)
        if self.authenticator is None:
            log.warning("open server: the agent card has no security requirements, every caller is anonymous")

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving: health NOT_SERVING, drain calls for `grace` seconds, then close everything."""
        running, self._running = self._running, None
        if running is None:
            return
        grace = self.settings.grace_seconds if grace is None else grace
        log.info("draining: new calls are refused, calls in flight get %gs to finish", grace)
        async with running:  # then undone as a failed start is
            failed = await lifecycle.drain(self._parts, grace)
        log.info("stopped: %d task(s) still running were failed", failed)

    async def __aenter__(self) -> A2AServer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.stop()

    def reload_certificates(self) -> bool:
        """Read the TLS files again (SIGHUP): new connections on both ports get them, open ones keep theirs.
        False when there is no TLS, or the files cannot be used (then the ones loaded before stay)."""
        if self.tls is None:
            log.info("no TLS certificates to reload: the server speaks plaintext")
            return False
        return self.tls.reload()

    @property
    def ready(self) -> bool:
        """What readiness reports: serving, not draining, and the store reachable and not full."""
        return self._parts.readiness.ready

    @property
    def port(self) -> int:
        """The gRPC port bound (0 before `start`)."""
        return self._parts.grpc_port.port

    @property
    def http_port(self) -> int:
        """The HTTP port bound (0 before `start`, or without an HTTP port)."""
        return self._parts.http_port.port if self._parts.http_port is not None else 0

    @property
    def grpc_target(self) -> str:
        return self._parts.grpc_port.target

    @property
    def http_target(self) -> str:
        """HOST:PORT of the HTTP port bound; "" without an HTTP port."""
        http = self._parts.http_port
        return http.target if http is not None else ""


async def serve_until_signalled(
    server: A2AServer, stop: asyncio.Event | None = None, started: Callable[[], None] | None = None
) -> None:
    """Start `server` (then call `started`), serve until SIGTERM or SIGINT (or until `stop` is set), reading the
    TLS files again on SIGHUP, then stop it gracefully (`settings.grace_seconds` for the calls in flight)."""
    stop = asyncio.Event() if stop is None else stop
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, server.reload_certificates)
    try:
        async with server:
            if started is not None:
                started()
            await stop.wait()
    finally:  # the signals are the application's again
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)


def run(
    settings: ServerSettings,
    agent: AgentExecutor | None = None,
    store: TaskStore | None = None,
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> None:
    """Serve `agent` from a script, as `a2a-grpc serve` does, until SIGTERM or SIGINT (Ctrl-C); then stop
    gracefully and return. Errors of the settings raise before anything is bound."""
    server = A2AServer(settings, agent, store, interceptors=interceptors)
    asyncio.run(serve_until_signalled(server))
