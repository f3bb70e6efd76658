"""A full store (SQLite's max_page_count: the same SQLITE_FULL a full disk gives): callers get UNAVAILABLE
with a message they can act on, grpc.health.v1 says NOT_SERVING until a write succeeds again, and the
log has one ERROR line per incident, however many calls fail."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import pytest
from conftest import DEAD_HOOK, V1, StartServer, send_request
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_helpers import TEST_SECONDS, Stub, assert_error, make_stub, rpc_error, stream_error, wait_for_state

from a2a_grpc.agent import AgentExecutor, EventPublisher, RequestContext
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import SERVICE_NAME
from a2a_grpc.store import SqliteStore
from a2a_grpc.validation import MAX_PUSH_CREDENTIALS_CHARS, MAX_PUSH_TOKEN_CHARS

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
STORAGE_FULL = "storage full, retry later"
BIG = "x" * 20_000  # needs pages of its own: more than a store capped at the pages in use has
NO_ROOM = 1  # a max_page_count below the pages in use: SQLite caps the file at its current size
ROOM = 1_000_000


class WorkingEchoAgent:
    """WORKING first, then after `delay` seconds the echo and COMPLETED: its first write is made while it
    works, and with no delay the next one is made while the first is in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        await asyncio.sleep(self.delay)
        await events.artifact(text=context.text(), name="echo", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def health(channel: grpc.aio.Channel) -> list[int]:
    """The status of the server as a whole and of the A2A service."""
    check = health_pb2_grpc.HealthStub(channel).Check
    return [(await check(health_pb2.HealthCheckRequest(service=s))).status for s in ("", SERVICE_NAME)]


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


async def assert_storage_full(stub: Stub, task_id: str) -> None:
    """Every kind of write answers UNAVAILABLE STORAGE_UNAVAILABLE with a message a caller can act on."""
    config = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=DEAD_HOOK, token="x" * MAX_PUSH_TOKEN_CHARS)
    config.authentication.scheme = "Bearer"
    config.authentication.credentials = "x" * MAX_PUSH_CREDENTIALS_CHARS  # a config as large as one may be
    errors = [
        *[await rpc_error(stub.SendMessage(send_request(f"{BIG} {i}"), metadata=V1)) for i in range(3)],
        await stream_error(stub.SendStreamingMessage(send_request(f"{BIG} stream"), metadata=V1)),
        await rpc_error(stub.CreateTaskPushNotificationConfig(config, metadata=V1)),
    ]
    for error in errors:
        assert_error(error, UNAVAILABLE, "STORAGE_UNAVAILABLE")
        assert error.details() == STORAGE_FULL


@pytest.mark.parametrize(
    "agent",
    [EchoAgent(), WorkingEchoAgent(0.05), WorkingEchoAgent(0)],
    ids=["done-in-one-write", "working", "working-writes-in-flight"],
)
async def test_a_full_store_answers_unavailable_and_is_not_serving_until_a_write_succeeds(
    start_server: StartServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, agent: AgentExecutor
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent, store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
        store = server.store
        assert isinstance(store, SqliteStore)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            earlier = (await stub.SendMessage(send_request("stored before"), metadata=V1)).task

            await store.set_max_pages(NO_ROOM)
            await assert_storage_full(stub, earlier.id)
            assert await health(channel) == [NOT_SERVING, NOT_SERVING]
            assert len(error_lines(caplog)) == 1, error_lines(caplog)
            assert "full" in error_lines(caplog)[0]

            await store.set_max_pages(ROOM)
            task = (await stub.SendMessage(send_request(BIG), metadata=V1)).task
            assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            assert await health(channel) == [SERVING, SERVING]
            stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
            assert stored.artifacts[0].parts[0].text == BIG

            await store.set_max_pages(NO_ROOM)
            await assert_storage_full(stub, earlier.id)
            assert await health(channel) == [NOT_SERVING, NOT_SERVING]
            assert len(error_lines(caplog)) == 2, "a new incident begins after a write succeeded"


class GatedBigAgent:
    """WORKING at once; once the gate opens, a BIG artifact and COMPLETED."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        await self.gate.wait()
        await events.artifact(text=BIG, name="big", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_a_task_whose_write_was_refused_is_failed_once_the_store_takes_writes_again(
    start_server: StartServer, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = GatedBigAgent()
        server = await start_server(agent=agent, store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
        store = server.store
        assert isinstance(store, SqliteStore)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            immediately = a2a_pb2.SendMessageConfiguration(return_immediately=True)
            stuck = (await stub.SendMessage(send_request("small", configuration=immediately), metadata=V1)).task
            await wait_for_state(stub, stuck.id, [a2a_pb2.TASK_STATE_WORKING])
            await store.set_max_pages(NO_ROOM)
            agent.gate.set()  # its next write cannot be stored, and its agent is stopped
            for _ in range(500):  # the refused write is made on the agent's next loop turn
                if await health(channel) == [NOT_SERVING, NOT_SERVING]:
                    break
                await asyncio.sleep(0.01)
            stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=stuck.id), metadata=V1)
            assert stored.status.state == a2a_pb2.TASK_STATE_WORKING  # no agent works on it any more

            await store.set_max_pages(ROOM)
            await stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(task_id=stuck.id, url=DEAD_HOOK), metadata=V1
            )
            failed = await wait_for_state(stub, stuck.id, [a2a_pb2.TASK_STATE_FAILED])
            assert "store was full" in failed.status.message.parts[0].text
