"""Streams read the task's event log: slow streams catch up from it, and the stream-resume extension
numbers events and resumes after one (`a2a-stream-after`), on the memory and the SQLite store."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer, bad_request, send_request
from rpc_helpers import make_stub, read_all, rpc_error, stream_error

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore

RESUME = (*V1, ("a2a-extensions", RESUME_EXTENSION_URI))
FIRST_STEPS = 3  # artifact chunks the agent publishes before it asks for input
LAST_STEPS = 2  # ... and after the answer, before it completes
FLOOD = 10_000  # events one agent publishes in a single loop turn


class StepAgent:
    """Publishes FIRST_STEPS chunks and asks for input; given it, publishes LAST_STEPS more and completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        first = len(context.task.history) == 1
        for index in range(FIRST_STEPS if first else LAST_STEPS):
            await events.artifact(text=f"{'first' if first else 'last'}-{index}", artifact_id="steps", append=True)
        if first:
            await events.input_required("more?")
        else:
            await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class FloodAgent:
    """Publishes FLOOD status updates without ever yielding to the loop, then completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        for index in range(FLOOD):
            await events.working(f"step {index}")
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"


def seq_of(event: a2a_pb2.StreamResponse) -> int:
    payload = getattr(event, event.WhichOneof("payload") or "")
    return int(payload.metadata.fields[RESUME_EXTENSION_URI].struct_value.fields["seq"].number_value)


def has_seq(event: a2a_pb2.StreamResponse) -> bool:
    payload = getattr(event, event.WhichOneof("payload") or "")
    return RESUME_EXTENSION_URI in payload.metadata.fields


def texts(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    return [event.artifact_update.artifact.parts[0].text for event in events if event.HasField("artifact_update")]


async def test_a_flood_of_events_in_one_loop_turn_reaches_a_stream_whole(
    start_server: StartServer, store_url: str
) -> None:
    server = await start_server(agent=FloodAgent(), store_url=store_url, max_subscriber_buffer_bytes=64 * 1024)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        events = await read_all(make_stub(channel).SendStreamingMessage(send_request("go"), metadata=RESUME))
    assert [seq_of(event) for event in events] == list(range(FLOOD + 2))  # the task (0), FLOOD steps, completed
    steps = [event.status_update.status.message.parts[0].text for event in events[1:-1]]
    assert steps == [f"step {index}" for index in range(FLOOD)]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_events_carry_their_number_only_when_the_call_activates_resume(
    start_server: StartServer, store_url: str
) -> None:
    server = await start_server(agent=StepAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        numbered = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        plain = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=V1))
    assert [seq_of(event) for event in numbered] == list(range(FIRST_STEPS + 2))  # task, chunks, input-required
    assert not any(has_seq(event) for event in plain)
    assert texts(numbered) == texts(plain) == [f"first-{index}" for index in range(FIRST_STEPS)]


async def test_a_resumed_subscription_gets_the_task_then_exactly_the_events_after_its_cursor(
    start_server: StartServer, store_url: str
) -> None:
    server = await start_server(agent=StepAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        first = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        task = first[0].task
        assert seq_of(first[-1]) == FIRST_STEPS + 1
        after = (*RESUME, (STREAM_AFTER_HEADER, "1"))  # the client saw event 1 (the first chunk) only
        resumed = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=after)
        snapshot = await resumed.read()
        assert snapshot.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        assert seq_of(snapshot) == FIRST_STEPS + 1  # the task as it is now, with every event so far
        replayed = [await resumed.read() for _ in range(FIRST_STEPS)]  # events 2, 3 and the input request
        assert [seq_of(event) for event in replayed] == list(range(2, FIRST_STEPS + 2))
        assert texts(replayed) == [f"first-{index}" for index in range(1, FIRST_STEPS)]
        answer = send_request("yes")
        answer.message.task_id = task.id
        await stub.SendMessage(answer, metadata=V1)
        live = await read_all(resumed)
    assert [seq_of(event) for event in live] == list(range(FIRST_STEPS + 2, FIRST_STEPS + LAST_STEPS + 4))
    assert texts(live) == [f"last-{index}" for index in range(LAST_STEPS)]
    assert live[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_resuming_a_finished_task_replays_what_was_missed_and_ends(
    start_server: StartServer, store_url: str
) -> None:
    server = await start_server(agent=StepAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        first = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        answer = send_request("yes")
        answer.message.task_id = first[0].task.id
        await stub.SendMessage(answer, metadata=V1)
        request = a2a_pb2.SubscribeToTaskRequest(id=answer.message.task_id)
        resumed = await read_all(stub.SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, "2"))))
        plain = await stream_error(stub.SubscribeToTask(request, metadata=V1))
    last = FIRST_STEPS + LAST_STEPS + 3
    assert [seq_of(event) for event in resumed] == [last, *range(3, last + 1)]
    assert resumed[0].task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert plain.code() == grpc.StatusCode.FAILED_PRECONDITION  # without a cursor, a final task is for GetTask


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "", "9" * 20, "1, 2"])
async def test_a_bad_cursor_is_invalid_argument_naming_the_header(start_server: StartServer, value: str) -> None:
    server = await start_server(agent=StepAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        first = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        request = a2a_pb2.SubscribeToTaskRequest(id=first[0].task.id)
        error = await stream_error(stub.SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, value))))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in bad_request(error).field_violations] == [STREAM_AFTER_HEADER]


async def test_a_cursor_past_the_last_event_is_invalid_argument(start_server: StartServer) -> None:
    server = await start_server(agent=StepAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        first = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        request = a2a_pb2.SubscribeToTaskRequest(id=first[0].task.id)
        past = str(FIRST_STEPS + 2)
        error = await stream_error(stub.SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, past))))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in bad_request(error).field_violations] == [STREAM_AFTER_HEADER]


async def test_the_log_survives_a_restart_of_a_sqlite_server(start_server: StartServer, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'kept.db'}"
    first_server = await start_server(agent=StepAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(first_server.grpc_target) as channel:
        first = await read_all(make_stub(channel).SendStreamingMessage(send_request("go"), metadata=RESUME))
    await first_server.stop(0)
    second_server = await start_server(agent=StepAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(second_server.grpc_target) as channel:
        request = a2a_pb2.SubscribeToTaskRequest(id=first[0].task.id)
        resumed = make_stub(channel).SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, "0")))
        events = [await resumed.read() for _ in range(FIRST_STEPS + 2)]
        resumed.cancel()
    assert [seq_of(event) for event in events] == [FIRST_STEPS + 1, *range(1, FIRST_STEPS + 2)]
    assert texts(events) == texts(first)


async def test_the_card_declares_the_resume_extension(start_server: StartServer) -> None:
    server = await start_server()
    declared = {e.uri: e.required for e in server.card.capabilities.extensions}
    assert declared[RESUME_EXTENSION_URI] is False
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        error = await rpc_error(make_stub(channel).GetTask(a2a_pb2.GetTaskRequest(id="nope"), metadata=RESUME))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    echoed = dict(error.trailing_metadata() or ())
    assert echoed.get("a2a-extensions") == RESUME_EXTENSION_URI


class ChunkAgent:
    """Publishes FLOOD_CHUNKS artifact chunks of CHUNK_TEXT without yielding to the loop, then completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        for index in range(FLOOD_CHUNKS):
            await events.artifact(text=CHUNK_TEXT, artifact_id="chunks", append=index > 0)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


FLOOD_CHUNKS = 400
CHUNK_TEXT = "z" * 1024


async def test_a_stream_behind_a_bounded_log_goes_on_from_the_task_as_it_is_now(tmp_path: Path) -> None:
    """The memory store keeps 64 KiB of this task's events: a stream that fell further behind gets the
    task itself (every chunk merged in) in place of the events it can no longer read, then the rest."""
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", store_url="memory", max_subscriber_buffer_bytes=16 * 1024
    )
    server = A2AServer(settings, agent=ChunkAgent(), store=MemoryStore(max_log_bytes=64 * 1024))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            events = await read_all(make_stub(channel).SendStreamingMessage(send_request("go"), metadata=RESUME))
    finally:
        await server.stop(0)
    numbers = [seq_of(event) for event in events]
    assert numbers == sorted(set(numbers))  # in order, none twice
    restart = next(index for index, event in enumerate(events[1:], 1) if event.HasField("task"))
    task = events[restart].task
    assert numbers[restart] > numbers[restart - 1] + 1  # the events it skipped ...
    chunks = sum(len(part.text) for part in task.artifacts[0].parts) // len(CHUNK_TEXT) if task.artifacts else 0
    completed = task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert chunks == numbers[restart] - completed  # ... are in it
    assert events[-1].WhichOneof("payload") in ("task", "status_update")
    final = events[-1].task if events[-1].HasField("task") else events[-1].status_update
    assert final.status.state == a2a_pb2.TASK_STATE_COMPLETED
