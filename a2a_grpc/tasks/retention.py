"""Event-log retention: the event logs of tasks that have been final for longer than the retention are
deleted from the store, once at start-up and then every PRUNE_SECONDS. A stream or a webhook that still
needs such events gets the task as it is instead, as when the memory store bounds a log."""

from __future__ import annotations

import asyncio
import logging

from a2a_grpc.settings.defaults import EVENT_RETENTION_SECONDS as EVENT_RETENTION_SECONDS
from a2a_grpc.store.base import StoreError, TaskStore

log = logging.getLogger(__name__)

PRUNE_SECONDS = 300.0


class EventPruner:
    """Prunes the store's event logs in the background, from `start` until `stop`."""

    def __init__(self, store: TaskStore, retention_seconds: float, every_seconds: float = PRUNE_SECONDS) -> None:
        self.store = store
        self.retention_seconds = retention_seconds
        self.every_seconds = every_seconds
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._prune(), name="event-log-pruner")

    async def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.wait({loop})

    async def _prune(self) -> None:
        while True:
            try:
                pruned = await self.store.prune_events(self.retention_seconds)
            except StoreError as error:
                log.warning("could not delete the event logs of old final tasks: %s", error)
            else:
                log.debug("deleted %d events of tasks final for over %g s", pruned, self.retention_seconds)
            await asyncio.sleep(self.every_seconds)
