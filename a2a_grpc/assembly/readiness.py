"""grpc.health.v1 as the server reports it: readiness (serving, not draining, the store reachable and not full)
and liveness, with the watch that asks the store whether it answers."""

from __future__ import annotations

import asyncio
import logging

from grpc_health.v1 import health, health_pb2

from a2a_grpc.protocol import SERVICE_NAME
from a2a_grpc.store import TaskStore

log = logging.getLogger("a2a_grpc.server")  # the server's lines, under the one name operators filter on

# grpc.health.v1 service names: "" and SERVICE_NAME say whether this server can take calls now (readiness:
# NOT_SERVING while the store is unreachable or full, and while draining); LIVENESS_SERVICE only whether the
# process answers at all (SERVING from the moment the port is bound until the drain), for a liveness probe
# that must not restart a server whose database is down.
READINESS_SERVICES = ("", SERVICE_NAME)
LIVENESS_SERVICE = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Readiness:
    """The health service and what it reports. `starting` once the ports are bound, `open` once they serve,
    `close` at the drain (or a failed start)."""

    def __init__(self, store: TaskStore, interval_seconds: float, timeout_seconds: float) -> None:
        self.health = health.aio.HealthServicer()
        self._store = store
        self._interval_seconds = interval_seconds
        self._timeout_seconds = timeout_seconds
        self._updates: set[asyncio.Future[None]] = set()
        self._accepting = False  # started and not draining: readiness may say SERVING
        self._storage_writable = True  # False while the store refuses writes for want of space
        self._store_reachable = True  # False while the store does not answer the readiness check
        self._watch: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        """What readiness reports: serving, not draining, and the store reachable and not full."""
        return self._accepting and self._storage_writable and self._store_reachable

    def report_storage(self, writable: bool) -> None:
        """NOT_SERVING while the store refuses writes for want of space (the task manager tells)."""
        self._storage_writable = writable
        update = asyncio.ensure_future(self._apply())
        self._updates.add(update)
        update.add_done_callback(self._updates.discard)

    async def starting(self) -> None:
        """The port is bound: alive, not ready (the servicer starts with "" SERVING)."""
        await self._set(NOT_SERVING)
        await self.health.set(LIVENESS_SERVICE, SERVING)

    async def open(self) -> None:
        """Both ports serve: ready while the store answers."""
        self._accepting = True
        await self._apply()
        self._watch = asyncio.create_task(self._watch_store(), name="a2a-grpc-store-readiness")

    async def close(self) -> None:
        """Not ready from now on, the store no longer asked."""
        self._accepting = False
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.wait({watch})

    async def _apply(self) -> None:
        """Set readiness from the current state (each update reads it afresh, so the last one run wins)."""
        await self._set(SERVING if self.ready else NOT_SERVING)

    async def _set(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        for service in READINESS_SERVICES:
            await self.health.set(service, status)  # ignored once draining has begun

    async def _watch_store(self) -> None:
        """Ask the store for a trivial read every readiness interval, bounded by the readiness timeout:
        readiness goes NOT_SERVING when it fails (PostgreSQL down or unreachable), SERVING when it answers again."""
        while True:
            await asyncio.sleep(self._interval_seconds)
            try:
                async with asyncio.timeout(self._timeout_seconds):
                    await self._store.ping()
            except TimeoutError:
                reachable, reason = False, f"no answer within {self._timeout_seconds:g}s"
            except Exception as error:  # whatever the store raised: it cannot serve calls now
                reachable, reason = False, str(error) or type(error).__name__
            else:
                reachable, reason = True, ""
            if reachable == self._store_reachable:
                continue
            self._store_reachable = reachable
            if reachable:
                log.info("the task store answers again%s", "" if self._storage_writable else " (but it is full)")
            else:
                log.warning("the task store failed its readiness check (%s): NOT_SERVING until it answers", reason)
            await self._apply()
