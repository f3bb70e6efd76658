"""PostgreSQL replicas coordinating through one database: two `PostgresStore`s on it are two replicas.

Covers the event and cancel notifications, runners and expired runs, event heads, the listener's
reconnection after its connection is killed, and the migration of a version 1 database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
import pytest

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import PostgresStore, TaskWrite, VersionConflictError
from a2a_grpc.store.base import LoadedTask, SharedStore, TaskEvent, WriteChain
from a2a_grpc.store.postgres_replicas import listener_name
from a2a_grpc.store.postgres_schema import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION

pytestmark = pytest.mark.filterwarnings("error")

OWNER = "alice"
SUBMITTED = a2a_pb2.TASK_STATE_SUBMITTED
WORKING = a2a_pb2.TASK_STATE_WORKING
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
WAIT_SECONDS = 10.0
LONG_LEASE = 3600.0


def status_event(task_id: str, seq: int, state: a2a_pb2.TaskState) -> TaskEvent:
    update = a2a_pb2.TaskStatusUpdateEvent(task_id=task_id, status=a2a_pb2.TaskStatus(state=state))
    return TaskEvent(seq, state, a2a_pb2.StreamResponse(status_update=update).SerializeToString())


def create(task_id: str, state: a2a_pb2.TaskState = SUBMITTED, *, with_event: bool = True) -> TaskWrite:
    task = a2a_pb2.Task(id=task_id, context_id="ctx", status=a2a_pb2.TaskStatus(state=state))
    events = [status_event(task_id, 1, state)] if with_event else []
    return TaskWrite(task_id, 1, owner=OWNER, task=task, events=events)


def set_status(task_id: str, version: int, state: a2a_pb2.TaskState, *seqs: int) -> TaskWrite:
    events = [status_event(task_id, seq, state) for seq in seqs]
    return TaskWrite(task_id, version, status=a2a_pb2.TaskStatus(state=state), events=events)


@dataclass
class Replica:
    """A listening store and what its callbacks received."""

    store: SharedStore
    events: asyncio.Queue[tuple[str, int]] = field(default_factory=asyncio.Queue)
    cancels: asyncio.Queue[None] = field(default_factory=asyncio.Queue)

    async def listen(self) -> None:
        self.store.listen(
            lambda task_id, seq: self.events.put_nowait((task_id, seq)), lambda: self.cancels.put_nowait(None)
        )
        await until(lambda: self.store.listening)

    async def next_event(self) -> tuple[str, int]:
        async with asyncio.timeout(WAIT_SECONDS):
            return await self.events.get()


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            if condition():
                return
            await asyncio.sleep(0.005)


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    first, second = PostgresStore(postgres_url, pool_size=2), PostgresStore(postgres_url, pool_size=2)
    await first.open()
    await second.open()
    yield first, second
    await asyncio.gather(first.close(), second.close())
    assert not [task for task in asyncio.all_tasks() if task.get_name().startswith("postgres-store")]


@pytest.fixture
async def replicas(stores: tuple[PostgresStore, PostgresStore]) -> tuple[Replica, Replica]:
    first, second = Replica(stores[0]), Replica(stores[1])
    await first.listen()
    await second.listen()
    return first, second


@pytest.fixture
async def db(postgres_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(postgres_url)
    yield conn
    await conn.close()


async def test_a_write_with_events_reaches_the_other_replica(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    await a.store.apply(create("t1"))
    assert await b.next_event() == ("t1", 1)
    await a.store.apply(set_status("t1", 2, WORKING, 2, 3))
    assert await b.next_event() == ("t1", 3)
    await a.store.apply(TaskWrite("t1", 3, history=[a2a_pb2.Message(message_id="m1")]))  # no event
    await b.store.apply(create("marker"))
    assert await a.next_event() == ("marker", 1)  # notifications arrive in commit order: none of A's own came
    assert a.events.empty()
    assert b.events.empty()
    assert [event.seq for event in await b.store.read_events("t1", 0, 10)] == [1, 2, 3]
    assert await b.store.read_events("t1", 1, 1) == [status_event("t1", 2, WORKING)]
    loaded = await b.store.load_task("t1", OWNER)
    assert loaded is not None
    assert (loaded.version, loaded.seq) == (3, 3)


async def test_a_refused_write_stores_and_announces_no_event(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    await a.store.apply(create("t1"))
    await a.store.apply(create("t2"))
    assert [await b.next_event(), await b.next_event()] == [("t1", 1), ("t2", 1)]
    batch = [  # queued together: one batch, redone with a savepoint per write when one fails
        a.store.apply(set_status("t1", 2, WORKING, 2)),
        a.store.apply(set_status("t2", 9, WORKING, 2)),
        a.store.apply(create("t3")),
    ]
    results = await asyncio.gather(*batch, return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], VersionConflictError)
    assert [await b.next_event(), await b.next_event()] == [("t1", 2), ("t3", 1)]
    await a.store.apply(create("marker"))
    assert await b.next_event() == ("marker", 1)
    assert [event.seq for event in await b.store.read_events("t2", 0, 10)] == [1]
    assert await b.store.event_heads(["t1", "t2", "t3"]) == {"t1": 2, "t2": 1, "t3": 1}


async def test_no_write_of_a_chain_applies_once_one_of_it_failed(stores: tuple[PostgresStore, PostgresStore]) -> None:
    """A replica's writes queued behind one refused because another replica wrote the task meanwhile: the next
    carries the version the other's write took, yet is refused too, in the same batch as in a later one."""
    a, b = stores
    await a.apply(create("t"))
    await b.apply(set_status("t", 2, a2a_pb2.TASK_STATE_FAILED, 2))  # the other replica's write
    chain = WriteChain()
    writes = [set_status("t", version, WORKING, version) for version in (2, 3, 4)]
    for write in writes:
        write.chain = chain
    batch = [a.apply(writes[0]), a.apply(writes[1])]  # queued together: one batch
    results = await asyncio.gather(*batch, return_exceptions=True)
    assert all(isinstance(result, VersionConflictError) for result in results)
    with pytest.raises(VersionConflictError):
        await a.apply(writes[2])
    loaded = await b.load_task("t", OWNER)
    assert loaded is not None and loaded.version == 2
    assert loaded.task.status.state == a2a_pb2.TASK_STATE_FAILED


async def test_runners_and_expired_runs(stores: tuple[PostgresStore, PostgresStore], db: asyncpg.Connection) -> None:
    a, b = stores
    await a.apply(create("t1"))
    await a.apply(create("t2"))
    await a.apply(set_status("t2", 2, COMPLETED, 2))  # settled: no runner
    await b.apply(create("t3", WORKING))
    assert await b.expired_runs(LONG_LEASE) == []  # every heartbeat is fresh
    await a.close()  # without release: its heartbeat row stays and ages
    await db.execute("UPDATE replicas SET heartbeat_at = now() - interval '1 minute' WHERE id = $1", a.replica_id)
    assert await b.expired_runs(30) == [("t1", OWNER)]
    await b.apply(TaskWrite("t1", 2, history=[a2a_pb2.Message(message_id="m1")]))  # B writes: B runs it
    assert await b.expired_runs(30) == []
    await b.apply(set_status("t1", 3, COMPLETED, 2))
    await b.heartbeat()
    await asyncio.sleep(0.05)
    assert await b.expired_runs(0.02) == [("t3", OWNER)]  # a lease shorter than the heartbeat's age
    await b.heartbeat()
    await b.release()  # no heartbeat row: every run of B has expired
    assert await b.expired_runs(LONG_LEASE) == [("t3", OWNER)]
    await b.heartbeat()
    assert await b.expired_runs(LONG_LEASE) == []


async def test_the_rows_of_replicas_gone_for_many_leases_are_dropped(
    stores: tuple[PostgresStore, PostgresStore], db: asyncpg.Connection
) -> None:
    a, b = stores
    await b.apply(create("t1", WORKING))
    await db.execute("INSERT INTO replicas (id, heartbeat_at) VALUES ('killed long ago', now() - interval '1 hour')")
    await a.close()  # without release: its row stays
    await db.execute("UPDATE replicas SET heartbeat_at = now() - interval '1 minute' WHERE id = $1", a.replica_id)
    assert await b.expired_runs(30) == []
    rows = {row["id"] for row in await db.fetch("SELECT id FROM replicas")}
    assert rows == {a.replica_id, b.replica_id}, "silent 2 leases: still a replica that may come back"
    assert await b.expired_runs(5) == []
    assert {row["id"] for row in await db.fetch("SELECT id FROM replicas")} == {b.replica_id}


async def test_a_cancel_request_reaches_the_runner_once(
    replicas: tuple[Replica, Replica], db: asyncpg.Connection
) -> None:
    a, b = replicas
    await a.store.apply(create("t1"))
    await a.store.apply(create("t2"))
    await a.store.apply(set_status("t2", 2, COMPLETED, 2))
    await b.store.request_cancel("t2")  # not running: no runner to tell
    await b.store.request_cancel("t1")
    await b.store.request_cancel("t1")  # a second request while one is pending
    async with asyncio.timeout(WAIT_SECONDS):
        await a.cancels.get()
    assert await b.store.take_cancel_requests() == []  # B does not run t1
    assert await a.store.take_cancel_requests() == ["t1"]
    assert await a.store.take_cancel_requests() == []
    assert await db.fetchval("SELECT count(*) FROM cancel_requests") == 0  # t2's stale request went too
    assert b.cancels.empty()


async def test_event_heads(stores: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = stores
    await a.apply(create("t1"))
    await a.apply(set_status("t1", 2, WORKING, 2, 3, 4))
    await a.apply(create("t2", with_event=False))
    assert await b.event_heads(["t1", "t2", "absent", "t\x00"]) == {"t1": 4, "t2": 0}
    assert await b.event_heads([]) == {}


async def test_the_listener_reconnects(replicas: tuple[Replica, Replica], db: asyncpg.Connection) -> None:
    a, b = replicas
    pid = await db.fetchval(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1", listener_name(a.store.replica_id)
    )
    assert pid is not None
    assert await db.fetchval("SELECT pg_terminate_backend($1)", pid)
    await until(lambda: not a.store.listening)
    await until(lambda: a.store.listening)
    assert b.store.listening
    await b.store.apply(create("t1"))
    assert await a.next_event() == ("t1", 1)
    await a.store.apply(create("t2"))
    await b.store.request_cancel("t2")
    async with asyncio.timeout(WAIT_SECONDS):
        await a.cancels.get()


_V1_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE tasks (
    id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    context_id TEXT COLLATE "C" NOT NULL,
    state INTEGER NOT NULL,
    status_ts_us BIGINT NOT NULL,
    version BIGINT NOT NULL,
    status BYTEA NOT NULL,
    metadata BYTEA,
    created_us BIGINT NOT NULL
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
"""
_V1_TASK = (
    "INSERT INTO tasks (id, owner, context_id, state, status_ts_us, version, status, metadata, created_us)"
    " VALUES ($1, $2, 'ctx', $3, 1, 4, $4, NULL, 1)"
)


async def test_a_version_1_database_migrates_on_open(postgres_url: str, db: asyncpg.Connection) -> None:
    await db.execute(_V1_SCHEMA)
    status = a2a_pb2.TaskStatus(state=WORKING)
    await db.execute(_V1_TASK, "t1", OWNER, WORKING, status.SerializeToString())
    await db.execute("INSERT INTO history (task_id, seq, blob) VALUES ('t1', 0, $1)", b"")
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    try:
        assert await db.fetch("SELECT version FROM schema_version") == [(POSTGRES_SCHEMA_VERSION,)]
        task = a2a_pb2.Task(id="t1", context_id="ctx", status=status, history=[a2a_pb2.Message()])
        assert await store.load_task("t1", OWNER) == LoadedTask(task, 4, 0)
        assert await store.expired_runs(LONG_LEASE) == [("t1", OWNER)]  # run by a version 1 server: no runner
        await store.apply(set_status("t1", 5, WORKING, 1))
        assert await store.expired_runs(LONG_LEASE) == []
        assert await store.event_heads(["t1"]) == {"t1": 1}
        assert await db.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'tasks_running'") == 1
        assert await db.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'tasks_final'") == 1
    finally:
        await store.close()
    reopened = PostgresStore(postgres_url, pool_size=2)
    await reopened.open()  # at the current version: nothing to migrate
    await reopened.close()
    assert await db.fetch("SELECT version FROM schema_version") == [(POSTGRES_SCHEMA_VERSION,)]
