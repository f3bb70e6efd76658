"""Event-log retention (`prune_events`, run by the task manager at start-up and every few minutes) and
log pages bounded by bytes, in every store; a resumed stream on a pruned task gets the task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer, send_request
from rpc_helpers import make_stub, read_all
from test_event_log import RESUME, StepAgent, seq_of
from test_store_events import COMPLETED, OWNER, WORKING, artifact_event, create, loaded, status_event, update

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import STREAM_AFTER_HEADER
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import SqliteStore, TaskStore
from a2a_grpc.store.base import EventsPrunedError, TaskEvent
from a2a_grpc.tasks.live import now_timestamp

HOUR = 3600.0


def recent_completion(task_id: str, seq: int) -> TaskEvent:
    done = a2a_pb2.TaskStatus(state=COMPLETED, timestamp=now_timestamp())
    update_event = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, status=done)
    return TaskEvent(seq, COMPLETED, a2a_pb2.StreamResponse(status_update=update_event).SerializeToString())


async def finished_long_ago(store: TaskStore, task_id: str) -> list[TaskEvent]:
    """A task completed in 2023 (the status timestamps of test_store_events), with three events."""
    events = [status_event(task_id, 1, WORKING), artifact_event(task_id, 2, "x"), status_event(task_id, 3, COMPLETED)]
    await store.apply(create(task_id, events[0]))
    await store.apply(update(task_id, 2, *events[1:]))
    return events


async def test_the_events_of_a_task_final_longer_than_the_retention_are_deleted(store: TaskStore) -> None:
    await finished_long_ago(store, "old")
    assert await store.prune_events(HOUR) == 3
    with pytest.raises(EventsPrunedError):
        await store.read_events("old", 0, 10)
    with pytest.raises(EventsPrunedError):
        await store.read_events("old", 2, 10)
    assert await store.read_events("old", 3, 10) == []  # nothing was missed after the last event
    found = await loaded(store, "old")
    assert (found.task.status.state, found.seq) == (COMPLETED, 3)  # the task and its last number stay
    assert await store.prune_events(HOUR) == 0


async def test_a_backlog_is_pruned_in_batches_until_none_is_left(store: TaskStore) -> None:
    for task_id in ("old-1", "old-2", "old-3"):
        await finished_long_ago(store, task_id)
    assert await store.prune_events(HOUR, batch=2) == 9
    for task_id in ("old-1", "old-2", "old-3"):
        with pytest.raises(EventsPrunedError):
            await store.read_events(task_id, 0, 10)


async def test_running_and_recently_final_tasks_keep_their_events(store: TaskStore) -> None:
    running = [status_event("running", 1, WORKING)]  # its status is from 2023 too
    await store.apply(create("running", *running))
    recent = [status_event("recent", 1, WORKING), recent_completion("recent", 2)]
    await store.apply(create("recent", recent[0]))
    await store.apply(update("recent", 2, recent[1]))
    assert await store.prune_events(HOUR) == 0
    assert await store.read_events("running", 0, 10) == running
    assert await store.read_events("recent", 0, 10) == recent


async def test_a_push_config_behind_a_pruned_log_is_still_claimed(store: TaskStore) -> None:
    await finished_long_ago(store, "old")
    config = a2a_pb2.TaskPushNotificationConfig(id="c", task_id="old", url="https://example.com/hook")
    await store.put_push_config(OWNER, config, delivered=0)
    await store.prune_events(HOUR)
    targets = await store.claim_push_targets("me", 30.0, 10, events=64)
    assert [(target.config.id, target.delivered, target.latest, target.events) for target in targets] == [
        ("c", 0, 3, ())
    ]


async def test_a_log_page_ends_at_the_event_that_brings_it_to_max_bytes(store: TaskStore) -> None:
    events = [artifact_event("big", seq, "y" * 1000) for seq in range(1, 11)]
    await store.apply(create("big", *events))
    size = len(events[0].body)
    assert await store.read_events("big", 0, 100, max_bytes=2 * size + 1) == events[:3]
    assert await store.read_events("big", 3, 100, max_bytes=2 * size) == events[3:5]
    assert await store.read_events("big", 0, 100, max_bytes=1) == events[:1]  # a page always holds one
    assert await store.read_events("big", 0, 4, max_bytes=100 * size) == events[:4]
    assert await store.read_events("big", 0, 100) == events  # 4 MiB by default


@pytest.mark.parametrize("store_url", ["memory", "sqlite"])
async def test_a_resumed_stream_on_a_pruned_final_task_gets_the_task(
    start_server: StartServer, store_url: str, tmp_path: Path
) -> None:
    url = "memory" if store_url == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"
    server = await start_server(agent=StepAgent(), store_url=url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        first = await read_all(stub.SendStreamingMessage(send_request("go"), metadata=RESUME))
        answer = send_request("yes")
        answer.message.task_id = first[0].task.id
        await stub.SendMessage(answer, metadata=V1)
        await asyncio.sleep(0.01)  # the status timestamp is now in the past
        assert await server.store.prune_events(0.001) > 0
        request = a2a_pb2.SubscribeToTaskRequest(id=answer.message.task_id)
        resumed = await read_all(stub.SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, "2"))))
    assert resumed and all(event.HasField("task") for event in resumed)
    assert {seq_of(event) for event in resumed} == {seq_of(resumed[0])}
    assert resumed[-1].task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_a_server_prunes_old_final_tasks_at_start_up(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = SqliteStore(path)
    await before.open()
    try:
        await finished_long_ago(before, "old")
    finally:
        await before.close()
    settings = ServerSettings(  # tasks kept forever: the task retention would remove this one whole
        listen="127.0.0.1:0", http_listen="", store_url=f"sqlite:///{path}", task_retention_seconds=0
    )
    server = A2AServer(settings)
    await server.start()
    try:
        async with asyncio.timeout(5):
            await wait_until_pruned(server.store, "old")
    finally:
        await server.stop(0)


async def wait_until_pruned(store: TaskStore, task_id: str) -> None:
    while True:
        try:
            await store.read_events(task_id, 0, 10)
        except EventsPrunedError:
            return
        await asyncio.sleep(0.01)
