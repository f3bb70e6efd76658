"""Reads never starve the store (issue 31, item 2). SQLite: listings take at most HEAVY_READS reader threads at
once, so a GetTask always finds a reader and the readiness check (`ping`, on a thread of its own) is never held
behind reads, however many listings are under way or how slow each one is. PostgreSQL: listings take at most
half the pool, so ping always finds a connection.

A SQLite listing is made slow here by holding it until the test lets it go (it waits on a threading.Event inside
the store's listing read, on the reader thread); a PostgreSQL one by a lock another connection holds on the tasks
table. The ordering is then certain, not a race against a clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
import grpc
import pytest
from conftest import V1, send_request
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_helpers import make_stub
from test_stores import OWNER, WORKING, query, status

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import PostgresStore, SqliteStore, TaskWrite, sqlite_reads
from a2a_grpc.store.sqlite import HEAVY_READS, READERS

LISTINGS = READERS + 3  # more listings than there are readers
WAIT_SECONDS = 10.0  # only ever reached when the store holds a read behind the listings (the old code)


class HeldListings:
    """The store's listing read, held on its reader thread until `release`; counts the listings running."""

    def __init__(self, listing: Callable[..., Any]) -> None:
        self._listing = listing
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.running = 0
        self.most_running = 0
        self.started = threading.Semaphore(0)

    def __call__(self, *args: Any) -> Any:
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        self.started.release()
        try:
            self._release.wait()
            return self._listing(*args)
        finally:
            with self._lock:
                self.running -= 1

    def release(self) -> None:
        self._release.set()

    async def wait_started(self) -> None:
        """Until one more listing is held on its reader thread."""
        assert await asyncio.to_thread(self.started.acquire, True, WAIT_SECONDS)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "tasks.db")
    await opened.open()
    task = a2a_pb2.Task(id="t1", context_id="c1", status=status(WORKING, 1_000))
    await opened.apply(TaskWrite("t1", 1, owner=OWNER, task=task))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldListings:
    listings = HeldListings(sqlite_reads.list_tasks)
    monkeypatch.setattr(sqlite_reads, "list_tasks", listings)
    return listings


async def test_get_task_and_ping_answer_while_listings_hold_the_readers(store: SqliteStore, held: HeldListings) -> None:
    listings = [asyncio.create_task(store.list_tasks(query())) for _ in range(LISTINGS)]
    await held.wait_started()
    try:
        got = await asyncio.wait_for(store.get_task("t1", OWNER), WAIT_SECONDS)
        await asyncio.wait_for(store.ping(), WAIT_SECONDS)
        assert got is not None and got.id == "t1"
        assert not any(listing.done() for listing in listings)  # answered while every listing was held
        await held.wait_started()
        assert held.running == HEAVY_READS
    finally:
        held.release()
        pages = await asyncio.gather(*listings)
    assert [page.total_size for page in pages] == [1] * LISTINGS
    assert held.most_running == HEAVY_READS


async def test_a_listing_whose_caller_gave_up_keeps_its_turn_until_its_read_ends(
    store: SqliteStore, held: HeldListings
) -> None:
    """A caller's deadline ends its wait, not the read on the thread: the turn comes back only when the read
    ends, so listings abandoned by their callers never take the point reads' reader."""
    abandoned = [asyncio.create_task(store.list_tasks(query())) for _ in range(LISTINGS)]
    await held.wait_started()
    for listing in abandoned:
        listing.cancel()
    await asyncio.gather(*abandoned, return_exceptions=True)
    later = [asyncio.create_task(store.list_tasks(query())) for _ in range(LISTINGS)]
    try:
        got = await asyncio.wait_for(store.get_task("t1", OWNER), WAIT_SECONDS)
        assert got is not None
        assert held.running <= HEAVY_READS and not any(listing.done() for listing in later)
    finally:
        held.release()
        await asyncio.gather(*later)
    assert held.most_running == HEAVY_READS


class CountedPings(SqliteStore):
    """The SQLite store, its readiness checks counted: `pinged` is set by each one answered."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.pinged = asyncio.Event()

    async def ping(self) -> None:
        await super().ping()
        self.pinged.set()


async def test_a_server_answers_get_task_and_stays_ready_while_listings_hold_the_readers(
    tmp_path: Path, held: HeldListings
) -> None:
    """Over gRPC: with more ListTasks in flight than the store has readers, each held on its reader, a GetTask
    is answered, the server's own readiness checks (every 0.05 s) keep answering, and health says SERVING."""
    store = CountedPings(tmp_path / "tasks.db")
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", readiness_interval_seconds=0.05, readiness_timeout_seconds=0.5
    )
    server = A2AServer(settings, store=store)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            task = (await stub.SendMessage(send_request(), metadata=V1, timeout=WAIT_SECONDS)).task
            request = a2a_pb2.ListTasksRequest(status=a2a_pb2.TASK_STATE_COMPLETED)
            listings = [stub.ListTasks(request, metadata=V1, timeout=WAIT_SECONDS * 2) for _ in range(LISTINGS)]
            await held.wait_started()
            try:
                got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1, timeout=WAIT_SECONDS)
                for _ in range(2):  # one check that began after the listings were held, at least
                    store.pinged.clear()
                    await asyncio.wait_for(store.pinged.wait(), WAIT_SECONDS)
                health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
                assert got.id == task.id and health.status == health_pb2.HealthCheckResponse.SERVING
                assert not any(listing.done() for listing in listings)
            finally:
                held.release()
                pages = await asyncio.gather(*listings)
        assert [page.total_size for page in pages] == [1] * LISTINGS
    finally:
        await server.stop(0)


PG_POOL = 4  # listings at once: 2


async def listings_waiting_on_the_lock(db: asyncpg.Connection, count: int) -> int:
    """Once at least `count` queries wait for the lock on the tasks table (polled): how many do."""
    for _ in range(round(WAIT_SECONDS / 0.02)):
        waiting: int = await db.fetchval(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'tasks'::regclass"
        )
        if waiting >= count:
            return waiting
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} listings came to the lock")


async def test_postgres_listings_leave_the_pool_a_connection_for_ping(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=PG_POOL)
    await store.open()
    locker = await asyncpg.connect(postgres_url)
    held = locker.transaction()
    await held.start()
    await locker.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
    listings = [asyncio.create_task(store.list_tasks(query())) for _ in range(LISTINGS)]
    try:
        await listings_waiting_on_the_lock(locker, PG_POOL // 2)
        await asyncio.wait_for(store.ping(), WAIT_SECONDS)
        assert await listings_waiting_on_the_lock(locker, 1) == PG_POOL // 2
        assert not any(listing.done() for listing in listings)
    finally:
        await held.rollback()
        await asyncio.gather(*listings)
        await locker.close()
        await store.close()
