"""Starting a coroutine eagerly (a2a_grpc.tasks.eager), as the agent's runs start: its first steps within the
caller, in a context of its own, and a task for the rest only once it waits."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from a2a_grpc.tasks.eager import start_eagerly

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller's")


async def test_a_coroutine_that_never_waits_runs_to_its_end_at_once_without_a_task() -> None:
    steps: list[str] = []

    async def at_once() -> None:
        steps.append("ran")

    tasks_before = len(asyncio.all_tasks())
    assert start_eagerly(asyncio.get_running_loop(), at_once()) is None
    assert steps == ["ran"] and len(asyncio.all_tasks()) == tasks_before


async def test_a_coroutine_that_waits_goes_on_in_a_task_once_what_it_waits_on_is_done() -> None:
    steps: list[str] = []
    gate = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        steps.append("first")
        steps.append(await gate)
        await asyncio.sleep(0)
        steps.append("last")

    task = start_eagerly(asyncio.get_running_loop(), waits())
    assert task is not None and steps == ["first"]
    for _ in range(5):  # loop turns: nothing moves while the gate is shut
        await asyncio.sleep(0)
    assert steps == ["first"] and not task.done()
    gate.set_result("second")
    await asyncio.wait_for(task, 5)
    assert steps == ["first", "second", "last"]


async def test_its_context_is_its_own_from_the_first_step_on() -> None:
    gate = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def sets_and_reads() -> None:
        SEEN.set("its own")
        await gate
        seen.append(SEEN.get())
        SEEN.set("changed in its task")

    task = start_eagerly(asyncio.get_running_loop(), sets_and_reads())
    assert task is not None
    assert SEEN.get() == "caller's"
    gate.set_result(None)
    await asyncio.wait_for(task, 5)
    assert seen == ["its own"] and SEEN.get() == "caller's"


@pytest.mark.parametrize("first_turn_ran", [False, True])
async def test_a_cancel_reaches_the_coroutine_where_it_waits_and_cancels_what_it_waits_on(first_turn_ran: bool) -> None:
    """Cancelled before its task's first step (what a shutdown in the same loop turn does) or after it."""
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    got: list[str] = []

    async def waits() -> None:
        try:
            await gate
        except asyncio.CancelledError:
            got.append("cancelled")
            raise

    task = start_eagerly(asyncio.get_running_loop(), waits())
    assert task is not None
    if first_turn_ran:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert got == ["cancelled"] and gate.cancelled() and task.cancelled()


async def test_what_it_raises_before_it_waits_reaches_the_caller() -> None:
    async def fails() -> None:
        raise LookupError("at once")

    with pytest.raises(LookupError, match="at once"):
        start_eagerly(asyncio.get_running_loop(), fails())
