"""Starting the agent's run as a task of its own, eagerly where asyncio can (Python 3.12's `eager_start`): its first
steps run at once, as that task's (`asyncio.current_task()` is the run's, so `asyncio.timeout` and the like act on
it), and a run that never waits has ended when `start_eagerly` returns, without a turn of the event loop.

Python 3.11 has no such start, and nothing can stand in for it: a coroutine stepped before its task exists
would see the caller's task as its own, and a timeout it set would cancel the call instead of the run. There
the run is an ordinary task."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

EAGER_START = sys.version_info >= (3, 12)


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """The task that runs `coro`: done already when, started eagerly, it ran to its end (or failed) at once."""
    if EAGER_START:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return loop.create_task(coro)
