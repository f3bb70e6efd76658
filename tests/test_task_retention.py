"""Task retention (`--task-retention`): a task final for longer is removed with all it holds and is then
TASK_NOT_FOUND, through real servers on every store; replicas on PostgreSQL remove under one lease and agree;
the removal query uses an index; the memory store's bound evicts the tasks final the longest and refuses a new
task when none is final. The store suite's removal tests are in test_stores.py."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
import grpc
import pytest
from agents import OutcomeAgent
from conftest import DEAD_HOOK, V1, StartServer, error_info, rich_status, send_request
from rpc_helpers import Clients, Stub, assert_error, rpc_error
from test_event_retention import finished_long_ago
from test_readiness import SERVING, health
from test_stores import COMPLETED, HOUR, OWNER, T0, WORKING, Manager, held_rows, listed_ids, task_with_everything

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore, PostgresStore, SqliteStore
from a2a_grpc.store.base import StoreAtCapacityError
from a2a_grpc.store.postgres_retention import OLDEST_FINAL_TASKS as POSTGRES_OLDEST_FINAL
from a2a_grpc.store.sqlite_writes import OLDEST_FINAL_TASKS as SQLITE_OLDEST_FINAL

RETENTION = 0.2
WAIT_SECONDS = 10.0
INPUT_REQUIRED = a2a_pb2.TASK_STATE_INPUT_REQUIRED


async def send(stub: Stub, text: str) -> a2a_pb2.Task:
    """A message to the OutcomeAgent, which ends the task in the state `text` names ("input", "complete")."""
    response = await stub.SendMessage(send_request(text), metadata=V1)
    task: a2a_pb2.Task = response.task
    return task


async def get(stub: Stub, task_id: str) -> a2a_pb2.Task:
    task: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
    return task


async def until_not_found(stub: Stub, task_id: str) -> None:
    """Poll GetTask until the task is TASK_NOT_FOUND, as for a task that never was."""
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            try:
                await get(stub, task_id)
            except grpc.aio.AioRpcError as error:
                assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=task_id)
                return
            await asyncio.sleep(0.02)


def continuing(task_id: str) -> a2a_pb2.SendMessageRequest:
    request = send_request("complete")
    request.message.task_id = task_id
    return request


def store_url(kind: str, tmp_path: Path) -> str:
    return "memory" if kind == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_task_final_longer_than_the_retention_is_task_not_found_and_a_waiting_one_stays(
    start_server: StartServer, clients: Clients, kind: str, tmp_path: Path
) -> None:
    server = await start_server(
        agent=OutcomeAgent(), store_url=store_url(kind, tmp_path), task_retention_seconds=RETENTION
    )
    stub = clients.stub(server)
    waiting = await send(stub, "input")
    done = await send(stub, "complete")
    assert (waiting.status.state, done.status.state) == (INPUT_REQUIRED, COMPLETED)

    await until_not_found(stub, done.id)
    later = await rpc_error(stub.SendMessage(continuing(done.id), metadata=V1))
    assert_error(later, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=done.id)
    # waiting since before the completed task finished, and kept: it is not final
    assert (await get(stub, waiting.id)).status.state == INPUT_REQUIRED
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
    assert ([task.id for task in listed.tasks], listed.total_size) == ([waiting.id], 1)


async def test_a_server_removes_tasks_final_longer_than_a_week_at_start_up(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = SqliteStore(path)
    await before.open()
    try:
        await finished_long_ago(before, "old")  # completed in 2023
    finally:
        await before.close()
    server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", store_url=f"sqlite:///{path}"))
    await server.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                if await server.store.get_task("old", OWNER) is None:
                    break
                await asyncio.sleep(0.01)
    finally:
        await server.stop(0)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_write_goes_between_the_batches_of_a_removal(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "tasks.db")
    await store.open()
    try:
        manager = Manager(store)
        for index in range(6):
            await task_with_everything(manager, f"old-{index}", COMPLETED, T0 + index)
        removal = asyncio.ensure_future(store.remove_final_tasks(HOUR, batch=2))
        await asyncio.sleep(0)  # the first batch is taken (memory) or queued to the writer (SQLite)
        await manager.create("new", state=WORKING)  # queued behind the first batch, ahead of the later ones
        # written while the removal still had batches to go (reading old-5 here would race the writer's next batch)
        assert not removal.done()
        assert await removal == 6
        assert await listed_ids(store) == ["new"]
    finally:
        await store.close()


# -- the query that finds the tasks to remove uses an index -------------------------------------------


async def test_sqlite_finds_the_oldest_final_tasks_through_an_index(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "tasks.db")
    await store.open()
    await store.close()
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {SQLITE_OLDEST_FINAL}", (0, 10))]
    assert plan == ["SEARCH tasks USING INDEX tasks_final (status_ts_us<?)"], plan


async def test_postgres_finds_the_oldest_final_tasks_through_an_index(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=1)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("SET enable_seqscan = off")  # an empty table: a scan would do, unless none is allowed
        plan = "\n".join(row[0] for row in await conn.fetch(f"EXPLAIN {POSTGRES_OLDEST_FINAL}", 0, 10))
    finally:
        await conn.close()
    assert "Index Scan on tasks_final" in plan or "Index Scan using tasks_final" in plan, plan
    assert "Index Cond: (status_ts_us <" in plan and "Seq Scan" not in plan, plan


# -- PostgreSQL replicas: one removes, under a lease; all agree ---------------------------------------


async def test_one_postgres_replica_at_a_time_removes_and_another_takes_over_a_lapsed_lease(postgres_url: str) -> None:
    first, second = PostgresStore(postgres_url, pool_size=2), PostgresStore(postgres_url, pool_size=2)
    await first.open()
    await second.open()
    try:
        await task_with_everything(Manager(first), "a", COMPLETED, T0)
        assert await first.remove_final_tasks(HOUR) == 1  # the first to try takes the lease
        await task_with_everything(Manager(first), "b", COMPLETED, T0)
        assert await second.remove_final_tasks(HOUR) == 0  # held by the first
        assert await second.get_task("b", OWNER) is not None
        assert await first.remove_final_tasks(HOUR) == 1

        conn = await asyncpg.connect(postgres_url)
        try:  # the first stops removing: its lease lapses
            await conn.execute("UPDATE leases SET held_until = now() - interval '1 second'")
        finally:
            await conn.close()
        await task_with_everything(Manager(first), "c", COMPLETED, T0)
        assert await second.remove_final_tasks(HOUR) == 1
        assert await first.remove_final_tasks(HOUR) == 0
        assert await listed_ids(first) == []
    finally:
        await first.close()
        await second.close()


async def test_postgres_replicas_agree_a_removed_task_is_not_found_and_never_bring_it_back(
    start_server: StartServer, clients: Clients, postgres_url: str
) -> None:
    replicas = [
        await start_server(agent=OutcomeAgent(), store_url=postgres_url, task_retention_seconds=RETENTION)
        for _ in range(2)
    ]
    stubs = [clients.stub(replica) for replica in replicas]
    waiting = await send(stubs[0], "input")
    done = await send(stubs[0], "complete")  # run by the first replica, which held its live copy
    assert (await get(stubs[1], done.id)).status.state == COMPLETED

    for stub in stubs:
        await until_not_found(stub, done.id)
    for stub in stubs:  # neither a message nor a push config brings it back
        later = await rpc_error(stub.SendMessage(continuing(done.id), metadata=V1))
        assert_error(later, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=done.id)
        config = a2a_pb2.TaskPushNotificationConfig(task_id=done.id, url=DEAD_HOOK)
        refused = await rpc_error(stub.CreateTaskPushNotificationConfig(config, metadata=V1))
        assert_error(refused, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=done.id)
        assert (await get(stub, waiting.id)).status.state == INPUT_REQUIRED
    first_store = replicas[0].store
    assert isinstance(first_store, PostgresStore)
    assert not any((await held_rows(first_store, done.id)).values())
    conn = await asyncpg.connect(postgres_url)
    try:
        holder = await conn.fetchval("SELECT holder FROM leases WHERE name = 'task-retention'")
    finally:
        await conn.close()
    assert holder in {replica.store.replica_id for replica in replicas if isinstance(replica.store, PostgresStore)}


# -- the memory store's bound --------------------------------------------------------------------------


async def test_the_memory_store_evicts_the_tasks_final_the_longest_and_never_a_live_one() -> None:
    store = MemoryStore(max_tasks=3)
    manager = Manager(store)
    await manager.create("live", state=WORKING, ts_us=T0)  # the oldest, but not final
    await manager.create("final-later", state=COMPLETED, ts_us=T0 + 2)
    await manager.create("final-first", state=COMPLETED, ts_us=T0 + 1)
    await manager.create("new-1", state=WORKING)
    assert set(await listed_ids(store)) == {"live", "final-later", "new-1"}
    await manager.create("new-2", state=WORKING)
    assert set(await listed_ids(store)) == {"live", "new-1", "new-2"}

    with pytest.raises(StoreAtCapacityError):
        await manager.create("new-3", state=WORKING)
    assert set(await listed_ids(store)) == {"live", "new-1", "new-2"}
    await manager.update("new-1", state=COMPLETED, ts_us=T0 + 3)  # final now: it may make room
    await manager.create("new-3", state=WORKING)
    assert set(await listed_ids(store)) == {"live", "new-2", "new-3"}


async def test_a_full_memory_store_of_live_tasks_refuses_a_new_one_with_resource_exhausted(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(agent=OutcomeAgent(), memory_store_max_tasks=2)
    stub = clients.stub(server)
    waiting = await send(stub, "input")
    done = await send(stub, "complete")
    await send(stub, "input")  # evicts the completed task
    await until_not_found(stub, done.id)

    refused = await rpc_error(stub.SendMessage(send_request("input"), metadata=V1))
    assert_error(refused, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_TASKS", limit="2")
    assert any(detail.type_url.endswith("google.rpc.RetryInfo") for detail in rich_status(refused).details)
    assert error_info(refused).reason == "TOO_MANY_TASKS"
    assert (await get(stub, waiting.id)).status.state == INPUT_REQUIRED
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        assert await health(channel) == [SERVING, SERVING]  # a limit the caller met: the server is ready
