"""The agent's run as a task of its own (a2a_grpc.tasks.eager): the agent sees the run's task as current from its
first step, so what it sets on its task (a timeout) acts on the run, never on the call that started it; where
asyncio starts tasks eagerly (Python 3.12+) a run that never waits ends before its start returns."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from a2a_grpc.tasks.eager import EAGER_START, start_eagerly

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller's")


async def test_the_coroutine_runs_as_its_own_task_in_its_own_context_from_its_first_step() -> None:
    caller = asyncio.current_task()
    tasks: list[asyncio.Task[object] | None] = []
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def run() -> None:
        tasks.append(asyncio.current_task())
        SEEN.set("its own")
        await gate
        tasks.append(asyncio.current_task())

    task = start_eagerly(asyncio.get_running_loop(), run())
    assert tasks == ([task] if EAGER_START else []), "eagerly: its first step ran already, as the task's"
    assert SEEN.get() == "caller's"
    gate.set_result(None)
    await asyncio.wait_for(task, 5)
    assert tasks == [task, task] and caller not in tasks


async def test_a_timeout_set_in_the_first_step_cancels_the_run_and_leaves_the_caller_alone() -> None:
    outcome: list[str] = []

    async def run() -> None:
        try:
            async with asyncio.timeout(0):  # due at once: expires at the run's first wait
                await asyncio.Event().wait()
        except TimeoutError:
            outcome.append("timed out")

    task = start_eagerly(asyncio.get_running_loop(), run())
    await asyncio.wait_for(task, 5)
    assert outcome == ["timed out"]
    await asyncio.sleep(0)  # the caller (this test's task) was not cancelled: it goes on


async def test_a_run_that_never_waits_ends_at_once_where_asyncio_starts_tasks_eagerly() -> None:
    steps: list[str] = []

    async def at_once() -> None:
        steps.append("ran")

    task = start_eagerly(asyncio.get_running_loop(), at_once())
    assert task.done() == EAGER_START and steps == (["ran"] if EAGER_START else [])
    await asyncio.wait_for(task, 5)
    assert steps == ["ran"]


@pytest.mark.parametrize("ending", ["raises", "cancels itself"])
async def test_how_the_run_ended_before_it_waited_is_its_tasks_outcome_not_the_callers(ending: str) -> None:
    async def ends() -> None:
        if ending == "raises":
            raise LookupError("at once")
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)

    task = start_eagerly(asyncio.get_running_loop(), ends())
    with pytest.raises(LookupError if ending == "raises" else asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
