"""A stream's cursor on one task's event log.

Events reach a subscriber two ways. While it keeps up with a task this process runs, each event is
pushed to it as the task manager publishes it (the fast path: no store read). When it cannot take a
pushed event in order (its buffer is full, it joined behind the task, or another replica wrote the
event), it reads the store's log from its last delivered event until it has caught up, then takes pushes
again. So a slow subscriber is never dropped and never slows the agent, and every subscriber sees every
event once, in order. Only a store that bounds its log (the memory store) or pruned it (a task final for
longer than the retention) can have dropped the events a subscriber needs: it then gets the task as it
is now (a Task event) and goes on after it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.settings.defaults import MAX_SUBSCRIBER_BUFFER_BYTES
from a2a_grpc.store.base import EventsPrunedError, StoreError, TaskEvent, TaskStore

# How many bytes of pushed events one subscriber buffers before it reads the log instead.
SUBSCRIBER_BUFFER_BYTES = MAX_SUBSCRIBER_BUFFER_BYTES
# How many events one read of the log returns at most.
LOG_PAGE = 256
# How long a subscriber waits before reading the log again when an event it was told of is not there yet.
LOG_RETRY_SECONDS = 0.05

Pushed = tuple[TaskEvent, asyncio.Future[None] | None]  # an event and the write that stores it


async def wait_durable(write: asyncio.Future[None] | None) -> None:
    """Wait for a store write without letting this caller's cancellation cancel it for everyone else."""
    if write is None:
        return
    if write.done():
        write.result()
        return
    await asyncio.shield(write)


class SubscriptionStoppedError(Exception):
    """The server stopped before the task reached the end of this stream: the client should subscribe
    again (to another replica, or after the restart), after the last event it received."""


class TaskLog:
    """Where a subscriber reads one task's events from when they are not pushed to it."""

    __slots__ = ("owner", "store", "task_id")

    def __init__(self, store: TaskStore, task_id: str, owner: str) -> None:
        self.store = store
        self.task_id = task_id
        self.owner = owner

    async def read(self, after: int) -> list[TaskEvent]:
        return await self.store.read_events(self.task_id, after, LOG_PAGE)

    async def snapshot(self) -> TaskEvent:
        """The stored task as a Task event, numbered with the last event it includes."""
        loaded = await self.store.load_task(self.task_id, self.owner)
        if loaded is None:
            raise StoreError(f"task {self.task_id!r} is gone from the store")
        body = a2a_pb2.StreamResponse(task=loaded.task).SerializeToString()
        return TaskEvent(loaded.seq, loaded.task.status.state, body)


class Subscriber:
    """One stream's view of a task's events, from event `after` on, ending at a final state (or an
    interrupted one when `close_on_interrupt`), or when closed and everything known was delivered."""

    __slots__ = (
        "_buffered",
        "_closed",
        "_from_log",
        "_items",
        "_known",
        "_known_write",
        "_log",
        "_max_bytes",
        "_stopped",
        "_waiter",
        "close_on_interrupt",
        "delivered",
        "tail",
    )

    def __init__(self, close_on_interrupt: bool, max_bytes: int = SUBSCRIBER_BUFFER_BYTES) -> None:
        self.close_on_interrupt = close_on_interrupt
        self._max_bytes = max_bytes
        self._items: deque[Pushed] = deque()
        self._buffered = 0
        self._log: TaskLog | None = None
        self.delivered = 0  # the last event yielded
        self.tail = 0  # the last event yielded or buffered
        self._known = 0  # the newest event known to exist
        self._known_write: asyncio.Future[None] | None = None  # the local write that stores event `_known`
        self._from_log = False
        self._closed = False
        self._stopped = False
        self._waiter: asyncio.Future[None] | None = None

    def attach(
        self,
        log: TaskLog,
        after: int,
        latest: int,
        latest_write: asyncio.Future[None] | None = None,
        *,
        check_log: bool = False,
    ) -> None:
        """Start after event `after` of a task whose last event is `latest` (stored by `latest_write`);
        `check_log` reads the log first even when `after` is the latest (another replica may be writing)."""
        self._log = log
        self.delivered = self.tail = after
        self._known, self._known_write = latest, latest_write
        self._from_log = check_log or after < latest

    @property
    def closed(self) -> bool:
        return self._closed

    def push(self, event: TaskEvent, write: asyncio.Future[None] | None) -> None:
        """An event this process just published, to be yielded once `write` (which stores it) is durable."""
        if self._closed or event.seq <= self.tail:
            return
        if event.seq > self._known:
            self._known, self._known_write = event.seq, write
        if self._from_log or event.seq != self.tail + 1 or self._buffered + len(event.body) > self._max_bytes:
            self._read_from_log()
            return
        self._items.append((event, write))
        self._buffered += len(event.body)
        self.tail = event.seq
        self._wake()

    def note(self, seq: int) -> None:
        """Another replica stored events of the task up to `seq`."""
        if self._closed or seq <= self.tail:
            return
        self._known = max(self._known, seq)
        self._read_from_log()

    def close(self) -> None:
        """No more events will be pushed or noted: end once the known ones are delivered."""
        self._closed = True
        self._wake()

    def stop(self) -> None:
        """The server is stopping: end once the known events are delivered, with SubscriptionStoppedError."""
        self._stopped = True
        self.close()

    def _read_from_log(self) -> None:
        self._from_log = True
        self._items.clear()
        self._buffered = 0
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _ends_at(self, event: TaskEvent) -> bool:
        return event.state in TERMINAL_STATES or (self.close_on_interrupt and event.state in INTERRUPTED_STATES)

    async def events(self) -> AsyncIterator[TaskEvent]:
        """Each event once it is durable, in order, until the stream's last one."""
        while True:
            if self._from_log:
                events = await self._next_from_log()
            elif self._items:
                event, write = self._items.popleft()
                self._buffered -= len(event.body)
                await wait_durable(write)
                events = [event]
            elif self._closed:
                if self._stopped:
                    raise SubscriptionStoppedError
                return
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
                self._waiter = None
                continue
            for event in events:
                if event.seq <= self.delivered:  # pushed and then read again from the log
                    continue
                self.delivered = event.seq
                yield event
                if self._ends_at(event):
                    self._closed = True
                    return

    async def _next_from_log(self) -> list[TaskEvent]:
        """The next page of the log; back to pushed events once the log holds nothing newer."""
        await wait_durable(self._known_write)
        assert self._log is not None, "a subscriber reads the log only once attached"
        try:
            events = await self._log.read(self.delivered)
        except EventsPrunedError:
            events = [await self._log.snapshot()]
        if events:
            self.tail = max(self.tail, events[-1].seq)
        elif self.delivered < self._known:  # stored by now (a failed write raises above), or by another replica
            await asyncio.sleep(LOG_RETRY_SECONDS)
        else:
            self._from_log = False
            self._items.clear()
            self._buffered = 0
            self.tail = self.delivered
        return events
