"""The task manager on its own, with a real in-memory store: edges a server reaches only under load."""

from __future__ import annotations

import asyncio

from conftest import send_request

from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import MemoryStore
from a2a_grpc.tasks import TaskManager


async def test_a_run_cancelled_before_its_agent_starts_fails_its_task_and_answers_its_callers() -> None:
    """Shutdown may cancel a run in the loop turn that submitted it: its stream and its caller still get an
    answer (the task FAILED and stored), never a wait forever."""
    store = MemoryStore()
    manager = TaskManager(store, EchoAgent())
    call = CallContext(principal="p")
    run = await manager.submit(send_request("never started"), call, manager.new_subscriber(close_on_interrupt=True))
    assert run.runner is not None
    run.runner.cancel()
    assert await asyncio.wait_for(run.opened, 5) is None
    await asyncio.wait_for(run.settled, 5)
    await run.live.durable()
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None
    assert stored.status.state == a2a_pb2.TASK_STATE_FAILED
