"""The subscribers watching one live task, held by its machine (`TaskMachine`), which alone adds and drops them."""

from __future__ import annotations

import asyncio

from a2a_grpc.store.base import TaskEvent
from a2a_grpc.tasks.subscriber import Subscriber


class Watchers(list[Subscriber]):
    """The task's subscribers, in the order they came (a list: asking whether there are any costs no call)."""

    __slots__ = ()

    def drop(self, subscriber: Subscriber) -> None:
        """Close `subscriber` and let it go."""
        subscriber.close()
        if subscriber in self:
            self.remove(subscriber)

    def push(self, event: TaskEvent, write: asyncio.Future[None] | None) -> None:
        for subscriber in self:
            subscriber.push(event, write)

    def close(self, *, on_interrupt: bool = False) -> None:
        """Close every subscriber (`on_interrupt`: those that close on an interrupted state) and let them go."""
        for subscriber in self:
            if subscriber.close_on_interrupt or not on_interrupt:
                subscriber.close()
        self[:] = [subscriber for subscriber in self if not subscriber.closed]

    def stop(self) -> None:
        """The server is stopping: each subscriber ends once it delivered what it knows."""
        for subscriber in self:
            subscriber.stop()

    def note(self, seq: int) -> None:
        """Another replica stored the task's events up to `seq`."""
        for subscriber in self:
            subscriber.note(seq)
