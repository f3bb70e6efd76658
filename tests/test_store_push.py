"""Push-notification cursors and claims of every TaskStore, SQLite's and PostgreSQL's migration of configs
stored before them (schema version 2), and PostgreSQL replicas claiming at once."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import MemoryStore, PostgresStore, SqliteStore, TaskStore, postgres_push, sqlite_push
from a2a_grpc.store.base import PushTarget, StoreError, TaskEvent, TaskWrite
from a2a_grpc.store.postgres_schema import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from a2a_grpc.store.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

OWNER = "alice"
LONG_LEASE = 3600.0
TINY_LEASE = 0.05
WORKING = a2a_pb2.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def unopened_store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    """Synchronous, so that it can ask for the (async) `postgres_url` fixture only when needed."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "t.db")
    return PostgresStore(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=["sqlite", "postgresql"])
def unopened_durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    """A store whose writes are transactions (synchronous, as `unopened_store`)."""
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "t.db")
    return PostgresStore(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def durable_store(unopened_durable_store: TaskStore) -> AsyncIterator[TaskStore]:
    await unopened_durable_store.open()
    yield unopened_durable_store
    await unopened_durable_store.close()


@pytest.fixture
async def store(unopened_store: TaskStore) -> AsyncIterator[TaskStore]:
    await unopened_store.open()
    yield unopened_store
    await unopened_store.close()


def event(task_id: str, seq: int) -> TaskEvent:
    chunk = a2a_pb2.Artifact(artifact_id="a", parts=[a2a_pb2.Part(text=f"chunk {seq}")])
    update = a2a_pb2.TaskArtifactUpdateEvent(task_id=task_id, artifact=chunk, append=seq > 1)
    return TaskEvent(seq, 0, a2a_pb2.StreamResponse(artifact_update=update).SerializeToString())


class Tasks:
    """Creates tasks in a store and appends events to them, keeping their versions and last events."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.versions: dict[str, int] = {}
        self.seqs: dict[str, int] = {}

    async def create(self, task_id: str, events: int = 0) -> None:
        task = a2a_pb2.Task(id=task_id, context_id="ctx", status=a2a_pb2.TaskStatus(state=WORKING))
        await self.store.apply(TaskWrite(task_id, 1, owner=OWNER, task=task, events=self._next(task_id, events)))
        self.versions[task_id] = 1

    async def append(self, task_id: str, events: int = 1) -> None:
        self.versions[task_id] += 1
        await self.store.apply(TaskWrite(task_id, self.versions[task_id], events=self._next(task_id, events)))

    def _next(self, task_id: str, count: int) -> list[TaskEvent]:
        first = self.seqs.get(task_id, 0) + 1
        self.seqs[task_id] = first + count - 1
        return [event(task_id, seq) for seq in range(first, first + count)]


def config(
    task_id: str, config_id: str = "c1", url: str = "https://hook.example/a"
) -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url, token="secret")


def keys(targets: list[PushTarget]) -> set[tuple[str, str, int, int]]:
    return {(t.config.task_id, t.config.id, t.delivered, t.latest) for t in targets}


async def test_a_new_config_is_due_from_the_next_event_on(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=2)
    await store.put_push_config(OWNER, config("t1"))
    assert await store.claim_push_targets("a", LONG_LEASE, 10) == []
    await tasks.append("t1")
    assert await store.claim_push_targets("a", LONG_LEASE, 10) == [PushTarget(OWNER, config("t1"), 2, 3)]


async def test_delivered_0_makes_every_event_due(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=2)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    assert await store.claim_push_targets("a", LONG_LEASE, 10) == [PushTarget(OWNER, config("t1"), 0, 2)]


async def test_a_create_stores_its_push_config_due_from_the_first_event(store: TaskStore) -> None:
    completed = a2a_pb2.TaskStatus(state=COMPLETED)
    task = a2a_pb2.Task(id="t1", context_id="ctx", status=completed)
    events = [event("t1", 1), TaskEvent(2, COMPLETED, b"")]
    await store.apply(TaskWrite("t1", 1, owner=OWNER, task=task, events=events, push_config=config("t1")))
    assert await store.get_push_config(OWNER, "t1", "c1") == config("t1")
    assert await open_configs(store) == {("t1", "c1")}  # final, but not caught up
    assert await store.claim_push_targets("a", LONG_LEASE, 10) == [PushTarget(OWNER, config("t1"), 0, 2)]


async def test_a_create_that_fails_stores_neither_the_task_nor_its_push_config(durable_store: TaskStore) -> None:
    task = a2a_pb2.Task(id="t1", context_id="ctx", status=a2a_pb2.TaskStatus(state=WORKING))
    twice = [event("t1", 1), event("t1", 1)]  # the second breaks the event log's key, after the config is in
    with pytest.raises(StoreError):
        await durable_store.apply(TaskWrite("t1", 1, owner=OWNER, task=task, events=twice, push_config=config("t1")))
    assert await durable_store.get_push_config(OWNER, "t1", "c1") is None
    assert await durable_store.load_task("t1", OWNER) is None


async def test_claim_returns_the_due_configs_up_to_the_limit(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=3)
    await tasks.create("t2", events=1)
    await tasks.create("quiet")
    await store.put_push_config(OWNER, config("t1", "c1"), delivered=1)
    await store.put_push_config(OWNER, config("t1", "c2"), delivered=0)
    await store.put_push_config(OWNER, config("t2", "c1"), delivered=0)
    await store.put_push_config(OWNER, config("t2", "caught up"))
    await store.put_push_config(OWNER, config("quiet", "c1"), delivered=0)
    await store.put_push_config(OWNER, config("no such task"), delivered=0)

    first = await store.claim_push_targets("a", LONG_LEASE, 2)
    rest = await store.claim_push_targets("a", LONG_LEASE, 10)  # not the configs "a" holds already
    assert len(first) == 2
    assert keys(first) | keys(rest) == {("t1", "c1", 1, 3), ("t1", "c2", 0, 3), ("t2", "c1", 0, 1)}
    assert not keys(first) & keys(rest)


async def test_a_claim_of_named_tasks_takes_only_their_due_configs(store: TaskStore) -> None:
    tasks = Tasks(store)
    for task_id in ("t1", "t2", "t3"):
        await tasks.create(task_id, events=2)
        await store.put_push_config(OWNER, config(task_id, "c1"), delivered=0)
    await store.put_push_config(OWNER, config("t1", "c2"), delivered=0)
    await store.put_push_config(OWNER, config("t2", "caught up"))

    named = await store.claim_push_targets("a", LONG_LEASE, 10, ["t1", "t2", "no such task"])
    assert keys(named) == {("t1", "c1", 0, 2), ("t1", "c2", 0, 2), ("t2", "c1", 0, 2)}
    assert await store.claim_push_targets("b", LONG_LEASE, 10, ["t1", "t2"]) == []  # held by "a"
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10, ["t3", "t3"])) == {("t3", "c1", 0, 2)}
    assert await store.claim_push_targets("b", LONG_LEASE, 10, []) == []
    for task_id in ("t4", "t5"):
        await tasks.create(task_id, events=1)
        await store.put_push_config(OWNER, config(task_id), delivered=0)
    first = await store.claim_push_targets("c", LONG_LEASE, 1, ["t4", "t5"])  # up to the limit
    assert len(first) == 1
    assert len(await store.claim_push_targets("c", LONG_LEASE, 10, ["t4", "t5"])) == 1


async def test_a_claim_reads_the_first_due_events_when_asked(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=5)
    await store.put_push_config(OWNER, config("t1"), delivered=2)
    [target] = await store.claim_push_targets("a", LONG_LEASE, 10, ["t1"], events=2)
    # A store may leave the events to the courier's own read (PostgreSQL does): then it reads none.
    assert target.events in ((event("t1", 3), event("t1", 4)), ())
    assert (target.delivered, target.latest) == (2, 5)


async def test_release_with_a_cursor_acks_and_releases_in_one_write(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=3)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    await store.claim_push_targets("a", LONG_LEASE, 10)
    await store.release_push("t1", "c1", "b", delivered=3)  # not the holder: nothing changes
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []
    await store.release_push("t1", "c1", "a", delivered=2)
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10)) == {("t1", "c1", 2, 3)}
    await store.release_push("t1", "c1", "b", delivered=1)  # not backwards
    assert keys(await store.claim_push_targets("c", LONG_LEASE, 10)) == {("t1", "c1", 2, 3)}
    await store.release_push("t1", "c1", "c", delivered=3)
    assert await store.claim_push_targets("d", LONG_LEASE, 10) == []  # all delivered


async def test_a_held_config_goes_to_no_other_claimer(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    assert len(await store.claim_push_targets("a", LONG_LEASE, 10)) == 1
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []
    await tasks.append("t1")  # more events due do not free the config
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []


async def test_a_claim_that_lapses_goes_to_another_claimer(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    assert len(await store.claim_push_targets("a", TINY_LEASE, 10)) == 1
    await asyncio.sleep(3 * TINY_LEASE)
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == [PushTarget(OWNER, config("t1"), 0, 1)]
    assert not await store.ack_push("t1", "c1", 1, "a", LONG_LEASE)  # "a" lost it


async def test_ack_moves_the_cursor_forward_and_renews_the_claim(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=4)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    await store.claim_push_targets("a", TINY_LEASE, 10)
    assert await store.ack_push("t1", "c1", 2, "a", LONG_LEASE)
    assert await store.ack_push("t1", "c1", 1, "a", LONG_LEASE)  # not backwards
    assert not await store.ack_push("t1", "c1", 4, "b", LONG_LEASE)  # not the holder: nothing changes
    await asyncio.sleep(3 * TINY_LEASE)
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []  # renewed for LONG_LEASE
    await store.release_push("t1", "c1", "a")
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10)) == {("t1", "c1", 2, 4)}

    assert await store.ack_push("t1", "c1", 4, "b", LONG_LEASE)
    await store.release_push("t1", "c1", "b")
    assert await store.claim_push_targets("c", LONG_LEASE, 10) == []  # all delivered
    await tasks.append("t1")
    assert keys(await store.claim_push_targets("c", LONG_LEASE, 10)) == {("t1", "c1", 4, 5)}


async def test_release_frees_the_config_for_another_claimer(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    await store.put_push_config(OWNER, config("t1"), delivered=0)
    await store.claim_push_targets("a", LONG_LEASE, 10)
    await store.release_push("t1", "c1", "b")  # not the holder: nothing changes
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []
    await store.release_push("t1", "c1", "a")
    assert len(await store.claim_push_targets("b", LONG_LEASE, 10)) == 1
    assert not await store.ack_push("t1", "c1", 1, "a", LONG_LEASE)


async def test_a_replaced_config_keeps_its_cursor_and_claim(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=3)
    await store.put_push_config(OWNER, config("t1"), delivered=1)
    await store.claim_push_targets("a", LONG_LEASE, 10)
    replaced = config("t1", url="https://hook.example/b")
    await store.put_push_config(OWNER, replaced)
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []
    await store.release_push("t1", "c1", "a")
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == [PushTarget(OWNER, replaced, 1, 3)]
    await store.put_push_config(OWNER, replaced, delivered=0)  # an explicit cursor replaces the stored one
    await store.release_push("t1", "c1", "b")
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10)) == {("t1", "c1", 0, 3)}


async def test_a_deleted_config_is_never_claimed(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=2)
    await store.put_push_config(OWNER, config("t1", "gone"), delivered=0)
    await store.put_push_config(OWNER, config("t1", "held"), delivered=0)
    assert len(await store.claim_push_targets("a", LONG_LEASE, 10)) == 2
    assert await store.delete_push_config(OWNER, "t1", "gone")
    assert await store.delete_push_config(OWNER, "t1", "held")
    await tasks.append("t1")
    assert await store.claim_push_targets("b", LONG_LEASE, 10) == []
    assert not await store.ack_push("t1", "held", 3, "a", LONG_LEASE)
    await store.put_push_config(OWNER, config("t1", "held"))  # created anew: a new cursor, no claim
    await tasks.append("t1")
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10)) == {("t1", "held", 3, 4)}


async def test_the_owner_and_the_config_travel_intact(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    full = config("t1", "ç-1", url="https://hook.example/ü?x=1")
    full.tenant = "tenant-1"
    full.authentication.scheme = "Bearer"
    full.authentication.credentials = "s3cr3t"
    await store.put_push_config("bob ☃", full, delivered=0)
    [target] = await store.claim_push_targets("a", LONG_LEASE, 10)
    assert target == PushTarget("bob ☃", full, 0, 1)
    assert await store.get_push_config("bob ☃", "t1", "ç-1") == full


# -- a sweep reads only the configs that may still be due ------------------------------------------


async def finish(tasks: Tasks, task_id: str) -> None:
    """One more event: the task's COMPLETED status."""
    tasks.versions[task_id] += 1
    [done] = tasks._next(task_id, 1)
    status = a2a_pb2.TaskStatus(state=COMPLETED)
    update = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, status=status)
    final = TaskEvent(done.seq, COMPLETED, a2a_pb2.StreamResponse(status_update=update).SerializeToString())
    await tasks.store.apply(TaskWrite(task_id, tasks.versions[task_id], status=status, events=[final]))


async def open_configs(store: TaskStore) -> set[tuple[str, str]]:
    """The configs a sweep reads: all but those caught up with a final task (SQL: push_configs_open)."""
    if isinstance(store, MemoryStore):
        return {(task_id, config_id) for task_id in store._open for config_id in store._configs[task_id]}
    query = "SELECT task_id, config_id FROM push_configs WHERE {}".format
    if isinstance(store, SqliteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            return set(conn.execute(query("finished = 0")).fetchall())
    assert isinstance(store, PostgresStore)
    db = await asyncpg.connect(store.url)
    try:
        return {(row[0], row[1]) for row in await db.fetch(query("NOT finished"))}
    finally:
        await db.close()


async def test_configs_caught_up_with_a_final_task_leave_the_sweep(store: TaskStore) -> None:
    tasks = Tasks(store)
    for task_id in ("done", "acked", "behind", "late", "replaced"):
        await tasks.create(task_id, events=1)
        await finish(tasks, task_id)
    await tasks.create("running", events=1)
    for task_id in ("done", "acked", "behind", "replaced"):
        await store.put_push_config(OWNER, config(task_id), delivered=0)
    await store.put_push_config(OWNER, config("late"))  # its cursor starts at the final event
    await store.put_push_config(OWNER, config("running"))  # caught up, but more may come
    claimed = await store.claim_push_targets("a", LONG_LEASE, 10, ["done", "acked", "replaced"])
    assert len(claimed) == 3
    await store.release_push("done", "c1", "a", delivered=2)
    await store.release_push("replaced", "c1", "a", delivered=2)
    assert await store.ack_push("acked", "c1", 2, "a", LONG_LEASE)
    assert await open_configs(store) == {("behind", "c1"), ("running", "c1")}

    await store.put_push_config(OWNER, config("replaced"), delivered=0)  # notified of everything again
    await tasks.append("running")
    assert await open_configs(store) == {("behind", "c1"), ("running", "c1"), ("replaced", "c1")}
    assert keys(await store.claim_push_targets("b", LONG_LEASE, 10)) == {
        ("behind", "c1", 0, 2),
        ("replaced", "c1", 0, 2),
        ("running", "c1", 1, 2),
    }


async def test_sqlite_sweeps_through_the_index_of_open_configs(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "t.db")
    await store.open()
    await store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {sqlite_push._DUE}", (0, 10)).fetchall()
    assert "SCAN p USING INDEX push_configs_open" in [row[3] for row in plan]


async def test_postgres_sweeps_through_the_index_of_open_configs(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=1)
    await store.open()
    await store.close()
    db = await asyncpg.connect(postgres_url)
    try:
        await db.execute("SET enable_seqscan = off")  # on an empty table the planner would rather scan it
        plan = await db.fetch(f"EXPLAIN {postgres_push._CLAIM_ALL}", "a", 30.0, 10)
    finally:
        await db.close()
    assert "push_configs_open" in "\n".join(row[0] for row in plan)


# -- migration of configs stored by schema version 2 -----------------------------------------------

# The SQLite schema of version 2, as the store created it before push cursors.
SQLITE_V2_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state INTEGER NOT NULL,
    status_ts_us INTEGER NOT NULL,
    version INTEGER NOT NULL,
    status BLOB NOT NULL,
    metadata BLOB,
    created_us INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0
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
CREATE TABLE task_events (
    task_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state INTEGER NOT NULL,
    body BLOB NOT NULL,
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
_V2_TASK = "INSERT INTO tasks VALUES (?, ?, 'ctx', ?, 1, 3, ?, NULL, 1, ?)"
_V2_CONFIG = "INSERT INTO push_configs VALUES (?, ?, ?, ?)"


async def test_sqlite_migrates_version_2_configs_to_their_tasks_last_event(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    status = a2a_pb2.TaskStatus(state=WORKING).SerializeToString()
    with sqlite3.connect(path) as conn:
        conn.executescript(SQLITE_V2_SCHEMA)
        conn.execute(_V2_TASK, ("t1", OWNER, WORKING, status, 5))
        conn.executemany("INSERT INTO task_events VALUES (?, ?, ?, ?)", [astuple("t1", s) for s in range(1, 6)])
        conn.execute(_V2_CONFIG, ("t1", "c1", OWNER, config("t1").SerializeToString()))
        conn.execute(_V2_CONFIG, ("later", "c1", OWNER, config("later").SerializeToString()))
        done = a2a_pb2.TaskStatus(state=COMPLETED).SerializeToString()
        conn.execute(_V2_TASK, ("done", OWNER, COMPLETED, done, 2))
        conn.execute(_V2_CONFIG, ("done", "c1", OWNER, config("done").SerializeToString()))
    conn.close()
    store = SqliteStore(path)
    await store.open()
    try:
        await expect_migrated_configs(store)
        assert ("done", "c1") not in await open_configs(store)  # caught up with its final task
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SQLITE_SCHEMA_VERSION,)]
    conn.close()


def astuple(task_id: str, seq: int) -> tuple[str, int, int, bytes]:
    stored = event(task_id, seq)
    return task_id, stored.seq, stored.state, stored.body


async def expect_migrated_configs(store: TaskStore) -> None:
    """t1 stood at event 5 with config c1; config c1 of "later" was stored before its task."""
    assert await store.get_push_config(OWNER, "t1", "c1") == config("t1")
    assert await store.claim_push_targets("a", LONG_LEASE, 10) == []
    tasks = Tasks(store)
    tasks.versions["t1"], tasks.seqs["t1"] = 3, 5
    await tasks.append("t1")
    await tasks.create("later", events=1)
    assert keys(await store.claim_push_targets("a", LONG_LEASE, 10)) == {("t1", "c1", 5, 6), ("later", "c1", 0, 1)}


# The PostgreSQL schema of version 2, as the store created it before push cursors.
POSTGRES_V2_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (2);
CREATE TABLE tasks (
    id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    context_id TEXT COLLATE "C" NOT NULL,
    state INTEGER NOT NULL,
    status_ts_us BIGINT NOT NULL,
    version BIGINT NOT NULL,
    status BYTEA NOT NULL,
    metadata BYTEA,
    created_us BIGINT NOT NULL,
    seq BIGINT NOT NULL DEFAULT 0,
    runner TEXT COLLATE "C"
);
CREATE INDEX tasks_by_owner ON tasks (owner, status_ts_us DESC, id DESC);
CREATE INDEX tasks_by_context ON tasks (owner, context_id, status_ts_us DESC, id DESC);
CREATE TABLE history (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE artifact_chunks (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    artifact_id TEXT COLLATE "C" NOT NULL,
    append BOOLEAN NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE push_configs (
    task_id TEXT COLLATE "C" NOT NULL,
    config_id TEXT COLLATE "C" NOT NULL,
    owner TEXT COLLATE "C" NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, config_id)
);
CREATE TABLE task_events (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq BIGINT NOT NULL,
    state INTEGER NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE replicas (id TEXT COLLATE "C" PRIMARY KEY, heartbeat_at TIMESTAMPTZ NOT NULL);
CREATE TABLE cancel_requests (task_id TEXT COLLATE "C" PRIMARY KEY, requested_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE INDEX tasks_running ON tasks (runner) WHERE state IN (1, 2);
"""


async def test_postgres_migrates_version_2_configs_to_their_tasks_last_event(postgres_url: str) -> None:
    db = await asyncpg.connect(postgres_url)
    try:
        await db.execute(POSTGRES_V2_SCHEMA)
        status = a2a_pb2.TaskStatus(state=WORKING).SerializeToString()
        await db.execute(
            "INSERT INTO tasks VALUES ($1, $2, 'ctx', $3, 1, 3, $4, NULL, 1, 5, NULL)", "t1", OWNER, WORKING, status
        )
        await db.executemany("INSERT INTO task_events VALUES ($1, $2, $3, $4)", [astuple("t1", s) for s in range(1, 6)])
        done = a2a_pb2.TaskStatus(state=COMPLETED).SerializeToString()
        await db.execute(
            "INSERT INTO tasks VALUES ($1, $2, 'ctx', $3, 1, 3, $4, NULL, 1, 2, NULL)", "done", OWNER, COMPLETED, done
        )
        for task_id in ("t1", "later", "done"):
            blob = config(task_id).SerializeToString()
            await db.execute("INSERT INTO push_configs VALUES ($1, 'c1', $2, $3)", task_id, OWNER, blob)
        store = PostgresStore(postgres_url, pool_size=2)
        await store.open()
        try:
            await expect_migrated_configs(store)
            assert ("done", "c1") not in await open_configs(store)  # caught up with its final task
        finally:
            await store.close()
        assert await db.fetch("SELECT version FROM schema_version") == [(POSTGRES_SCHEMA_VERSION,)]
    finally:
        await db.close()


# -- migration from schema version 4 (before `finished`) -------------------------------------------

DOWN_TO_VERSION_4 = (
    "DROP INDEX push_configs_open",
    "ALTER TABLE push_configs DROP COLUMN finished",
    "UPDATE schema_version SET version = 4",
)


async def expect_cursors_kept_through_version_5(store: TaskStore) -> None:
    """Before the migration: t1 at event 5, its config c1 delivered up to event 2; "done" final and caught up."""
    assert keys(await store.claim_push_targets("a", LONG_LEASE, 10)) == {("t1", "c1", 2, 5)}
    assert await open_configs(store) == {("t1", "c1")}


async def version_4_tasks(store: TaskStore) -> None:
    tasks = Tasks(store)
    await tasks.create("t1", events=5)
    await store.put_push_config(OWNER, config("t1"), delivered=2)
    await tasks.create("done", events=1)
    await finish(tasks, "done")
    await store.put_push_config(OWNER, config("done"), delivered=0)
    await store.claim_push_targets("a", LONG_LEASE, 10, ["done"])
    await store.release_push("done", "c1", "a", delivered=2)


async def test_sqlite_migrates_version_4_configs_keeping_their_cursors(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    store = SqliteStore(path)
    await store.open()
    await version_4_tasks(store)
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in DOWN_TO_VERSION_4:
            conn.execute(statement)
    store = SqliteStore(path)
    await store.open()
    try:
        await expect_cursors_kept_through_version_5(store)
    finally:
        await store.close()


async def test_postgres_migrates_version_4_configs_keeping_their_cursors(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    await version_4_tasks(store)
    await store.close()
    db = await asyncpg.connect(postgres_url)
    try:
        for statement in DOWN_TO_VERSION_4:
            await db.execute(statement)
    finally:
        await db.close()
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    try:
        await expect_cursors_kept_through_version_5(store)
    finally:
        await store.close()


# -- PostgreSQL: replicas claiming at once ---------------------------------------------------------


async def test_postgres_replicas_claiming_at_once_never_share_a_config(postgres_url: str) -> None:
    first, second = PostgresStore(postgres_url, pool_size=4), PostgresStore(postgres_url, pool_size=4)
    await first.open()
    await second.open()
    try:
        tasks = Tasks(first)
        for i in range(30):
            await tasks.create(f"t{i}", events=1)
            for c in range(5):
                await first.put_push_config(OWNER, config(f"t{i}", f"c{c}"), delivered=0)
        claims = [
            store.claim_push_targets(f"{name}{n}", LONG_LEASE, 50)
            for n in range(2)
            for name, store in (("first", first), ("second", second))
        ]
        claimed = [{(t.config.task_id, t.config.id) for t in targets} for targets in await asyncio.gather(*claims)]
        assert sum(map(len, claimed)) == len(set[tuple[str, str]]().union(*claimed)) == 150
    finally:
        await asyncio.gather(first.close(), second.close())
