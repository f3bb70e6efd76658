"""Retention, once at start-up and then every PRUNE_SECONDS: the event logs of tasks that have been final for
longer than the event retention are deleted from the store, and the tasks final for longer than the task
retention are removed with all they hold (history, artifacts, events, push configs; 0 keeps them forever).
A stream or a webhook that still needs pruned events gets the task as it is instead, as when the memory store
bounds a log; a removed task is unknown, TASK_NOT_FOUND as if it never was. Only final tasks go: a task that
waits for input or authorization stays, however long it waits."""

from __future__ import annotations

import asyncio
import logging

from a2a_grpc.settings.defaults import EVENT_RETENTION_SECONDS as EVENT_RETENTION_SECONDS
from a2a_grpc.settings.defaults import TASK_RETENTION_SECONDS as TASK_RETENTION_SECONDS
from a2a_grpc.store.base import StoreError, TaskStore

log = logging.getLogger(__name__)

PRUNE_SECONDS = 300.0
# A task retention shorter than PRUNE_SECONDS is checked as often as it lasts, but no more often than this.
MIN_ROUND_SECONDS = 0.05


def round_seconds(task_retention_seconds: float) -> float:
    """How long the loop waits between rounds: a removed task outlives its retention by at most that."""
    if not task_retention_seconds:
        return PRUNE_SECONDS
    return min(PRUNE_SECONDS, max(MIN_ROUND_SECONDS, task_retention_seconds))


class Retention:
    """Prunes old event logs and removes old final tasks in the background, from `start` until `stop`."""

    def __init__(self, store: TaskStore, event_retention_seconds: float, task_retention_seconds: float = 0.0) -> None:
        self.store = store
        self.event_retention_seconds = event_retention_seconds
        self.task_retention_seconds = task_retention_seconds
        self.every_seconds = round_seconds(task_retention_seconds)
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._run(), name="retention")

    async def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.wait({loop})

    async def _run(self) -> None:
        while True:
            await self._prune_events()
            if self.task_retention_seconds:
                await self._remove_tasks()
            await asyncio.sleep(self.every_seconds)

    async def _prune_events(self) -> None:
        try:
            pruned = await self.store.prune_events(self.event_retention_seconds)
        except StoreError as error:
            log.warning("could not delete the event logs of old final tasks: %s", error)
        else:
            log.debug("deleted %d events of tasks final for over %g s", pruned, self.event_retention_seconds)

    async def _remove_tasks(self) -> None:
        try:
            removed = await self.store.remove_final_tasks(self.task_retention_seconds)
        except StoreError as error:
            log.warning("could not remove old final tasks: %s", error)
        else:
            log.debug("removed %d tasks final for over %g s", removed, self.task_retention_seconds)


EventPruner = Retention  # its name while it pruned event logs alone
