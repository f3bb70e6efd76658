"""The push delivery worker: delivers each task's events to its webhooks, in order, at least once.

A task's event log is the outbox: each push config holds a cursor, the last event delivered to it. The
worker claims configs with events past their cursor (one replica at a time holds a config), and for each
runs a courier that posts the events one by one, retrying with backoff, and moves the cursor on after
each 2xx (or after giving up on an event). A crash between a delivery and its cursor write sends that
event again after the restart: receivers must be idempotent, as the spec says; nothing due is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.sender import Attempt, PushSender, backoff, safe_host
from a2a_grpc.store.base import EventsPrunedError, PushTarget, TaskEvent, TaskStore

log = logging.getLogger(__name__)

EVENT_PAGE = 64  # events a courier reads from the log at a time


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    status_only: bool = False  # deliver status changes only, not artifact updates
    max_attempts: int = 10  # attempts at one notification before it is given up on
    max_age_seconds: float = 3600.0  # ... or time since its first attempt
    concurrency: int = 64  # requests in flight over all webhooks
    couriers: int = 256  # webhooks served at once
    claim_seconds: float = 30.0  # a courier's hold on its webhook, renewed at every cursor move
    sweep_seconds: float = 1.0  # how often to look for due notifications nobody announced


class PushWorker:
    """Claims webhooks with notifications due and delivers them; `wake(task_id)` when a task with push
    configs stored new events, so delivery starts at once instead of at the next sweep."""

    def __init__(self, store: TaskStore, sender: PushSender, claimer: str, settings: DeliverySettings) -> None:
        self.store = store
        self.sender = sender
        self.claimer = claimer
        self.settings = settings
        self._requests = asyncio.Semaphore(settings.concurrency)
        self._couriers: dict[str, dict[str, asyncio.Task[None]]] = {}  # task id -> config id -> its courier
        self._courier_count = 0
        self._more: set[tuple[str, str]] = set()  # couriers whose task stored events while they ran
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._claim_loop())

    async def stop(self) -> None:
        couriers = [courier for by_config in self._couriers.values() for courier in by_config.values()]
        tasks = [task for task in (self._loop_task, *couriers) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.sender.close()

    def wake(self, task_id: str) -> None:
        for config_id in self._couriers.get(task_id, ()):
            self._more.add((task_id, config_id))
        self._wakeup.set()

    async def _claim_loop(self) -> None:
        while True:
            self._wakeup.clear()
            free = self.settings.couriers - self._courier_count
            try:
                targets = await self.store.claim_push_targets(self.claimer, self.settings.claim_seconds, free)
            except Exception as error:  # the store is unreachable: the next sweep retries
                log.warning("could not look for due push notifications: %s", error)
                targets = []
            for target in targets:
                self._start_courier(target)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.sweep_seconds):
                    await self._wakeup.wait()

    def _start_courier(self, target: PushTarget) -> None:
        task_id, config_id = target.config.task_id, target.config.id
        by_config = self._couriers.setdefault(task_id, {})
        if config_id in by_config:
            return
        by_config[config_id] = asyncio.get_running_loop().create_task(self._courier(target))
        self._courier_count += 1
        by_config[config_id].add_done_callback(lambda _: self._courier_done(task_id, config_id))

    def _courier_done(self, task_id: str, config_id: str) -> None:
        self._courier_count -= 1
        self._more.discard((task_id, config_id))
        by_config = self._couriers[task_id]
        del by_config[config_id]
        if not by_config:
            del self._couriers[task_id]

    async def _courier(self, target: PushTarget) -> None:
        config = target.config
        key = (config.task_id, config.id)
        delivered = target.delivered
        try:
            while True:
                self._more.discard(key)
                events = await self._next_events(target, delivered)
                if not events:
                    if key in self._more:
                        continue
                    return
                for event in events:
                    if not (self.settings.status_only and event.state == 0):
                        await self._deliver(config, event)
                    delivered = max(delivered, event.seq)
                    if not await self.store.ack_push(
                        config.task_id, config.id, delivered, self.claimer, self.settings.claim_seconds
                    ):
                        return  # the claim lapsed and another replica took the webhook over
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("push delivery to %s stopped for now: %s", safe_host(config.url), error)
        finally:
            with contextlib.suppress(Exception):
                await self.store.release_push(config.task_id, config.id, self.claimer)

    async def _next_events(self, target: PushTarget, delivered: int) -> list[TaskEvent]:
        """The events after the cursor; when the log no longer holds them, the task as it is now."""
        try:
            return await self.store.read_events(target.config.task_id, delivered, EVENT_PAGE)
        except EventsPrunedError:
            loaded = await self.store.load_task(target.config.task_id, target.owner)
            if loaded is None:
                return []
            body = a2a_pb2.StreamResponse(task=loaded.task).SerializeToString()
            return [TaskEvent(loaded.seq, loaded.task.status.state, body)]

    async def _deliver(self, config: a2a_pb2.TaskPushNotificationConfig, event: TaskEvent) -> None:
        """Post one event until a 2xx, a final refusal, or the attempts or the age run out."""
        body = json_format.MessageToJson(a2a_pb2.StreamResponse.FromString(event.body), indent=None).encode()
        first = time.monotonic()
        for attempt_number in range(self.settings.max_attempts):
            async with self._requests:
                attempt = await self.sender.post(config, body, config.task_id)
            if attempt.delivered or not attempt.retry:
                if not attempt.delivered:
                    _gave_up(config, event, attempt)
                return
            delay = backoff(attempt_number, retry_after=attempt.retry_after)
            if time.monotonic() - first + delay > self.settings.max_age_seconds:
                break
            await asyncio.sleep(delay)
        _gave_up(config, event, attempt)


def _gave_up(config: a2a_pb2.TaskPushNotificationConfig, event: TaskEvent, attempt: Attempt) -> None:
    log.warning(
        "gave up delivering event %d of task %s to %s: %s",
        event.seq,
        config.task_id,
        safe_host(config.url),
        attempt.reason,
    )
