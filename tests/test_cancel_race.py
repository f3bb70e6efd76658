"""Concurrent CancelTask calls on one task: the agent's cancel runs once, and every caller gets its outcome."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import grpc
import pytest
from agents import PacedAgent
from conftest import V1, StartServer, error_info, send_request
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2

TASKS = 40
RACERS = 5


class SlowCancelAgent(PacedAgent):
    """Takes a moment to cancel, so that concurrent CancelTask calls overlap."""

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        self.cancel_calls.append(context.task_id)
        await asyncio.sleep(0.3)
        await events.canceled("stopped")


async def test_racing_cancels_run_the_agents_cancel_once_and_all_see_canceled(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    agent = SlowCancelAgent()
    server = await start_server(agent=agent)
    immediately = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        sent = [
            await stub.SendMessage(send_request("work", configuration=immediately), metadata=V1) for _ in range(TASKS)
        ]
        task_ids = [response.task.id for response in sent]
        with caplog.at_level(logging.WARNING):
            cancels = [
                stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=V1)
                for task_id in task_ids
                for _ in range(RACERS)
            ]
            outcomes = await asyncio.wait_for(asyncio.gather(*cancels, return_exceptions=True), 30)
    assert Counter(agent.cancel_calls) == Counter({task_id: 1 for task_id in task_ids})
    answers = [outcome for outcome in outcomes if isinstance(outcome, a2a_pb2.Task)]
    late = [outcome for outcome in outcomes if not isinstance(outcome, a2a_pb2.Task)]
    assert {answer.status.state for answer in answers} == {a2a_pb2.TASK_STATE_CANCELED}
    assert {answer.id for answer in answers} == set(task_ids)
    # a cancel that arrives after the first has finished finds the task final (however many, on a slow machine)
    for error in late:
        assert isinstance(error, grpc.aio.AioRpcError) and error_info(error).reason == "TASK_NOT_CANCELABLE", error
    assert [record for record in caplog.records if record.levelno >= logging.ERROR] == []
