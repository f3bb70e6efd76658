"""Starting a coroutine eagerly, as Python 3.12's eager tasks do: its first steps run at once, in a context of
its own, and an asyncio task is made for the rest only when it suspends. A coroutine that never waits (an agent
that answers from what it has) costs no task and no turn of the event loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run `coro` until it first waits: None when it finished, else the task that runs the rest. It runs in a
    copy of the current context throughout, as a task of its own would; what it raises at once propagates."""
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration:
        return None
    return loop.create_task(_Resumed(coro, waiting_on), context=context)


class _Resumed(Coroutine[Any, None, None]):
    """A started coroutine as a task's coroutine: the task's first step waits on what the coroutine waits on,
    and the steps after it are the coroutine's own. A cancel before that first step reaches the coroutine where
    it waits, and cancels what it waits on, as a task waiting on it would."""

    __slots__ = ("_coro", "_waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on: Any = waiting_on  # until the task's first step takes it

    def send(self, value: None) -> Any:
        waiting_on, self._waiting_on = self._waiting_on, None
        return self._coro.send(value) if waiting_on is None else waiting_on

    def throw(self, error: BaseException, *_: Any) -> Any:  # type: ignore[override]
        waiting_on, self._waiting_on = self._waiting_on, None
        if asyncio.isfuture(waiting_on):
            waiting_on.cancel()
        return self._coro.throw(error)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("a resumed coroutine runs as a task's coroutine, it is not awaited")
