"""A subscriber reading the log when its task ends: the events it was told of are delivered before the stream
ends, even when the log read that raced them came back without them."""

from __future__ import annotations

import asyncio

from test_store_push import OWNER, Tasks

from a2a_grpc.store import MemoryStore
from a2a_grpc.store.base import TaskEvent
from a2a_grpc.tasks import Subscriber
from a2a_grpc.tasks.subscriber import TaskLog

TEST_SECONDS = 5.0


class HeldLog(TaskLog):
    """A task log whose second read takes what the store holds, then waits for `release` before answering:
    a read on the store's reader thread, overtaken by a write and the task's end."""

    def __init__(self, store: MemoryStore, task_id: str) -> None:
        super().__init__(store, task_id, OWNER)
        self.reads = 0
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def read(self, after: int) -> list[TaskEvent]:
        events = await super().read(after)
        self.reads += 1
        if self.reads == 2:
            self.holding.set()
            await self.release.wait()
        return events


async def test_a_closed_subscriber_reads_the_events_it_was_told_of_before_it_ends() -> None:
    store = MemoryStore()
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    log = HeldLog(store, "t1")
    subscriber = Subscriber(close_on_interrupt=False)
    subscriber.attach(log, 0, 1)
    received: list[int] = []

    async def consume() -> None:
        async for event in subscriber.events():
            received.append(event.seq)

    consuming = asyncio.ensure_future(consume())
    async with asyncio.timeout(TEST_SECONDS):
        await log.holding.wait()  # event 1 delivered; the read after it took the log before event 2
        await tasks.append("t1")
        stored = store.read_events("t1", 1, 10)
        subscriber.push((await stored)[0], None)
        subscriber.close()  # the task ended
        log.release.set()
        await consuming
    assert received == [1, 2]
