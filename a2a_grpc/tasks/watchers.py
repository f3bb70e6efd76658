"""The subscribers watching one live task, held by its machine (`TaskMachine`), which alone adds and drops them."""

from __future__ import annotations

import asyncio

from a2a_grpc.store.base import TaskEvent
from a2a_grpc.tasks.subscriber import Subscriber


class Watchers:
    """The task's subscribers, in the order they came."""

    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def __bool__(self) -> bool:
        return bool(self._subscribers)

    def add(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def drop(self, subscriber: Subscriber) -> None:
        """Close `subscriber` and let it go."""
        subscriber.close()
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    def push(self, event: TaskEvent, write: asyncio.Future[None] | None) -> None:
        for subscriber in self._subscribers:
            subscriber.push(event, write)

    def close(self, *, on_interrupt: bool = False) -> None:
        """Close every subscriber (`on_interrupt`: those that close on an interrupted state) and let them go."""
        for subscriber in self._subscribers:
            if subscriber.close_on_interrupt or not on_interrupt:
                subscriber.close()
        self._subscribers = [subscriber for subscriber in self._subscribers if not subscriber.closed]

    def stop(self) -> None:
        """The server is stopping: each subscriber ends once it delivered what it knows."""
        for subscriber in self._subscribers:
            subscriber.stop()

    def note(self, seq: int) -> None:
        """Another replica stored the task's events up to `seq`."""
        for subscriber in self._subscribers:
            subscriber.note(seq)
