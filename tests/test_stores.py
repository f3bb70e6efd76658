"""Behaviour tests run against every TaskStore, plus SQLite durability, crash and group-commit tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
import pytest
from google.protobuf import struct_pb2

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import (
    InvalidPageTokenError,
    MemoryStore,
    PostgresStore,
    SqliteStore,
    StoreError,
    TaskQuery,
    TaskStore,
    TaskWrite,
    VersionConflictError,
    open_store,
)
from a2a_grpc.store.base import TaskEvent
from a2a_grpc.store.postgres_schema import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from a2a_grpc.store.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

REPO_ROOT = Path(__file__).resolve().parent.parent
OWNER = "alice"
T0 = 1_700_000_000_000_000  # microseconds since the epoch
SUBMITTED = a2a_pb2.TASK_STATE_SUBMITTED
WORKING = a2a_pb2.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


def status(state: a2a_pb2.TaskState, ts_us: int) -> a2a_pb2.TaskStatus:
    result = a2a_pb2.TaskStatus(state=state)
    result.timestamp.FromMicroseconds(ts_us)
    return result


def message(text: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])


class ArtifactFields(TypedDict, total=False):
    name: str
    description: str
    extensions: Sequence[str]
    metadata: struct_pb2.Struct


def artifact(artifact_id: str, *texts: str, **fields: Unpack[ArtifactFields]) -> a2a_pb2.Artifact:
    return a2a_pb2.Artifact(artifact_id=artifact_id, parts=[a2a_pb2.Part(text=t) for t in texts], **fields)


def struct(**values: str | float | bool | None) -> struct_pb2.Struct:
    result = struct_pb2.Struct()
    result.update(values)
    return result


class Manager:
    """A stand-in for the task manager: owns each Task, mutates it, and sends the store deltas."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.tasks: dict[str, a2a_pb2.Task] = {}
        self.versions: dict[str, int] = {}

    async def create(
        self,
        task_id: str,
        *,
        owner: str = OWNER,
        context_id: str = "ctx-1",
        state: a2a_pb2.TaskState = SUBMITTED,
        ts_us: int = T0,
        history: Sequence[a2a_pb2.Message] = (),
        artifacts: Sequence[a2a_pb2.Artifact] = (),
        metadata: struct_pb2.Struct | None = None,
    ) -> a2a_pb2.Task:
        task = a2a_pb2.Task(id=task_id, context_id=context_id, status=status(state, ts_us))
        task.history.extend(history)
        task.artifacts.extend(artifacts)
        if metadata is not None:
            task.metadata.CopyFrom(metadata)
        self.tasks[task_id] = task
        self.versions[task_id] = 1
        await self.store.apply(TaskWrite(task_id, 1, owner=owner, task=task))
        return task

    async def update(
        self,
        task_id: str,
        *,
        state: a2a_pb2.TaskState | None = None,
        ts_us: int = T0,
        history: Sequence[a2a_pb2.Message] = (),
        artifact: a2a_pb2.Artifact | None = None,
        append: bool = False,
    ) -> None:
        task = self.tasks[task_id]
        new_status = None if state is None else status(state, ts_us)
        if new_status is not None:
            task.status.CopyFrom(new_status)
        task.history.extend(history)
        if artifact is not None:
            apply_artifact_chunk(task.artifacts, artifact, append)
        self.versions[task_id] += 1
        write = TaskWrite(
            task_id,
            self.versions[task_id],
            status=new_status,
            history=list(history),
            artifacts=[] if artifact is None else [(artifact, append)],
        )
        await self.store.apply(write)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "tasks.db")
    await opened.open()
    yield opened
    await opened.close()


class QueryFields(TypedDict, total=False):
    owner: str
    page_size: int
    context_id: str
    state: int
    status_after_us: int | None
    page_token: str
    include_artifacts: bool


def query(**fields: Unpack[QueryFields]) -> TaskQuery:
    return dataclasses.replace(TaskQuery(owner=OWNER, page_size=50, include_artifacts=True), **fields)


async def listed_ids(store: TaskStore, **fields: Unpack[QueryFields]) -> list[str]:
    return [task.id for task in (await store.list_tasks(query(**fields))).tasks]


# -- behaviour shared by every store ---------------------------------------------------------------


async def test_create_and_get(store: TaskStore) -> None:
    manager = Manager(store)
    created = await manager.create(
        "t1", history=[message("hi")], artifacts=[artifact("a", "x")], metadata=struct(k="v")
    )
    assert await store.get_task("t1", OWNER) == created
    assert await store.get_task("missing", OWNER) is None


async def test_the_store_holds_what_was_written_not_the_writers_objects(store: TaskStore) -> None:
    """Only a write changes a stored task: mutating the objects a write carried, or a task read back,
    leaves it as it was (the memory store keeps copies and applies deltas, as SQLite does)."""
    manager = Manager(store)
    created = await manager.create("t1", history=[message("hi")])
    extra = message("not written")
    created.history.append(extra)
    created.status.state = a2a_pb2.TASK_STATE_FAILED
    read = await store.get_task("t1", OWNER)
    assert read is not None
    read.artifacts.append(artifact("z", "not written either"))
    update = message("written")
    await manager.update("t1", state=WORKING, history=[update])
    update.parts[0].text = "changed after the write"
    stored = await store.get_task("t1", OWNER)
    assert stored is not None
    assert [m.parts[0].text for m in stored.history] == ["hi", "written"]
    assert (stored.status.state, list(stored.artifacts)) == (WORKING, [])


async def test_owner_scoping(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("mine")
    await manager.create("theirs", owner="bob")
    assert await store.get_task("theirs", OWNER) is None
    assert await store.get_task("mine", "bob") is None
    assert await listed_ids(store) == ["mine"]
    assert await listed_ids(store, owner="bob") == ["theirs"]


async def test_version_conflict(store: TaskStore) -> None:
    manager = Manager(store)
    task = await manager.create("t1")
    with pytest.raises(VersionConflictError):
        await store.apply(TaskWrite("t1", 1, owner=OWNER, task=task))
    with pytest.raises(VersionConflictError):
        await store.apply(TaskWrite("t1", 3, status=status(WORKING, T0)))
    with pytest.raises(VersionConflictError):
        await store.apply(TaskWrite("nope", 2))
    await manager.update("t1", state=WORKING, ts_us=T0 + 1)
    assert await store.get_task("t1", OWNER) == manager.tasks["t1"]
    assert await store.load_task("t1", OWNER) == (manager.tasks["t1"], 2, 0)
    assert await store.load_task("t1", "someone else") is None
    assert await store.load_task("nope", OWNER) is None


async def test_create_without_task_fails_when_awaited(store: TaskStore) -> None:
    pending = store.apply(TaskWrite("t1", 1, owner=OWNER))
    with pytest.raises(ValueError):
        await pending


async def test_history_is_appended(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("t1", history=[message("one")])
    await manager.update("t1", history=[message("two"), message("three")])
    await manager.update("t1", state=WORKING, ts_us=T0 + 5, history=[message("four")])
    stored = await store.get_task("t1", OWNER)
    assert stored == manager.tasks["t1"]
    assert stored is not None
    assert [m.parts[0].text for m in stored.history] == ["one", "two", "three", "four"]


async def test_history_kept_drops_the_oldest_messages_once_appended(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("t1", history=[message("one"), message("two")])
    kept = TaskWrite("t1", 2, history=[message("three"), message("four"), message("five")], history_kept=3)
    await store.apply(kept)
    stored = await store.get_task("t1", OWNER)
    assert stored is not None
    assert [m.parts[0].text for m in stored.history] == ["three", "four", "five"]
    await store.apply(TaskWrite("t1", 3, history=[message("six")], history_kept=2))
    stored = await store.get_task("t1", OWNER)
    assert stored is not None
    assert [m.parts[0].text for m in stored.history] == ["five", "six"]


async def test_artifact_chunks_merge(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("t1", artifacts=[artifact("a", "a1", name="first")])
    await manager.update("t1", artifact=artifact("a", "a2"), append=True)
    await manager.update("t1", artifact=artifact("b", "b1"))
    await manager.update(
        "t1",
        artifact=artifact("b", "b2", name="bee", description="d", extensions=["x"], metadata=struct(m=1)),
        append=True,
    )
    await manager.update("t1", artifact=artifact("c", "c1"), append=True)  # append to nothing: a new one
    await manager.update("t1", artifact=artifact("a", "A"), append=False)  # replaces in place
    await manager.update("t1", artifact=artifact("b", "b3", extensions=["y"]), append=True)
    stored = await store.get_task("t1", OWNER)
    assert stored == manager.tasks["t1"]
    assert stored is not None
    assert [a.artifact_id for a in stored.artifacts] == ["a", "b", "c"]
    a, b, c = stored.artifacts
    assert [p.text for p in a.parts] == ["A"]
    assert not a.name
    assert [p.text for p in b.parts] == ["b1", "b2", "b3"]
    assert (b.name, b.description, list(b.extensions), dict(b.metadata)) == ("bee", "d", ["x", "y"], {"m": 1})
    assert [p.text for p in c.parts] == ["c1"]


async def test_status_update_reorders_listing(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("old", ts_us=T0)
    await manager.create("new", ts_us=T0 + 10)
    assert await listed_ids(store) == ["new", "old"]
    await manager.update("old", state=WORKING, ts_us=T0 + 20)
    assert await listed_ids(store) == ["old", "new"]
    assert await listed_ids(store, state=WORKING) == ["old"]


async def test_list_filters(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("a", context_id="c1", state=SUBMITTED, ts_us=T0 + 1)
    await manager.create("b", context_id="c2", state=WORKING, ts_us=T0 + 2)
    await manager.create("c", context_id="c1", state=COMPLETED, ts_us=T0 + 3)
    await manager.create("d", context_id="c1", state=WORKING, ts_us=T0 + 4, owner="bob")
    assert await listed_ids(store) == ["c", "b", "a"]
    assert await listed_ids(store, context_id="c1") == ["c", "a"]
    assert await listed_ids(store, state=WORKING) == ["b"]
    assert await listed_ids(store, status_after_us=T0 + 2) == ["c", "b"]  # inclusive
    assert await listed_ids(store, context_id="c1", state=COMPLETED, status_after_us=T0 + 3) == ["c"]
    assert await listed_ids(store, context_id="c9") == []
    assert (await store.list_tasks(query(context_id="c1"))).total_size == 2


async def test_ties_are_ordered_by_id_descending(store: TaskStore) -> None:
    manager = Manager(store)
    for task_id in ("b", "c", "a"):
        await manager.create(task_id, ts_us=T0)
    assert await listed_ids(store) == ["c", "b", "a"]


async def test_pagination(store: TaskStore) -> None:
    manager = Manager(store)
    for i in range(7):
        await manager.create(f"t{i}", ts_us=T0 + (i // 2))  # pairs share a timestamp
    expected = ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]

    first = await store.list_tasks(query(page_size=3))
    assert [t.id for t in first.tasks] == expected[:3]
    assert first.total_size == 7
    assert first.next_page_token
    await manager.create("newest", ts_us=T0 + 100)  # must not shift the pages after the cursor

    second = await store.list_tasks(query(page_size=3, page_token=first.next_page_token))
    assert [t.id for t in second.tasks] == expected[3:6]
    assert second.total_size == 8
    again = await store.list_tasks(query(page_size=3, page_token=first.next_page_token))
    assert [t.id for t in again.tasks] == expected[3:6]
    assert again.next_page_token == second.next_page_token

    last = await store.list_tasks(query(page_size=3, page_token=second.next_page_token))
    assert [t.id for t in last.tasks] == expected[6:]
    assert last.next_page_token == ""


async def test_exactly_full_last_page_has_no_token(store: TaskStore) -> None:
    manager = Manager(store)
    for i in range(4):
        await manager.create(f"t{i}", ts_us=T0 + i)
    first = await store.list_tasks(query(page_size=2))
    last = await store.list_tasks(query(page_size=2, page_token=first.next_page_token))
    assert [t.id for t in last.tasks] == ["t1", "t0"]
    assert last.next_page_token == ""
    empty = await store.list_tasks(query(owner="nobody", page_size=2))
    assert (empty.tasks, empty.next_page_token, empty.total_size) == ([], "", 0)


async def test_list_without_artifacts(store: TaskStore) -> None:
    manager = Manager(store)
    task = await manager.create("t1", history=[message("hi")], artifacts=[artifact("a", "x")], metadata=struct(k=1))
    listed = (await store.list_tasks(query(include_artifacts=False))).tasks[0]
    expected = a2a_pb2.Task()
    expected.CopyFrom(task)
    del expected.artifacts[:]
    assert listed == expected
    assert len(task.artifacts) == 1  # the manager's object is untouched
    assert await store.get_task("t1", OWNER) == task


def b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        "garbage!",
        "%%%",
        b64("not json"),
        b64("{}"),
        b64("[]"),
        b64('["t1","ts","id"]'),
        b64('["c2","x"]'),
        b64("[" * 3000),  # nested deeper than the JSON decoder recurses, short enough to be decoded
        b64("[" * 100_000),
        b64('["t1",0,"' + "x" * 5000 + '"]'),  # well formed, but longer than any token the server issues
    ],
    ids=lambda token: token[:16] if len(token) < 100 else f"{len(token)} chars",
)
async def test_invalid_page_token(store: TaskStore, token: str) -> None:
    with pytest.raises(InvalidPageTokenError):
        await store.list_tasks(query(page_token=token))
    with pytest.raises(InvalidPageTokenError):
        await store.list_push_configs(OWNER, "t1", 10, token)


async def test_tokens_are_not_interchangeable(store: TaskStore) -> None:
    manager = Manager(store)
    for i in range(3):
        await manager.create(f"t{i}", ts_us=T0 + i)
        await store.put_push_config(OWNER, push_config("t0", f"c{i}"))
    task_token = (await store.list_tasks(query(page_size=1))).next_page_token
    _, config_token = await store.list_push_configs(OWNER, "t0", 1, "")
    assert task_token and config_token
    with pytest.raises(InvalidPageTokenError):
        await store.list_tasks(query(page_token=config_token))
    with pytest.raises(InvalidPageTokenError):
        await store.list_push_configs(OWNER, "t0", 1, task_token)


def push_config(
    task_id: str, config_id: str, url: str = "https://hook.example/a"
) -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url, token="secret")


async def test_push_config_crud(store: TaskStore) -> None:
    await Manager(store).create("t1")
    config = push_config("t1", "c1")
    await store.put_push_config(OWNER, config)
    assert await store.get_push_config(OWNER, "t1", "c1") == config
    assert await store.get_push_config("bob", "t1", "c1") is None
    assert await store.get_push_config(OWNER, "t1", "c2") is None

    replaced = push_config("t1", "c1", url="https://hook.example/b")
    await store.put_push_config(OWNER, replaced)
    assert await store.get_push_config(OWNER, "t1", "c1") == replaced

    assert not await store.delete_push_config("bob", "t1", "c1")
    assert await store.delete_push_config(OWNER, "t1", "c1")
    assert not await store.delete_push_config(OWNER, "t1", "c1")
    assert await store.get_push_config(OWNER, "t1", "c1") is None


async def test_push_config_paging(store: TaskStore) -> None:
    manager = Manager(store)
    await manager.create("t1")
    await manager.create("t2")
    for config_id in ("e", "b", "d", "a", "c"):
        await store.put_push_config(OWNER, push_config("t1", config_id))
    await store.put_push_config(OWNER, push_config("t2", "a"))
    await store.put_push_config("bob", push_config("t1", "z"))

    seen: list[str] = []
    token = ""
    for _ in range(3):
        page, token = await store.list_push_configs(OWNER, "t1", 2, token)
        seen += [c.id for c in page]
        if not token:
            break
    assert seen == ["a", "b", "c", "d", "e"]
    assert token == ""
    assert await store.list_push_configs(OWNER, "t3", 2, "") == ([], "")


# -- task retention: removing the tasks final for longer than the retention -----------------------

HOUR = 3600.0
FINAL_STATES = (COMPLETED, a2a_pb2.TASK_STATE_FAILED, a2a_pb2.TASK_STATE_CANCELED, a2a_pb2.TASK_STATE_REJECTED)
INPUT_REQUIRED = a2a_pb2.TASK_STATE_INPUT_REQUIRED


def recent_us() -> int:
    return time.time_ns() // 1000


def event(task_id: str, seq: int, state: a2a_pb2.TaskState) -> TaskEvent:
    update = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, status=a2a_pb2.TaskStatus(state=state))
    return TaskEvent(seq, state, a2a_pb2.StreamResponse(status_update=update).SerializeToString())


async def task_with_everything(manager: Manager, task_id: str, state: a2a_pb2.TaskState, ts_us: int) -> None:
    """A task that reached `state` at `ts_us`, with history, an artifact, two events and a push config."""
    await manager.create(task_id, history=[message("hi")], artifacts=[artifact("a", "x")])
    manager.versions[task_id] += 1
    write = TaskWrite(
        task_id,
        manager.versions[task_id],
        status=status(state, ts_us),
        history=[message("bye")],
        events=[event(task_id, 1, WORKING), event(task_id, 2, state)],
    )
    await manager.store.apply(write)
    await manager.store.put_push_config(OWNER, push_config(task_id, "c1"), delivered=0)


async def held_rows(store: TaskStore, task_id: str) -> dict[str, int]:
    """The rows of every table of a durable store that hold something of the task ({} for the memory store)."""
    if isinstance(store, SqliteStore):
        tables = {"tasks": "id", "history": "task_id", "artifacts": "task_id", "task_events": "task_id"}
        tables["push_configs"] = "task_id"
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            return {
                table: conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (task_id,)).fetchone()[0]
                for table, column in tables.items()
            }
    if isinstance(store, PostgresStore):
        tables = {"tasks": "id", "history": "task_id", "artifact_chunks": "task_id", "task_events": "task_id"}
        tables |= {"push_configs": "task_id", "cancel_requests": "task_id"}
        conn = await asyncpg.connect(store.url)
        try:
            return {
                table: await conn.fetchval(f"SELECT COUNT(*) FROM {table} WHERE {column} = $1", task_id)
                for table, column in tables.items()
            }
        finally:
            await conn.close()
    return {}


async def test_a_task_final_longer_than_the_retention_is_removed_with_all_it_holds(store: TaskStore) -> None:
    manager = Manager(store)
    old = [f"old-{state}" for state in FINAL_STATES]
    for task_id, state in zip(old, FINAL_STATES, strict=True):
        await task_with_everything(manager, task_id, state, T0)
    await task_with_everything(manager, "young", COMPLETED, recent_us())
    await task_with_everything(manager, "working", WORKING, T0)  # not final, however old its status
    await task_with_everything(manager, "waiting", INPUT_REQUIRED, T0)
    if isinstance(store, PostgresStore):
        await store.request_cancel("old-3")  # a cancel request row, removed with its task
    before = await held_rows(store, "old-3")

    assert await store.remove_final_tasks(HOUR) == len(FINAL_STATES)

    for task_id in old:
        assert await store.get_task(task_id, OWNER) is None
        assert await store.load_task(task_id, OWNER) is None
        assert await store.list_push_configs(OWNER, task_id, 10, "") == ([], "")
        assert await store.read_events(task_id, 0, 10) == []
    assert all(before.values()) and not any((await held_rows(store, "old-3")).values()), before
    assert set(await listed_ids(store)) == {"young", "working", "waiting"}
    for task_id in ("young", "working", "waiting"):
        assert len(await store.read_events(task_id, 0, 10)) == 2
        assert (await store.get_push_config(OWNER, task_id, "c1")) is not None
    assert await store.remove_final_tasks(HOUR) == 0


async def test_a_backlog_of_old_final_tasks_is_removed_in_batches_until_none_is_left(store: TaskStore) -> None:
    manager = Manager(store)
    for index in range(5):
        await task_with_everything(manager, f"old-{index}", COMPLETED, T0 + index)
    assert await store.remove_final_tasks(HOUR, batch=2) == 5
    assert await listed_ids(store) == []


async def test_a_removed_task_takes_no_write_and_comes_back_as_nothing(store: TaskStore) -> None:
    """A replica or a machine holding the removed task writes on top of a version the store no longer has."""
    manager = Manager(store)
    await task_with_everything(manager, "old", COMPLETED, T0)
    await store.remove_final_tasks(HOUR)
    with pytest.raises(VersionConflictError):
        await store.apply(TaskWrite("old", 3, history=[message("late")], events=[event("old", 3, COMPLETED)]))
    assert await store.get_task("old", OWNER) is None
    assert await store.read_events("old", 0, 10) == []


# -- SQLite: durability, crashes, group commit -----------------------------------------------------


async def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "tasks.db"
    first = SqliteStore(path)
    await first.open()
    manager = Manager(first)
    await manager.create("t1", history=[message("one")], artifacts=[artifact("a", "1")], metadata=struct(k=1))
    await manager.update("t1", state=WORKING, ts_us=T0 + 1, history=[message("two")])
    await manager.update("t1", artifact=artifact("a", "2"), append=True)
    config = push_config("t1", "c1")
    await first.put_push_config(OWNER, config)
    pending = manager.store.apply(TaskWrite("t1", 4, status=status(COMPLETED, T0 + 2)))
    await first.close()  # drains the pending write
    await pending

    second = SqliteStore(path)
    await second.open()
    try:
        manager.tasks["t1"].status.CopyFrom(status(COMPLETED, T0 + 2))
        assert await second.get_task("t1", OWNER) == manager.tasks["t1"]
        assert await second.get_push_config(OWNER, "t1", "c1") == config
        assert await listed_ids(second, state=COMPLETED) == ["t1"]
        with pytest.raises(VersionConflictError):
            await second.apply(TaskWrite("t1", 4))
        await second.apply(TaskWrite("t1", 5))
    finally:
        await second.close()


async def test_sqlite_settings(sqlite_store: SqliteStore) -> None:
    with sqlite3.connect(sqlite_store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SQLITE_SCHEMA_VERSION,)]


async def test_sqlite_group_commit(sqlite_store: SqliteStore) -> None:
    before = sqlite_store.commit_count
    tasks = [a2a_pb2.Task(id=f"t{i}", status=status(SUBMITTED, T0 + i)) for i in range(500)]
    await asyncio.gather(*(sqlite_store.apply(TaskWrite(t.id, 1, owner=OWNER, task=t)) for t in tasks))
    commits = sqlite_store.commit_count - before
    assert 1 <= commits < 500
    page = await sqlite_store.list_tasks(query(page_size=1))
    assert page.total_size == 500


async def apply_a_batch_with_one_conflict(store: TaskStore) -> None:
    """Four writes handed over in one loop turn, the third out of date: it fails, and it alone."""
    task = a2a_pb2.Task(id="t1", status=status(SUBMITTED, T0))
    writes = [
        TaskWrite("t1", 1, owner=OWNER, task=task),
        TaskWrite("t1", 2, history=[message("kept")]),
        TaskWrite("t1", 2, history=[message("conflict")]),
        TaskWrite("t1", 3, history=[message("also kept")]),
    ]
    results = await asyncio.gather(*(store.apply(w) for w in writes), return_exceptions=True)
    assert results[:2] == [None, None]
    assert isinstance(results[2], VersionConflictError)
    assert results[3] is None
    stored = await store.get_task("t1", OWNER)
    assert stored is not None
    assert [m.parts[0].text for m in stored.history] == ["kept", "also kept"]


async def test_sqlite_failed_write_fails_alone(sqlite_store: SqliteStore) -> None:
    await apply_a_batch_with_one_conflict(sqlite_store)


async def test_sqlite_serializes_at_apply_time(sqlite_store: SqliteStore) -> None:
    task = a2a_pb2.Task(id="t1", status=status(SUBMITTED, T0), history=[message("one")])
    pending = sqlite_store.apply(TaskWrite("t1", 1, owner=OWNER, task=task))
    task.history.add().CopyFrom(message("later"))
    task.status.state = COMPLETED
    await pending
    stored = await sqlite_store.get_task("t1", OWNER)
    assert stored is not None
    assert (len(stored.history), stored.status.state) == (1, SUBMITTED)


def stored_chunks(path: Path, task_id: str) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as conn:
        sql = "SELECT artifact_id, append FROM artifacts WHERE task_id = ? ORDER BY seq"
        return conn.execute(sql, (task_id,)).fetchall()


@pytest.mark.parametrize(
    "final",
    [COMPLETED, a2a_pb2.TASK_STATE_FAILED, a2a_pb2.TASK_STATE_CANCELED],
    ids=["completed", "failed", "canceled"],
)
async def test_sqlite_keeps_one_chunk_row_per_artifact_of_a_finished_task(
    sqlite_store: SqliteStore, final: a2a_pb2.TaskState
) -> None:
    manager = Manager(sqlite_store)
    await manager.create("t1", state=WORKING, artifacts=[artifact("a0", "from the start")])
    for i in range(300):
        await manager.update("t1", artifact=artifact("a1", f"draft {i}", name="report"))
    await manager.update("t1", artifact=artifact("a2", "one", metadata=struct(part=1)))
    await manager.update("t1", artifact=artifact("a2", "two", description="joined"), append=True)
    assert len(stored_chunks(sqlite_store.path, "t1")) == 303
    working = await sqlite_store.get_task("t1", OWNER)

    await manager.update("t1", state=final, ts_us=T0 + 1)
    finished = await sqlite_store.get_task("t1", OWNER)

    assert stored_chunks(sqlite_store.path, "t1") == [("a0", 0), ("a1", 0), ("a2", 0)]
    assert working is not None and finished is not None
    assert list(finished.artifacts) == list(working.artifacts) == list(manager.tasks["t1"].artifacts)
    assert [part.text for part in finished.artifacts[1].parts] == ["draft 299"]
    assert finished.status.state == final


async def test_sqlite_closed_store_refuses_writes(tmp_path: Path) -> None:
    closed = SqliteStore(tmp_path / "tasks.db")
    with pytest.raises(StoreError):
        await closed.apply(TaskWrite("t1", 2))
    await closed.open()
    await closed.close()
    await closed.close()
    with pytest.raises(StoreError):
        await closed.apply(TaskWrite("t1", 2))
    with pytest.raises(StoreError):
        await closed.get_task("t1", OWNER)


async def test_sqlite_open_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    broken = SqliteStore(tmp_path / "file" / "tasks.db")
    with pytest.raises(StoreError):
        await broken.open()
    with pytest.raises(StoreError):
        await broken.get_task("t1", OWNER)


CRASH_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from a2a_grpc.generated import a2a_pb2
    from a2a_grpc.store import SqliteStore, TaskWrite

    def msg(text):
        return a2a_pb2.Message(message_id=text, parts=[a2a_pb2.Part(text=text)])

    async def worker(store, n):
        i = 0
        while True:
            tid = f"w{n}-{i}"
            task = a2a_pb2.Task(id=tid, status=a2a_pb2.TaskStatus(state=1), history=[msg("v1")])
            await store.apply(TaskWrite(tid, 1, owner="o", task=task))
            print(tid, 1, flush=True)
            for version in (2, 3, 4):
                await store.apply(TaskWrite(tid, version, history=[msg(f"v{version}")]))
                print(tid, version, flush=True)
            i += 1

    async def main():
        store = SqliteStore(sys.argv[1])
        await store.open()
        await asyncio.gather(*(worker(store, n) for n in range(8)))

    asyncio.run(main())
    """
)


def run_and_kill_writer(script: Path, db: Path, acks_before_kill: int) -> dict[str, int]:
    """Run the writer, SIGKILL it mid-stream; the last acknowledged version of every task."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    lines: list[str] = []
    while len(lines) < acks_before_kill:
        line = proc.stdout.readline()
        assert line, f"writer exited early with {proc.wait()}"
        lines.append(line)
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()  # not communicate(): it would skip what readline() already buffered
    proc.stdout.close()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    acked: dict[str, int] = {}
    for line in [*lines, *rest.splitlines(keepends=True)]:
        if line.endswith("\n"):  # the kill may cut the last line short: it was not acknowledged
            task_id, version = line.split()
            acked[task_id] = max(acked.get(task_id, 0), int(version))
    return acked


async def test_sqlite_acknowledged_writes_survive_kill(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(CRASH_WRITER)
    db = tmp_path / "crash.db"
    acked = await asyncio.to_thread(run_and_kill_writer, script, db, 1000)
    assert len(acked) >= 100

    reopened = SqliteStore(db)
    await reopened.open()
    try:
        for task_id, version in acked.items():
            loaded = await reopened.load_task(task_id, "o")
            assert loaded is not None, task_id
            task, stored, _ = loaded
            assert version <= stored <= version + 1, task_id  # at most one unacknowledged write
            assert [m.parts[0].text for m in task.history] == [f"v{v}" for v in range(1, stored + 1)]
    finally:
        await reopened.close()


# -- open_store ----------------------------------------------------------------------------------


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory"), MemoryStore)
    assert isinstance(open_store("memory://"), MemoryStore)
    relative = open_store("sqlite:///data/tasks.db")
    assert isinstance(relative, SqliteStore)
    assert relative.path == Path("data/tasks.db")
    absolute = open_store(f"sqlite:///{tmp_path}/tasks.db")  # tmp_path starts with "/": four slashes
    assert isinstance(absolute, SqliteStore)
    assert absolute.path == tmp_path / "tasks.db"
    for url in ("postgresql://postgres@127.0.0.1:5432/tasks", "postgres://u@h/db"):
        postgres = open_store(url)
        assert isinstance(postgres, PostgresStore)
        assert postgres.url == url


@pytest.mark.parametrize("url", ["", "redis://x", "sqlite://", "sqlite:///", "sqlite://host/db", "mysql://h/db"])
def test_open_store_rejects_unknown_urls(url: str) -> None:
    with pytest.raises(ValueError, match="accepted forms"):
        open_store(url)


# -- PostgreSQL: replicas sharing one database -----------------------------------------------------


async def test_postgres_replicas_share_one_database(postgres_url: str) -> None:
    """Two stores on one database (two replicas): both starting at once create the schema once, and
    a write that does not follow the version the other replica stored is refused."""
    first, second = PostgresStore(postgres_url, pool_size=2), PostgresStore(postgres_url, pool_size=2)
    await asyncio.gather(first.open(), second.open())
    try:
        manager = Manager(first)
        task = await manager.create("t1")
        with pytest.raises(VersionConflictError):
            await second.apply(TaskWrite("t1", 1, owner=OWNER, task=task))
        await second.apply(TaskWrite("t1", 2, status=status(WORKING, T0 + 1)))
        with pytest.raises(VersionConflictError):
            await first.apply(TaskWrite("t1", 2, status=status(COMPLETED, T0 + 2)))
        loaded = await first.load_task("t1", OWNER)
        assert loaded is not None
        assert (loaded[0].status.state, loaded[1]) == (WORKING, 2)
        assert await second.running_tasks() == [("t1", OWNER)]
        pool = first._pool()
        assert await pool.fetch("SELECT version FROM schema_version") == [(POSTGRES_SCHEMA_VERSION,)]
    finally:
        await asyncio.gather(first.close(), second.close())


@pytest.fixture
async def postgres_store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_url)
    await opened.open()
    yield opened
    await opened.close()


async def test_postgres_group_commit_and_a_failed_write_fails_alone(postgres_store: PostgresStore) -> None:
    before = postgres_store.commit_count
    await apply_a_batch_with_one_conflict(postgres_store)
    assert postgres_store.commit_count - before == 1


async def test_postgres_keeps_one_chunk_row_per_artifact_of_a_finished_task(postgres_store: PostgresStore) -> None:
    manager = Manager(postgres_store)
    await manager.create("t1", state=WORKING, artifacts=[artifact("a0", "from the start")])
    for i in range(20):
        await manager.update("t1", artifact=artifact("a1", f"draft {i}", name="report"))
    await manager.update("t1", artifact=artifact("a2", "two"), append=True)
    await manager.update("t1", state=COMPLETED, ts_us=T0 + 1)
    rows = await postgres_store._pool().fetch("SELECT artifact_id, append FROM artifact_chunks ORDER BY seq")
    assert [tuple(row) for row in rows] == [("a0", False), ("a1", False), ("a2", False)]
    assert await postgres_store.get_task("t1", OWNER) == manager.tasks["t1"]


async def test_postgres_refuses_nul_where_text_cannot_hold_it(postgres_store: PostgresStore) -> None:
    task = a2a_pb2.Task(id="t\x00", status=status(SUBMITTED, T0))
    with pytest.raises(ValueError):
        await postgres_store.apply(TaskWrite(task.id, 1, owner=OWNER, task=task))
    assert await postgres_store.get_task("t\x00", OWNER) is None
    assert (await postgres_store.list_tasks(query(context_id="c\x00"))).total_size == 0
    with pytest.raises(InvalidPageTokenError):
        await postgres_store.list_tasks(query(page_token=b64('["t1",0,"a\\u0000"]')))
