"""The task event log of every TaskStore, plus SQLite's durability of it and its migration from schema version 1."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import SqliteStore, StoreError, TaskStore, VersionConflictError
from a2a_grpc.store.base import LoadedTask, TaskEvent, TaskWrite
from a2a_grpc.store.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

OWNER = "alice"
CONTEXT = "ctx-1"
T0 = 1_700_000_000_000_000  # microseconds since the epoch
SUBMITTED = a2a_pb2.TASK_STATE_SUBMITTED
WORKING = a2a_pb2.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


def status(state: a2a_pb2.TaskState, ts_us: int = T0) -> a2a_pb2.TaskStatus:
    result = a2a_pb2.TaskStatus(state=state)
    result.timestamp.FromMicroseconds(ts_us)
    return result


def status_event(task_id: str, seq: int, state: a2a_pb2.TaskState) -> TaskEvent:
    update = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, context_id=CONTEXT, status=status(state, T0 + seq))
    return TaskEvent(seq, state, a2a_pb2.StreamResponse(status_update=update).SerializeToString())


def artifact_event(task_id: str, seq: int, text: str, append: bool = False) -> TaskEvent:
    chunk = a2a_pb2.Artifact(artifact_id="a", parts=[a2a_pb2.Part(text=text)])
    update = a2a_pb2.TaskArtifactUpdateEvent(task_id=task_id, context_id=CONTEXT, artifact=chunk, append=append)
    return TaskEvent(seq, 0, a2a_pb2.StreamResponse(artifact_update=update).SerializeToString())


def create(task_id: str, *events: TaskEvent) -> TaskWrite:
    task = a2a_pb2.Task(id=task_id, context_id=CONTEXT, status=status(SUBMITTED))
    return TaskWrite(task_id, 1, owner=OWNER, task=task, events=list(events))


def update(task_id: str, version: int, *events: TaskEvent) -> TaskWrite:
    """A write of `version` that sets the status its last status event carries, if it has one."""
    statuses = [a2a_pb2.StreamResponse.FromString(event.body).status_update.status for event in events if event.state]
    return TaskWrite(task_id, version, status=statuses[-1] if statuses else None, events=list(events))


async def loaded(store: TaskStore, task_id: str) -> LoadedTask:
    found = await store.load_task(task_id, OWNER)
    assert found is not None
    return found


async def test_the_events_of_every_write_read_back_in_order(store: TaskStore) -> None:
    events = [
        status_event("t1", 1, SUBMITTED),
        status_event("t1", 2, WORKING),
        artifact_event("t1", 3, "one"),
        artifact_event("t1", 4, "two", append=True),
        status_event("t1", 5, COMPLETED),
    ]
    await store.apply(create("t1", events[0]))
    await store.apply(update("t1", 2, events[1]))
    await store.apply(update("t1", 3, *events[2:4]))
    await store.apply(update("t1", 4, events[4]))
    await store.apply(create("t2", status_event("t2", 1, SUBMITTED)))

    assert await store.read_events("t1", 0, 100) == events
    assert [event.state for event in await store.read_events("t1", 0, 100)] == [SUBMITTED, WORKING, 0, 0, COMPLETED]
    body = a2a_pb2.StreamResponse.FromString((await store.read_events("t1", 3, 1))[0].body)
    assert (body.artifact_update.artifact.parts[0].text, body.artifact_update.append) == ("two", True)
    assert await store.read_events("t2", 0, 100) == [status_event("t2", 1, SUBMITTED)]
    first = await loaded(store, "t1")
    assert (first.task.status.state, first.version, first.seq) == (COMPLETED, 4, 5)


async def test_read_events_pages_by_after_and_limit(store: TaskStore) -> None:
    events = [artifact_event("t1", seq, f"chunk {seq}") for seq in range(1, 11)]
    await store.apply(create("t1", *events[:4]))
    await store.apply(update("t1", 2, *events[4:]))

    assert await store.read_events("t1", 0, 3) == events[:3]
    assert await store.read_events("t1", 3, 3) == events[3:6]
    assert await store.read_events("t1", 8, 3) == events[8:]
    assert await store.read_events("t1", 10, 3) == []
    assert await store.read_events("t1", 0, 1000) == events
    assert await store.read_events("missing", 0, 10) == []


async def test_a_conflicting_write_stores_none_of_its_events(store: TaskStore) -> None:
    first = status_event("t1", 1, SUBMITTED)
    await store.apply(create("t1", first))
    with pytest.raises(VersionConflictError):
        await store.apply(create("t1", status_event("t1", 1, WORKING)))
    with pytest.raises(VersionConflictError):
        await store.apply(update("t1", 3, status_event("t1", 2, WORKING)))
    assert (await loaded(store, "t1")).seq == 1
    assert await store.read_events("t1", 0, 10) == [first]

    # Handed over in one loop turn: the out-of-date second write fails alone and leaves no event behind.
    kept = [artifact_event("t1", 2, "kept"), artifact_event("t1", 3, "also kept")]
    writes = [update("t1", 2, kept[0]), update("t1", 2, artifact_event("t1", 3, "refused")), update("t1", 3, kept[1])]
    results = await asyncio.gather(*(store.apply(write) for write in writes), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], VersionConflictError)
    assert await store.read_events("t1", 0, 10) == [first, *kept]
    assert (await loaded(store, "t1")).seq == 3


async def test_load_task_returns_the_seq_of_the_last_event(store: TaskStore) -> None:
    await store.apply(create("t1"))
    assert (await loaded(store, "t1")).seq == 0
    await store.apply(update("t1", 2, *(artifact_event("t1", seq, "x") for seq in (1, 2, 3))))
    assert (await loaded(store, "t1"))[1:] == (2, 3)
    await store.apply(TaskWrite("t1", 3, status=status(WORKING)))  # a write without events
    after = await loaded(store, "t1")
    assert (after.task.status.state, after.version, after.seq) == (WORKING, 3, 3)
    assert await store.load_task("t1", "someone else") is None


# -- SQLite: the log on disk, and files of schema version 1 ------------------------------------------


async def test_sqlite_events_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    events = [status_event("t1", 1, SUBMITTED), status_event("t1", 2, WORKING), artifact_event("t1", 3, "x")]
    first = SqliteStore(path)
    await first.open()
    await first.apply(create("t1", events[0]))
    pending = first.apply(update("t1", 2, *events[1:]))
    await first.close()  # drains the pending write
    await pending

    second = SqliteStore(path)
    await second.open()
    try:
        assert await second.read_events("t1", 0, 10) == events
        assert (await loaded(second, "t1"))[1:] == (2, 3)
        await second.apply(update("t1", 3, status_event("t1", 4, COMPLETED)))
        assert await second.read_events("t1", 3, 10) == [status_event("t1", 4, COMPLETED)]
    finally:
        await second.close()


# The schema of version 1, as the SQLite store created it before the event log.
V1_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state INTEGER NOT NULL,
    status_ts_us INTEGER NOT NULL,
    version INTEGER NOT NULL,
    status BLOB NOT NULL,
    metadata BLOB,
    created_us INTEGER NOT NULL
);
CREATE INDEX tasks_by_owner ON tasks (owner, status_ts_us DESC, id DESC);
CREATE INDEX tasks_by_context ON tasks (owner, context_id, status_ts_us DESC, id DESC);
CREATE TABLE history (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    message BLOB NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TABLE artifacts (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    artifact_id TEXT NOT NULL,
    append INTEGER NOT NULL,
    chunk BLOB NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TABLE push_configs (
    task_id TEXT NOT NULL,
    config_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY (task_id, config_id)
) WITHOUT ROWID;
"""


def write_version_1_file(path: Path, schema_version: int = 1) -> a2a_pb2.Task:
    """A file as the store of schema version 1 left it, holding one WORKING task at version 3."""
    task = a2a_pb2.Task(id="old", context_id=CONTEXT, status=status(WORKING, T0 + 3))
    task.history.add(message_id="m1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")])
    task.artifacts.add(artifact_id="a", parts=[a2a_pb2.Part(text="so far")])
    conn = sqlite3.connect(path)
    try:
        conn.executescript(V1_SCHEMA)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (schema_version,))
        row = ("old", OWNER, CONTEXT, WORKING, T0 + 3, 3, task.status.SerializeToString(), None, T0)
        conn.execute("INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        conn.execute("INSERT INTO history VALUES ('old', 0, ?)", (task.history[0].SerializeToString(),))
        conn.execute("INSERT INTO artifacts VALUES ('old', 0, 'a', 0, ?)", (task.artifacts[0].SerializeToString(),))
        conn.commit()
    finally:
        conn.close()
    return task


async def test_sqlite_migrates_a_version_1_file(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    task = write_version_1_file(path)
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.load_task("old", OWNER) == (task, 3, 0)
        assert await store.read_events("old", 0, 10) == []
        events = [artifact_event("old", 1, "more", append=True), status_event("old", 2, COMPLETED)]
        await store.apply(update("old", 4, *events))
        await store.apply(create("new", status_event("new", 1, SUBMITTED)))
        assert await store.read_events("old", 0, 10) == events
        assert (await loaded(store, "old"))[1:] == (4, 2)
        assert (await loaded(store, "new"))[1:] == (1, 1)
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SQLITE_SCHEMA_VERSION,)]
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'tasks_final'").fetchall() == [
            ("tasks_final",)
        ]

    reopened = SqliteStore(path)  # an up-to-date file opens as it is
    await reopened.open()
    try:
        assert await reopened.read_events("old", 0, 10) == events
    finally:
        await reopened.close()


async def test_sqlite_refuses_a_file_of_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    write_version_1_file(path, schema_version=SQLITE_SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="newer than this server"):
        await SqliteStore(path).open()
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]
    assert "seq" not in columns
