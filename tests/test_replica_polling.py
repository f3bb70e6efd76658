"""A replica whose notification connection is down polls the database instead, at --poll-interval."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from conftest import BASE_CARD
from process import TickerAgent, text_message
from rpc_helpers import make_stub

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.resume import event_seq
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import PostgresStore

V1 = (("a2a-version", "1.0"),)
RESUME = (*V1, ("a2a-extensions", RESUME_EXTENSION_URI))
POLL_SECONDS = 0.05
TEST_SECONDS = 30.0


class DeafPostgresStore(PostgresStore):
    """A PostgreSQL store whose notification connection never comes up."""

    def listen(self, on_event: Callable[[str, int], None], on_cancel: Callable[[], None]) -> None:
        pass

    @property
    def listening(self) -> bool:
        return False


@pytest.fixture
async def hearing_and_deaf(tmp_path: Path, postgres_url: str) -> AsyncIterator[tuple[A2AServer, A2AServer]]:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url=postgres_url, poll_seconds=POLL_SECONDS
    )
    hearing = A2AServer(settings, agent=TickerAgent())
    deaf = A2AServer(settings, agent=TickerAgent(), store=DeafPostgresStore(postgres_url))
    await hearing.start()
    await deaf.start()
    try:
        yield hearing, deaf
    finally:
        await deaf.stop(0)
        await hearing.stop(0)


async def start_task(stub: object, text: str) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    request = a2a_pb2.SendMessageRequest(message=text_message(text), configuration=configuration)
    response = await stub.SendMessage(request, metadata=V1)  # type: ignore[attr-defined]
    task: a2a_pb2.Task = response.task
    return task


async def test_a_deaf_replica_streams_another_replicas_task_by_polling(
    hearing_and_deaf: tuple[A2AServer, A2AServer],
) -> None:
    hearing, deaf = hearing_and_deaf
    async with (
        grpc.aio.insecure_channel(hearing.grpc_target) as to_hearing,
        grpc.aio.insecure_channel(deaf.grpc_target) as to_deaf,
        asyncio.timeout(TEST_SECONDS),
    ):
        task = await start_task(make_stub(to_hearing), "tick 25 0.02")
        request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
        events = [event async for event in make_stub(to_deaf).SubscribeToTask(request, metadata=RESUME)]
    numbers = [event_seq(event) for event in events]
    assert numbers == list(range(numbers[0] or 0, (numbers[0] or 0) + len(numbers)))
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_a_deaf_replica_still_takes_the_cancel_of_a_task_it_runs(
    hearing_and_deaf: tuple[A2AServer, A2AServer],
) -> None:
    hearing, deaf = hearing_and_deaf
    async with (
        grpc.aio.insecure_channel(hearing.grpc_target) as to_hearing,
        grpc.aio.insecure_channel(deaf.grpc_target) as to_deaf,
        asyncio.timeout(TEST_SECONDS),
    ):
        task = await start_task(make_stub(to_deaf), "tick 1000 0.02")
        canceled = await make_stub(to_hearing).CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert canceled.status.message.parts[0].text.startswith("cancelled by the agent in process")
