"""SendStreamingMessage and SubscribeToTask: snapshot first, order, appends, fan-out, closing and disconnects."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import CancelProbeAgent, PacedAgent, chunk_text
from conftest import DEAD_HOOK, V1, StartServer, send_request, user_message
from rpc_helpers import (
    TEST_SECONDS,
    Clients,
    Stub,
    artifact_texts,
    assert_error,
    kinds,
    make_stub,
    read_all,
    replay,
    states,
    stream_error,
    wait_for_state,
)

from a2a_grpc.agents.writer import CHUNKS, WriterAgent
from a2a_grpc.generated import a2a_pb2

TaskState = a2a_pb2.TaskState
WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED


def subscribe(stub: Stub, task_id: str) -> Any:
    return stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=V1)


async def start_paced_task(stub: Stub, agent: PacedAgent) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    task: a2a_pb2.Task = (await stub.SendMessage(send_request("go", configuration=configuration), metadata=V1)).task
    await agent.started.wait()
    return task


async def first_snapshot(call: Any) -> a2a_pb2.Task:
    first = await call.read()
    assert first.WhichOneof("payload") == "task", f"a stream must begin with a Task snapshot, got {first}"
    snapshot: a2a_pb2.Task = first.task
    return snapshot


def expected_tail(after_chunk: int, chunks: int) -> list[str]:
    """The event kinds a PacedAgent still publishes once `after_chunk` chunks are out."""
    return ["artifact_update"] * (chunks - after_chunk) + ["status_update"]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("with_push_config", [False, True], ids=["plain", "push-config"])
async def test_send_stream_starts_with_a_snapshot_keeps_order_and_closes_on_terminal(
    start_server: StartServer, clients: Clients, tmp_path: Path, store: str, with_push_config: bool
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        chunks = 20
        store_url = "memory" if store == "memory" else f"sqlite:///{tmp_path}/tasks.db"
        server = await start_server(agent=PacedAgent(chunks=chunks, paced=False), store_url=store_url)
        stub = clients.stub(server)
        request = send_request("go")
        if with_push_config:
            request.configuration.task_push_notification_config.url = DEAD_HOOK
        items = await read_all(stub.SendStreamingMessage(request, metadata=V1))
        assert kinds(items) == ["task", "status_update", *["artifact_update"] * chunks, "status_update"]
        snapshot = items[0].task
        assert snapshot.status.state == TaskState.TASK_STATE_SUBMITTED
        assert [m.parts[0].text for m in snapshot.history] == ["go"]
        assert states(items) == [WORKING, COMPLETED]
        updates = [item.artifact_update for item in items if item.HasField("artifact_update")]
        assert [u.artifact.parts[0].text for u in updates] == [chunk_text(i) for i in range(chunks)]
        assert [u.append for u in updates] == [False] + [True] * (chunks - 1)
        assert [u.last_chunk for u in updates] == [False] * (chunks - 1) + [True]
        assert {u.task_id for u in updates} == {snapshot.id}
        assert {u.context_id for u in updates} == {snapshot.context_id}
        stamps = [i.status_update.status.timestamp.ToNanoseconds() for i in items if i.HasField("status_update")]
        assert stamps == sorted(stamps)

        stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=snapshot.id), metadata=V1)
        assert artifact_texts(stored) == [chunk_text(i) for i in range(chunks)]
        rebuilt = replay(snapshot, items[1:])
        assert artifact_texts(rebuilt) == artifact_texts(stored)
        assert rebuilt.status == stored.status


async def test_send_stream_closes_on_input_required_and_the_next_turn_streams(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = clients.stub(await start_server(agent=WriterAgent(chunk_delay=0.005)))
        first = await read_all(stub.SendStreamingMessage(send_request("rain"), metadata=V1))
        assert kinds(first) == ["task", "status_update"]
        assert states(first) == [TaskState.TASK_STATE_INPUT_REQUIRED]
        task_id = first[0].task.id

        reply = a2a_pb2.SendMessageRequest(message=user_message("gloomy", task_id=task_id, message_id="m-2"))
        second = await read_all(stub.SendStreamingMessage(reply, metadata=V1))
        snapshot = second[0].task
        assert snapshot.id == task_id
        assert snapshot.status.state == WORKING
        assert [m.parts[0].text for m in snapshot.history if m.role == a2a_pb2.ROLE_USER] == ["rain", "gloomy"]
        assert kinds(second)[-1] == "status_update"
        assert states(second)[-1] == COMPLETED
        assert kinds(second).count("artifact_update") == CHUNKS
        rebuilt = replay(snapshot, second[1:])
        stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        assert artifact_texts(rebuilt) == artifact_texts(stored)
        assert len(artifact_texts(stored)) == CHUNKS


async def test_subscribe_from_a_second_client_gets_the_snapshot_then_the_rest(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        chunks = 4
        agent = PacedAgent(chunks=chunks)
        server = await start_server(agent=agent)
        sender, watcher = clients.stub(server), clients.stub(server)
        task = await start_paced_task(sender, agent)
        agent.step()
        await wait_for_chunks(sender, task.id, 1)

        call = subscribe(watcher, task.id)
        snapshot = await first_snapshot(call)
        assert snapshot.id == task.id
        assert snapshot.status.state == WORKING
        assert artifact_texts(snapshot) == [chunk_text(0)]
        agent.finish()
        rest = await read_all(call)
        assert kinds(rest) == expected_tail(1, chunks)
        assert states(rest) == [COMPLETED]
        stored = await sender.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert artifact_texts(replay(snapshot, rest)) == artifact_texts(stored)
        assert artifact_texts(stored) == [chunk_text(i) for i in range(chunks)]


async def wait_for_chunks(stub: Stub, task_id: str, count: int) -> None:
    while True:
        task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        if len(artifact_texts(task)) >= count:
            return
        await asyncio.sleep(0.01)


async def test_every_subscriber_gets_every_event_in_order(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        chunks = 10
        agent = PacedAgent(chunks=chunks)
        server = await start_server(agent=agent)
        sender = clients.stub(server)
        stream = sender.SendStreamingMessage(send_request("go"), metadata=V1)
        task = await first_snapshot(stream)
        await agent.started.wait()
        calls = [subscribe(clients.stub(server), task.id) for _ in range(3)]
        snapshots = [await first_snapshot(call) for call in calls]
        assert all(s.status.state == WORKING for s in snapshots)
        agent.finish()
        received = await asyncio.gather(*(read_all(call) for call in calls))
        sent = await read_all(stream)
        assert kinds(sent) == ["status_update", *expected_tail(0, chunks)]
        for events in received:
            assert events == sent[1:], "each subscriber must see the same events, in the same order"
        stored = await sender.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        for snapshot, events in zip(snapshots, received, strict=True):
            assert artifact_texts(replay(snapshot, events)) == artifact_texts(stored)


async def test_closing_one_subscriber_affects_no_other(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        chunks = 5
        agent = PacedAgent(chunks=chunks)
        server = await start_server(agent=agent)
        sender = clients.stub(server)
        task = await start_paced_task(sender, agent)
        leaving, staying = subscribe(clients.stub(server), task.id), subscribe(clients.stub(server), task.id)
        await first_snapshot(leaving)
        await first_snapshot(staying)
        agent.step()
        assert (await leaving.read()).artifact_update.artifact.parts[0].text == chunk_text(0)
        leaving.cancel()
        agent.finish()
        rest = await read_all(staying)
        assert [e.artifact_update.artifact.parts[0].text for e in rest[:chunks]] == [
            chunk_text(i) for i in range(chunks)
        ]
        assert states(rest) == [COMPLETED]
        with pytest.raises(asyncio.CancelledError):
            await leaving.read()
        done = await wait_for_state(sender, task.id, [COMPLETED])
        assert len(artifact_texts(done)) == chunks


async def test_a_client_disconnect_never_cancels_the_task(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        chunks = 3
        agent = PacedAgent(chunks=chunks)
        server = await start_server(agent=agent)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stream = make_stub(channel).SendStreamingMessage(send_request("go"), metadata=V1)
            task = await first_snapshot(stream)
            await agent.started.wait()
            watcher = subscribe(make_stub(channel), task.id)
            await first_snapshot(watcher)
            stream.cancel()
        # the channel, with the sending stream and a subscription on it, is gone
        await asyncio.sleep(0.1)
        observer = clients.stub(server)
        still = await observer.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert still.status.state == WORKING
        assert agent.cancel_calls == []
        agent.finish()
        done = await wait_for_state(observer, task.id, [COMPLETED])
        assert artifact_texts(done) == [chunk_text(i) for i in range(chunks)]


async def test_a_blocking_sender_that_goes_away_does_not_cancel_the_task(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=1)
        server = await start_server(agent=agent)
        observer = clients.stub(server)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            call = make_stub(channel).SendMessage(send_request("go"), metadata=V1)
            await agent.started.wait()
            call.cancel()
        [task] = (await observer.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)).tasks
        agent.finish()
        done = await wait_for_state(observer, task.id, [COMPLETED])
        assert artifact_texts(done) == [chunk_text(0)]
        assert agent.cancel_calls == []


async def test_a_subscription_survives_input_required_and_follows_the_next_turn(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=WriterAgent(chunk_delay=0.005))
        sender, watcher = clients.stub(server), clients.stub(server)
        task = (await sender.SendMessage(send_request("snow"), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        call = subscribe(watcher, task.id)
        snapshot = await first_snapshot(call)
        assert snapshot.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        reply = a2a_pb2.SendMessageRequest(message=user_message("calm", task_id=task.id, message_id="m-2"))
        await sender.SendMessage(reply, metadata=V1)
        rest = await read_all(call)
        assert states(rest)[0] == WORKING
        assert states(rest)[-1] == COMPLETED
        assert kinds(rest).count("artifact_update") == CHUNKS


async def test_subscribe_to_a_terminal_task_is_unsupported(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = clients.stub(await start_server())
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        assert task.status.state == COMPLETED
        error = await stream_error(subscribe(stub, task.id))
        assert_error(error, grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION", taskId=task.id)
        again = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert again == task


async def test_cancel_ends_every_stream_of_the_task_with_canceled(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = CancelProbeAgent()
        server = await start_server(agent=agent)
        sender = clients.stub(server)
        stream = sender.SendStreamingMessage(send_request("work"), metadata=V1)
        task = await first_snapshot(stream)
        await agent.started.wait()
        watcher = subscribe(clients.stub(server), task.id)
        await first_snapshot(watcher)
        canceled = await sender.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        sent, watched = await asyncio.gather(read_all(stream), read_all(watcher))
        assert states(sent) == [WORKING, TaskState.TASK_STATE_CANCELED]
        assert states(watched) == [TaskState.TASK_STATE_CANCELED]
        assert watched[-1] == sent[-1]


async def test_history_length_trims_the_stream_snapshot(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = clients.stub(await start_server(agent=PacedAgent(chunks=1, paced=False)))
        configuration = a2a_pb2.SendMessageConfiguration(history_length=0)
        items = await read_all(stub.SendStreamingMessage(send_request("go", configuration=configuration), metadata=V1))
        assert list(items[0].task.history) == []
        assert states(items) == [WORKING, COMPLETED]
        stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=items[0].task.id), metadata=V1)
        assert [m.parts[0].text for m in stored.history] == ["go", "started", "done"]
