"""The push delivery worker: delivers each task's events to its webhooks, in order, at least once.

A task's event log is the outbox: each push config holds a cursor, the last event delivered to it. The
worker claims configs with events past their cursor (one replica at a time holds a config): those of the
tasks it was woken for at once, by key, and any others at each sweep. For each it runs a courier that
posts the events one by one, retrying with backoff, and moves the cursor on as it releases the config (and
sooner when the claim needs renewing). A crash before a cursor write sends those events again after the
restart: receivers must be idempotent, as the spec says; nothing due is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.sender import POOL_LIMIT_PER_HOST, Attempt, PushSender, backoff, safe_host
from a2a_grpc.push.slots import KeyedSlots, authority
from a2a_grpc.settings import defaults
from a2a_grpc.store.base import EVENT_PAGE_BYTES, EventsPrunedError, PushTarget, TaskEvent, TaskStore, page_cut

log = logging.getLogger(__name__)

EVENT_PAGE = 64  # events a courier reads from the log at a time
STOP_SECONDS = 5.0  # how long `stop` waits for a claim in flight (and a courier its release) before cancelling


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    status_only: bool = defaults.PUSH_STATUS_ONLY  # deliver status changes only, not artifact updates
    max_attempts: int = defaults.PUSH_MAX_ATTEMPTS  # attempts at one notification before it is given up on
    max_age_seconds: float = defaults.PUSH_MAX_AGE_SECONDS  # ... or time since its first attempt
    concurrency: int = 64  # requests in flight over all webhooks
    per_host: int = POOL_LIMIT_PER_HOST  # ... and to one webhook host, so that a host that hangs holds no more
    per_owner: int = 16  # ... and for one caller's webhooks, so that a caller whose webhooks hang holds no more
    couriers: int = 256  # webhooks served at once
    claim_seconds: float = 30.0  # a courier's hold on its webhook, renewed every half of it and before each retry
    sweep_seconds: float = 1.0  # how often to look for due notifications nobody announced


class PushWorker:
    """Claims webhooks with notifications due and delivers them; `wake(task_id)` when a task with push
    configs stored new events, so delivery starts at once instead of at the next sweep. `on_delivery` is
    told how each attempt went: "delivered", "retried" (failed, to be tried again) or "failed" (given up)."""

    def __init__(
        self,
        store: TaskStore,
        sender: PushSender,
        claimer: str,
        settings: DeliverySettings,
        on_delivery: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self._on_delivery = on_delivery or _ignore
        self.sender = sender
        self.claimer = claimer
        self.settings = settings
        self._requests = asyncio.Semaphore(settings.concurrency)
        self._host_slots = KeyedSlots(settings.per_host)
        self._owner_slots = KeyedSlots(settings.per_owner)
        self._couriers: dict[str, dict[str, asyncio.Task[None]]] = {}  # task id -> config id -> its courier
        self._courier_count = 0
        self._more: set[tuple[str, str]] = set()  # couriers whose task stored events after their last read
        self._waiting: dict[tuple[str, str], PushTarget] = {}  # claimed while their courier was still ending
        self._due: set[str] = set()  # tasks woken since the last claim
        self._next_sweep = 0.0  # time.monotonic() of the next claim over every config that may be due
        # The last claim took as many webhooks as there were free couriers: more may be due, so a courier
        # that ends wakes the claim loop (else the rest would wait for the next sweep, `couriers` per sweep).
        self._claim_full = False
        self._claims_failing = False  # the last claim failed (logged once until one succeeds)
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._claim_loop())

    async def stop(self) -> None:
        """Stop claiming, stop every courier (each releases its webhook), close the sender: nothing is
        left running. A claim in flight is let finish, so that what it claimed is released, not left held
        until its claim lapses (on a SQLite store, across a restart)."""
        self._stopping = True
        self._wakeup.set()
        if self._loop_task is not None:
            loop_task, self._loop_task = self._loop_task, None
            await asyncio.wait({loop_task}, timeout=STOP_SECONDS)
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
        couriers = [courier for by_config in self._couriers.values() for courier in by_config.values()]
        for courier in couriers:
            courier.cancel()
        await asyncio.gather(*couriers, return_exceptions=True)
        for target in self._waiting.values():
            await self._release(target.config, target.delivered)
        self._waiting.clear()
        await self.sender.close()

    def wake(self, task_id: str) -> None:
        for config_id in self._couriers.get(task_id, ()):
            self._more.add((task_id, config_id))
        self._due.add(task_id)
        self._wakeup.set()

    async def _claim_loop(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            targets = await self._claim()
            if self._stopping:
                for target in targets:
                    await self._release(target.config, target.delivered)
                return
            for target in targets:
                self._start_courier(target)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._until_sweep()):
                    await self._wakeup.wait()

    async def _claim(self) -> list[PushTarget]:
        """Claim the due webhooks of the tasks woken since the last claim, or of every task when a sweep is due."""
        free = self.settings.couriers - self._courier_count
        sweep = time.monotonic() >= self._next_sweep
        if free <= 0 or not (sweep or self._due):
            self._claim_full = free <= 0
            return []
        woken, self._due = self._due, set()
        if sweep:
            self._next_sweep = time.monotonic() + self.settings.sweep_seconds
        task_ids = None if sweep else list(woken)
        try:
            targets = await self.store.claim_push_targets(
                self.claimer, self.settings.claim_seconds, free, task_ids, EVENT_PAGE
            )
        except Exception as error:  # the store is unreachable: the next sweep retries
            if not self._claims_failing:  # once per outage
                log.warning("could not look for due push notifications; retrying every sweep: %s", error)
                self._claims_failing = True
            return []
        if self._claims_failing:
            log.warning("looking for due push notifications again")
            self._claims_failing = False
        self._claim_full = len(targets) >= free
        if self._claim_full:  # what was left out is claimed once a courier is free
            self._due |= woken - {target.config.task_id for target in targets}
            if sweep:
                self._next_sweep = 0.0
        for target in targets:  # woken while the claim read their events: their couriers read again
            if target.config.task_id in self._due:
                self._more.add((target.config.task_id, target.config.id))
        return targets

    def _until_sweep(self) -> float | None:
        """How long the claim loop may sleep unless woken; without a free courier, until one ends."""
        if self._courier_count >= self.settings.couriers:
            return None
        return max(0.0, self._next_sweep - time.monotonic())

    def _start_courier(self, target: PushTarget) -> None:
        task_id, config_id = target.config.task_id, target.config.id
        by_config = self._couriers.setdefault(task_id, {})
        if config_id in by_config:  # claimed again as its courier released it: the next courier, once it ends
            self._waiting[(task_id, config_id)] = target
            return
        by_config[config_id] = asyncio.get_running_loop().create_task(self._courier(target))
        self._courier_count += 1
        by_config[config_id].add_done_callback(lambda _: self._courier_done(task_id, config_id))

    def _courier_done(self, task_id: str, config_id: str) -> None:
        self._courier_count -= 1
        by_config = self._couriers[task_id]
        del by_config[config_id]
        if not by_config:
            del self._couriers[task_id]
        key = (task_id, config_id)
        waiting = None if self._stopping else self._waiting.pop(key, None)
        if waiting is not None:  # held already: its courier starts now, and reads on if more came (`_more`)
            self._start_courier(waiting)
        elif key in self._more:  # events came after its last read: claim the webhook again now
            self._more.discard(key)
            self._due.add(task_id)
            self._wakeup.set()
        elif self._claim_full:  # a courier is free for a webhook the last claim had no room for
            self._wakeup.set()

    async def _courier(self, target: PushTarget) -> None:
        hold = _Hold(target.owner, target.config, target.delivered, time.monotonic() + self.settings.claim_seconds / 2)
        key = (hold.config.task_id, hold.config.id)
        events = list(target.events)
        try:
            while True:
                if not events:
                    self._more.discard(key)
                    events = await self._next_events(target, hold)
                    if not events:
                        return
                if not await self._deliver_page(hold, events):
                    return  # the claim lapsed and another replica took the webhook over
                if not page_cut(events, EVENT_PAGE, EVENT_PAGE_BYTES) and key not in self._more:
                    return
                events = []
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the store failed: the webhook is claimed again at a later sweep
            log.warning("push delivery to %s stopped for now: %s", safe_host(hold.config.url), type(error).__name__)
        finally:
            await self._release(hold.config, hold.delivered)

    async def _deliver_page(self, hold: _Hold, events: list[TaskEvent]) -> bool:
        """Deliver the events in order; False when the claim was lost meanwhile."""
        for event in events:
            wanted = not (self.settings.status_only and event.state == 0)  # state 0: an artifact update
            if wanted and not await self._deliver(hold, event):
                return False
            hold.delivered = max(hold.delivered, event.seq)
            if time.monotonic() >= hold.renew_at and not await self._renew(hold):
                return False
        return True

    async def _renew(self, hold: _Hold) -> bool:
        """Move the cursor to what was delivered and renew the claim; False when the claim is no longer ours."""
        config = hold.config
        renewed = await self.store.ack_push(
            config.task_id, config.id, hold.delivered, self.claimer, self.settings.claim_seconds
        )
        hold.renew_at = time.monotonic() + self.settings.claim_seconds / 2
        return renewed

    async def _release(self, config: a2a_pb2.TaskPushNotificationConfig, delivered: int) -> None:
        """Move the cursor and give the webhook back (its claim would lapse anyway): bounded, so that `stop`
        never hangs on it."""
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await self.store.release_push(config.task_id, config.id, self.claimer, delivered)
        except Exception as error:
            log.debug("could not release push config %s of task %s: %s", config.id, config.task_id, error)

    async def _next_events(self, target: PushTarget, hold: _Hold) -> list[TaskEvent]:
        """The events after the cursor (when the log no longer holds them, the task as it is now), with the
        config as it is now; none when the config was deleted."""
        current = await self.store.get_push_config(target.owner, hold.config.task_id, hold.config.id)
        if current is None:
            return []
        hold.config = current  # it may have been replaced: another url or token
        task_id = current.task_id
        try:
            events = await self.store.read_events(task_id, hold.delivered, EVENT_PAGE)
        except EventsPrunedError:
            loaded = await self.store.load_task(task_id, target.owner)
            if loaded is None:
                return []
            body = a2a_pb2.StreamResponse(task=loaded.task).SerializeToString()
            return [TaskEvent(loaded.seq, loaded.task.status.state, body)]
        return events

    def _owner_slot(self, owner: str) -> AbstractAsyncContextManager[None]:
        """The caller's share of the requests; anonymous callers ("" on an open server) cannot be told apart,
        so theirs are bounded by host alone."""
        return self._owner_slots.slot(owner) if owner else contextlib.nullcontext()

    async def _deliver(self, hold: _Hold, event: TaskEvent) -> bool:
        """Post one event until a 2xx, a final refusal, or the attempts or the age run out; the claim is
        renewed before each wait between attempts. False when the claim was lost meanwhile."""
        config = hold.config
        body = json_format.MessageToJson(a2a_pb2.StreamResponse.FromString(event.body), indent=None).encode()
        first = time.monotonic()
        attempt_number = 0
        host = authority(config.url)
        while True:
            async with self._owner_slot(hold.owner), self._host_slots.slot(host), self._requests:
                attempt = await self.sender.post(config, body, config.task_id)
            if attempt.delivered:
                self._on_delivery("delivered")
                return True
            attempt_number += 1
            if not attempt.retry or attempt_number >= self.settings.max_attempts:
                break
            delay = backoff(attempt_number - 1, retry_after=attempt.retry_after)
            if time.monotonic() - first + delay > self.settings.max_age_seconds:
                break
            if not await self._renew(hold):
                return False
            self._on_delivery("retried")
            await asyncio.sleep(delay)
        self._on_delivery("failed")
        _gave_up(config, event, attempt)
        return True


@dataclass(slots=True)
class _Hold:
    """A courier's claimed webhook: whose it is, the config as last read, the last event delivered (or given
    up on), and when the claim is to be renewed."""

    owner: str
    config: a2a_pb2.TaskPushNotificationConfig
    delivered: int
    renew_at: float  # time.monotonic()


def _ignore(outcome: str) -> None:
    pass


def _gave_up(config: a2a_pb2.TaskPushNotificationConfig, event: TaskEvent, attempt: Attempt) -> None:
    log.warning(
        "gave up delivering event %d of task %s to %s: %s",
        event.seq,
        config.task_id,
        safe_host(config.url),
        attempt.reason,
    )
