"""Our client's resumable subscriptions: `subscribe(after=N)`, and `resume=True` across a server restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import BASE_CARD
from test_event_log import FIRST_STEPS, LAST_STEPS, StepAgent, texts

from a2a_grpc.client import A2AClient, text_message
from a2a_grpc.errors import UnavailableError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.resume import event_seq
from a2a_grpc.server import A2AServer, ServerSettings


def settings(tmp_path: Path, listen: str = "127.0.0.1:0") -> ServerSettings:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    return ServerSettings(
        listen=listen, http_listen="", card_path=str(card), store_url=f"sqlite:///{tmp_path / 'tasks.db'}"
    )


async def started(tmp_path: Path, listen: str = "127.0.0.1:0") -> A2AServer:
    server = A2AServer(settings(tmp_path, listen), agent=StepAgent())
    await server.start()
    return server


async def waiting_task(client: A2AClient) -> str:
    """A task that has published FIRST_STEPS chunks and waits for input."""
    async with client.send_streaming_message("go") as stream:
        events = await stream.collect()
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    return events[0].task.id


async def test_subscribe_after_an_event_gets_the_task_then_the_events_it_missed(tmp_path: Path) -> None:
    server = await started(tmp_path)
    try:
        async with A2AClient(server.grpc_target) as client:
            task_id = await waiting_task(client)
            stream = client.subscribe(task_id, after=1)
            first = await anext(aiter(stream))
            replayed = [await anext(aiter(stream)) for _ in range(FIRST_STEPS)]
            stream.cancel()
            assert RESUME_EXTENSION_URI in stream.activated_extensions
    finally:
        await server.stop(0)
    assert first.task.id == task_id
    assert event_seq(first) == FIRST_STEPS + 1
    assert [event_seq(event) for event in replayed] == list(range(2, FIRST_STEPS + 2))


async def test_a_resuming_subscription_survives_a_server_restart_and_misses_nothing(tmp_path: Path) -> None:
    server = await started(tmp_path)
    target = server.grpc_target
    async with A2AClient(target) as client:
        task_id = await waiting_task(client)
        stream = client.subscribe(task_id, resume=True)
        events = aiter(stream)
        snapshot = await anext(events)
        assert event_seq(snapshot) == FIRST_STEPS + 1
        await server.stop(0)  # the stream is cut with UNAVAILABLE; the client retries meanwhile
        restarted = await started(tmp_path, listen=target)
        try:
            await client.send_message(text_message("yes", task_id=task_id))
            rest = [event async for event in events]
        finally:
            await restarted.stop(0)
    assert [event.WhichOneof("payload") for event in rest].count("task") == 0  # the resumed snapshot is skipped
    assert [event_seq(event) for event in rest] == list(range(FIRST_STEPS + 2, FIRST_STEPS + LAST_STEPS + 4))
    assert texts(rest) == [f"last-{index}" for index in range(LAST_STEPS)]


async def test_without_resume_a_cut_subscription_raises_unavailable(tmp_path: Path) -> None:
    server = await started(tmp_path)
    async with A2AClient(server.grpc_target) as client:
        task_id = await waiting_task(client)
        stream = client.subscribe(task_id)
        events = aiter(stream)
        await anext(events)
        await server.stop(0)
        with pytest.raises(UnavailableError):
            async with asyncio.timeout(10):
                await anext(events)


async def test_a_resuming_subscription_from_an_event_keeps_its_cursor_until_events_arrive(tmp_path: Path) -> None:
    """The first task of `after=1` is numbered past the events replayed after it: a cut right after it
    resumes after event 1 still, so events 2 and on are not lost."""
    server = await started(tmp_path)
    target = server.grpc_target
    async with A2AClient(target) as client:
        task_id = await waiting_task(client)
        events = aiter(client.subscribe(task_id, after=1, resume=True))
        snapshot = await anext(events)
        await server.stop(0)
        restarted = await started(tmp_path, listen=target)
        try:
            async with asyncio.timeout(10):
                replayed = [await anext(events) for _ in range(FIRST_STEPS)]
        finally:
            await restarted.stop(0)
    assert event_seq(snapshot) == FIRST_STEPS + 1
    assert [event_seq(event) for event in replayed] == list(range(2, FIRST_STEPS + 2))
