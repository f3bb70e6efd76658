"""A replica whose running task another replica failed meanwhile writes nothing more to it: not the write the
version check refuses, and not the writes it had queued behind that one either (the next of them carries the
version the other replica's write took, so the version check alone would take it).

The replica is a real server on 127.0.0.1 on a real PostgreSQL database; the other replica is a PostgresStore on
the same database that fails the task as a replica taking over an expired run does (load, then a FAILED write).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from conftest import BASE_CARD
from process import text_message
from rpc_helpers import Stub, make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import PostgresStore, TaskWrite
from a2a_grpc.store.base import LoadedTask, TaskEvent
from a2a_grpc.tasks.live import now_timestamp

V1 = (("a2a-version", "1.0"),)
OWNER = ""  # an anonymous caller's partition
GATED = "gated"
TEST_SECONDS = 30.0
FAILED = a2a_pb2.TASK_STATE_FAILED


class GatedAgent:
    """`gated`: WORKING and a first chunk, then (once the test says go) two more chunks a loop turn apart: the
    second is handed to the store before the first's write comes back. Anything else: completed at once."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.stopped = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if context.text() != GATED:
            await events.complete()
            return
        try:
            await events.working()
            await events.artifact(text="chunk 0 ", artifact_id="chunks")
            await self.go.wait()
            await events.artifact(text="chunk 1 ", artifact_id="chunks", append=True)
            await asyncio.sleep(0)  # the chunk's write goes to the store; the next one follows before its answer
            await events.artifact(text="chunk 2 ", artifact_id="chunks", append=True)
            await asyncio.Event().wait()  # until the run is stopped
        finally:
            self.stopped.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture
async def replica(tmp_path: Path, postgres_url: str) -> AsyncIterator[tuple[A2AServer, GatedAgent]]:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    agent = GatedAgent()
    server = A2AServer(
        ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url=postgres_url), agent=agent
    )
    await server.start()
    try:
        yield server, agent
    finally:
        agent.go.set()
        await server.stop(0)


@pytest.fixture
async def other(postgres_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    yield store
    await store.close()


async def send(stub: Stub, text: str, *, return_immediately: bool) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=return_immediately)
    request = a2a_pb2.SendMessageRequest(message=text_message(text), configuration=configuration)
    response = await stub.SendMessage(request, metadata=V1)
    task: a2a_pb2.Task = response.task
    return task


async def stored_with_first_chunk(store: PostgresStore, task_id: str) -> LoadedTask:
    while True:
        loaded = await store.load_task(task_id, OWNER)
        if loaded is not None and loaded.task.artifacts:
            return loaded
        await asyncio.sleep(0.01)


async def fail_as_the_other_replica(store: PostgresStore, loaded: LoadedTask) -> None:
    """What a replica taking over an expired run writes: FAILED with a message, one event, on the loaded version."""
    task = loaded.task
    message = a2a_pb2.Message(message_id="takeover", role=a2a_pb2.ROLE_AGENT, task_id=task.id)
    message.context_id = task.context_id
    message.parts.add(text="The server running this task stopped: its lease expired.")
    status = a2a_pb2.TaskStatus(state=FAILED, message=message, timestamp=now_timestamp())
    update = a2a_pb2.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
    event = TaskEvent(loaded.seq + 1, FAILED, a2a_pb2.StreamResponse(status_update=update).SerializeToString())
    write = TaskWrite(task.id, loaded.version + 1, status=status, history=[message], events=[event])
    await store.apply(write)


async def test_no_queued_write_of_a_replica_lands_on_the_task_another_replica_failed(
    replica: tuple[A2AServer, GatedAgent], other: PostgresStore
) -> None:
    server, agent = replica
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
        stub = make_stub(channel)
        task_id = (await send(stub, GATED, return_immediately=True)).id
        loaded = await stored_with_first_chunk(other, task_id)
        await fail_as_the_other_replica(other, loaded)
        failed = await other.load_task(task_id, OWNER)
        assert failed is not None and failed.task.status.state == FAILED

        agent.go.set()  # its next write is refused: the replica stops the run
        await agent.stopped.wait()
        await send(stub, "after", return_immediately=False)  # stored behind every write the run handed over

        after = await other.load_task(task_id, OWNER)
        shown = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
    assert after is not None
    assert [part.text for part in shown.artifacts[0].parts] == ["chunk 0 "]
    assert shown == failed.task
    assert after.task == failed.task
    assert after.version == failed.version
