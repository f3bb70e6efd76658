"""A shared durable store: PostgreSQL through an asyncpg connection pool.

Several servers (replicas) may share one database: every write checks the stored version in the
database, so a replica writing a task another replica changed gets `VersionConflictError`.

Writes are serialized on the event loop and queued to one worker task, which applies everything queued
in ONE transaction (group commit) and resolves the batch's futures once it committed; so the writes of a
task apply in call order. Only a batch in which some write fails is redone with a savepoint per write, so
that failure is that write's alone. A task read is one SQL statement (its history and artifact chunks
as arrays), which PostgreSQL runs on one snapshot; ListTasks counts and pages in one REPEATABLE READ
transaction.

Replicas coordinate through the database too (`SharedStore`): the write leaving a task running names
its replica as the runner, replicas keep heartbeat rows, and they hear of each other's events and of
cancel requests through LISTEN/NOTIFY (postgres_replicas). The schema is in postgres_schema, the writes in
postgres_writes, push configs in postgres_push (outside the write queue), task retention in postgres_retention.

Text columns use the "C" collation, so ids order by code point as in the other stores. PostgreSQL text
cannot hold NUL: a write with NUL in a stored string fails with ValueError, and a read asking for one
finds nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.settings.defaults import STORE_POOL_SIZE
from a2a_grpc.store import postgres_push as push
from a2a_grpc.store import postgres_replicas as replicas
from a2a_grpc.store import postgres_retention as retention
from a2a_grpc.store._codec import decode_config_cursor, decode_task_cursor, encode_task_cursor, now_us
from a2a_grpc.store.base import (
    EVENT_PAGE_BYTES,
    PRUNE_BATCH_EVENTS,
    REMOVE_BATCH_TASKS,
    CommitObserver,
    InvalidPageTokenError,
    LoadedTask,
    PushTarget,
    StoreError,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskWrite,
    check_kept,
    tasks_within,
)
from a2a_grpc.store.postgres_common import address_of, as_store_error, has_nul, import_asyncpg, row_count, translated
from a2a_grpc.store.postgres_counts import apply_changes, count_tasks
from a2a_grpc.store.postgres_schema import RUNNING_SQL, TERMINAL_SQL, create_schema
from a2a_grpc.store.postgres_writes import (
    PreparedWrite,
    apply_write,
    chain_failed,
    commit_one_by_one,
    merge_chunks,
    prepare,
)

if TYPE_CHECKING:
    import asyncpg

# A statement, lock wait or idle transaction past this fails (StoreError), not holding the writes behind it
STATEMENT_SECONDS: Final = 30.0
POOL_SIZE: Final = STORE_POOL_SIZE  # connections per process, by default (`--store-pool-size`)
_SESSION_SETTINGS: Final = {"lock_timeout": "30s", "idle_in_transaction_session_timeout": "60s"}

_TASK_COLUMNS: Final = "t.id, t.context_id, t.status, t.metadata, t.status_ts_us, t.version, t.seq"
_HISTORY_ARRAY: Final = "ARRAY(SELECT h.blob FROM history h WHERE h.task_id = t.id ORDER BY h.seq)"
_CHUNK_ARRAYS: Final = (
    "ARRAY(SELECT c.append FROM artifact_chunks c WHERE c.task_id = t.id ORDER BY c.seq),"
    " ARRAY(SELECT c.blob FROM artifact_chunks c WHERE c.task_id = t.id ORDER BY c.seq)"
)
# A listed task's stored bytes (octet_length reads no TOASTed content): its history, with its artifacts.
_HISTORY_BYTES: Final = "(SELECT COALESCE(SUM(octet_length(h.blob)), 0) FROM history h WHERE h.task_id = t.id)"
_CHUNK_BYTES: Final = "(SELECT COALESCE(SUM(octet_length(c.blob)), 0) FROM artifact_chunks c WHERE c.task_id = t.id)"
_GET_TASK: Final = (
    f"SELECT {_TASK_COLUMNS}, {_HISTORY_ARRAY}, {_CHUNK_ARRAYS} FROM tasks t WHERE t.id = $1 AND t.owner = $2"
)
_RUNNING_TASKS: Final = f"SELECT id, owner FROM tasks WHERE state IN {RUNNING_SQL}"
# A page of the log with the task's last event number, in one statement (one snapshot): a row of NULL events
# when the page is empty. `before` is the bytes of the page's bodies ahead of each event.
_READ_EVENTS: Final = """
SELECT t.seq AS last, e.seq, e.state, e.body
FROM tasks t LEFT JOIN LATERAL (
    SELECT seq, state, body, sum(octet_length(body)) OVER (ORDER BY seq) - octet_length(body) AS before
    FROM task_events WHERE task_id = t.id AND seq > $2 ORDER BY seq LIMIT $3
) e ON e.before < $4
WHERE t.id = $1 ORDER BY e.seq
"""
_PRUNE_EVENTS: Final = (
    "DELETE FROM task_events WHERE (task_id, seq) IN (SELECT e.task_id, e.seq FROM tasks t"
    f" JOIN task_events e ON e.task_id = t.id WHERE t.state IN {TERMINAL_SQL} AND t.status_ts_us < $1 LIMIT $2)"
)

_Job: TypeAlias = tuple[PreparedWrite, asyncio.Future[None]]


@dataclass(slots=True)
class _Open:
    """What exists while the store is open: the pool, the write queue with its worker, the listener, the listings'
    bound (half the pool at most: ping, point reads and writes always find a connection)."""

    pool: asyncpg.Pool
    listings: asyncio.Semaphore
    queue: asyncio.Queue[_Job | None] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    listener: replicas.Listener | None = None


class PostgresStore:
    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.pool_size = pool_size
        self.replica_id = new_id()
        self.shared = self  # several replicas may use it at once: it is a SharedStore
        self.commit_count = 0  # transactions committed by the write worker: one per batch of writes
        self.on_commit: CommitObserver | None = None
        self._open: _Open | None = None

    async def open(self) -> None:
        """Connect, create or migrate the schema (one replica at a time), and insert this replica's heartbeat."""
        if self._open is not None:
            return
        asyncpg = import_asyncpg()
        pool = asyncpg.create_pool(
            self.url,
            min_size=0,  # no floor to restore: asyncpg would log a traceback a second while the database is down
            max_size=self.pool_size,
            command_timeout=STATEMENT_SECONDS,
            server_settings=_SESSION_SETTINGS,
        )
        try:
            with translated(f"cannot open the task store at {address_of(self.url)}"):
                await pool
                async with pool.acquire() as conn:  # the first connection: where a bad URL or address shows
                    await create_schema(conn)
                await replicas.heartbeat(pool, self.replica_id)
        except (ValueError, TypeError, OverflowError):  # the message may quote a piece of the password
            await pool.close()
            raise StoreError(
                "cannot open the task store: not a valid PostgreSQL URL (percent-encode special characters)"
            ) from None
        except BaseException:
            await pool.close()
            raise
        opened = _Open(pool, asyncio.Semaphore(max(1, self.pool_size // 2)))
        opened.worker = asyncio.create_task(self._write_worker(opened), name="postgres-store-writer")
        self._open = opened

    async def close(self) -> None:
        """Stop listening, commit every queued write, then close the pool."""
        opened, self._open = self._open, None
        if opened is None:
            return
        opened.queue.put_nowait(None)  # queued after every pending write, which all commit first
        try:
            if opened.listener is not None:
                await opened.listener.close()
            if opened.worker is not None:
                await asyncio.shield(opened.worker)  # a caller giving up must not strand queued writes
        finally:
            await opened.pool.close()

    async def ping(self) -> None:
        """`SELECT 1` through the pool: a pooled connection, or a new one when the database restarted."""
        pool = self._pool()
        with translated("the task store is unreachable"):
            await pool.fetchval("SELECT 1")

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._open is None:
            future.set_exception(StoreError("the store is not open"))
            return future
        try:
            prepared = prepare(write, self.replica_id)
        except (ValueError, TypeError) as exc:
            future.set_exception(exc)
            return future
        self._open.queue.put_nowait((prepared, future))
        return future

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        loaded = await self.load_task(task_id, owner)
        return None if loaded is None else loaded.task

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        """The version and event number are those of the last committed write; queued writes do not count."""
        pool = self._pool()
        if has_nul(task_id, owner):
            return None
        with translated():
            row = await pool.fetchrow(_GET_TASK, task_id, owner)
        if row is None:
            return None
        return LoadedTask(_task_from_row(row, include_artifacts=True), int(row["version"]), int(row["seq"]))

    async def read_events(
        self, task_id: str, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[TaskEvent]:
        pool = self._pool()
        if has_nul(task_id):
            return []
        with translated():
            rows = await pool.fetch(_READ_EVENTS, task_id, after, limit, max_bytes)
        page = [
            TaskEvent(int(row["seq"]), int(row["state"]), bytes(row["body"])) for row in rows if row["seq"] is not None
        ]
        if rows:
            check_kept(task_id, after, page, int(rows[0]["last"]))
        return page

    async def prune_events(self, older_than_seconds: float, batch: int = PRUNE_BATCH_EVENTS) -> int:
        """A batch a statement: each well inside the statement timeout, however large the backlog."""
        pool = self._pool()
        cutoff = now_us() - round(older_than_seconds * 1_000_000)
        pruned = 0
        while True:
            with translated():
                deleted = row_count(await pool.execute(_PRUNE_EVENTS, cutoff, batch))
            pruned += deleted
            if deleted < batch:
                return pruned

    async def remove_final_tasks(self, older_than_seconds: float, batch: int = REMOVE_BATCH_TASKS) -> int:
        cutoff = now_us() - round(older_than_seconds * 1_000_000)
        return await retention.remove_final_tasks(self._pool(), self.replica_id, cutoff, batch)

    async def running_tasks(self) -> list[tuple[str, str]]:
        pool = self._pool()
        with translated():
            rows = await pool.fetch(_RUNNING_TASKS)
        return [(str(row["id"]), str(row["owner"])) for row in rows]

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        opened = self._opened()
        cursor = decode_task_cursor(query.page_token) if query.page_token else None
        if cursor is not None and has_nul(cursor[1]):
            raise InvalidPageTokenError("invalid page token")  # no stored id holds NUL: not our token
        if has_nul(query.owner, query.context_id):
            return TaskPage()
        with translated():
            async with (
                opened.listings,
                opened.pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                return await _list_tasks(conn, query, cursor)

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None = None
    ) -> None:
        await push.put_config(self._pool(), push.config_row(owner, config, delivered))

    async def get_push_config(
        self, owner: str, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig | None:
        return await push.get_config(self._pool(), owner, task_id, config_id)

    async def list_push_configs(
        self, owner: str, task_id: str, page_size: int, page_token: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        after = decode_config_cursor(page_token) if page_token else None
        return await push.list_configs(self._pool(), owner, task_id, page_size, after)

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> bool:
        return await push.delete_config(self._pool(), owner, task_id, config_id)

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        """Reads no events with the targets: a courier reads them on a pooled connection of its own."""
        return await push.claim(self._pool(), claimer, lease_seconds, limit, task_ids)

    async def ack_push(self, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
        return await push.ack(self._pool(), task_id, config_id, seq, claimer, lease_seconds)

    async def release_push(self, task_id: str, config_id: str, claimer: str, delivered: int | None = None) -> None:
        await push.release(self._pool(), task_id, config_id, claimer, delivered)

    # -- SharedStore: coordination between replicas (postgres_replicas) ---------------------------

    @property
    def listening(self) -> bool:
        return self._open is not None and self._open.listener is not None and self._open.listener.listening

    def listen(self, on_event: Callable[[str, int], None], on_cancel: Callable[[], None]) -> None:
        opened = self._opened()
        if opened.listener is not None:
            raise StoreError("the store is already listening")
        opened.listener = replicas.Listener(self.url, self.replica_id, on_event, on_cancel)

    async def heartbeat(self) -> None:
        await replicas.heartbeat(self._pool(), self.replica_id)

    async def expired_runs(self, lease_seconds: float) -> list[tuple[str, str]]:
        return await replicas.expired_runs(self._pool(), lease_seconds, self.replica_id)

    async def event_heads(self, task_ids: Sequence[str]) -> dict[str, int]:
        return await replicas.event_heads(self._pool(), task_ids)

    async def request_cancel(self, task_id: str) -> None:
        await replicas.request_cancel(self._pool(), task_id)

    async def take_cancel_requests(self) -> list[str]:
        return await replicas.take_cancel_requests(self._pool(), self.replica_id)

    async def release(self) -> None:
        await replicas.release(self._pool(), self.replica_id)

    def _opened(self) -> _Open:
        if self._open is None:
            raise StoreError("the store is not open")
        return self._open

    def _pool(self) -> asyncpg.Pool:
        return self._opened().pool

    # -- the write worker -------------------------------------------------------------------------

    async def _write_worker(self, opened: _Open) -> None:
        while True:
            jobs, stop = await _take_batch(opened.queue)
            if jobs:
                writes = [write for write, _ in jobs]
                errors = await self._commit(opened.pool, writes)
                for write, error in zip(writes, errors, strict=True):
                    if error is not None:
                        chain_failed(write)
                _resolve([future for _, future in jobs], errors)
            if stop:
                return

    async def _commit(self, pool: asyncpg.Pool, writes: list[PreparedWrite]) -> list[BaseException | None]:
        """Apply the batch in one transaction; the first try runs the writes back to back."""
        started = time.perf_counter()
        try:
            async with pool.acquire() as conn:
                try:
                    async with conn.transaction():
                        changes = [change for write in writes for change in await apply_write(conn, write)]
                        await apply_changes(conn, changes)
                    errors: list[BaseException | None] = [None] * len(writes)
                except Exception as exc:
                    if len(writes) == 1:
                        return [as_store_error(exc)]
                    errors = await commit_one_by_one(conn, writes)
        except Exception as exc:  # the connection or the commit failed: so does every write of the batch
            error = as_store_error(exc, "commit failed")
            return [error] * len(writes)
        self.commit_count += 1
        if self.on_commit is not None:
            self.on_commit(time.perf_counter() - started, len(writes))
        return errors


async def _take_batch(queue: asyncio.Queue[_Job | None]) -> tuple[list[_Job], bool]:
    """Wait for one job, then take every job already queued; True when the stop marker came."""
    jobs: list[_Job] = []
    item = await queue.get()
    while item is not None:
        jobs.append(item)
        if queue.empty():
            return jobs, False
        item = queue.get_nowait()
    return jobs, True


def _resolve(futures: list[asyncio.Future[None]], errors: list[BaseException | None]) -> None:
    for future, error in zip(futures, errors, strict=True):
        if future.done():  # cancelled by the caller
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


# -- reads ----------------------------------------------------------------------------------------


async def _list_tasks(conn: asyncpg.Connection, query: TaskQuery, cursor: tuple[int, str] | None) -> TaskPage:
    where, params = _task_filters(query)
    total = await count_tasks(conn, query, where, params)
    if cursor is not None:
        where += f" AND (t.status_ts_us, t.id) < (${len(params) + 1}, ${len(params) + 2})"
        params += cursor
    size = f"octet_length(t.status) + COALESCE(octet_length(t.metadata), 0) + {_HISTORY_BYTES}" + (
        f" + {_CHUNK_BYTES}" if query.include_artifacts else ""
    )
    sql = (
        f"SELECT t.id, t.status_ts_us, {size} FROM tasks t WHERE {where}"
        f" ORDER BY t.status_ts_us DESC, t.id DESC LIMIT ${len(params) + 1}"
    )
    rows = await conn.fetch(sql, *params, query.page_size + 1)
    sizes = tasks_within((row[2] for row in rows), query.page_size, query.max_bytes)
    page = rows[: len(sizes) if query.max_bytes is not None else query.page_size]
    token = encode_task_cursor(page[-1]["status_ts_us"], page[-1]["id"]) if len(rows) > len(page) and page else ""
    if not page:
        return TaskPage(next_page_token=token, total_size=total)
    chunks = f", {_CHUNK_ARRAYS}" if query.include_artifacts else ""
    loaded = await conn.fetch(
        f"SELECT {_TASK_COLUMNS}, {_HISTORY_ARRAY}{chunks} FROM tasks t WHERE t.id = ANY($1::text[])",
        [row["id"] for row in page],
    )
    by_id = {row["id"]: row for row in loaded}  # read in the same snapshot: every task of the page is there
    tasks = [_task_from_row(by_id[row["id"]], query.include_artifacts) for row in page]
    return TaskPage(tasks=tasks, next_page_token=token, total_size=total, sizes=sizes)


def _task_filters(query: TaskQuery) -> tuple[str, list[object]]:
    clauses = ["t.owner = $1"]
    params: list[object] = [query.owner]
    for column, value in (
        ("t.context_id = ", query.context_id or None),
        ("t.state = ", query.state or None),
        ("t.status_ts_us >= ", query.status_after_us),
    ):
        if value is not None:
            params.append(value)
            clauses.append(f"{column}${len(params)}")
    return " AND ".join(clauses), params


def _task_from_row(row: asyncpg.Record, include_artifacts: bool) -> a2a_pb2.Task:
    """A task from a row of _TASK_COLUMNS, its history array, then (with artifacts) its chunk arrays."""
    task_id, context_id, status, metadata, _, _, _, history, *chunks = row
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.MergeFromString(status)
    if metadata is not None:
        task.metadata.MergeFromString(metadata)
    for blob in history:
        task.history.add().MergeFromString(blob)
    if include_artifacts:
        appends, blobs = chunks
        task.artifacts.extend(merge_chunks(zip(appends, blobs, strict=True)))
    return task
