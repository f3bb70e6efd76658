"""A shared durable store: PostgreSQL through an asyncpg connection pool.

Several servers (replicas) may share one database: every write checks the stored version in the
database, so a replica writing a task another replica changed gets `VersionConflictError`.

Writes are serialized on the event loop and queued to one worker task, which applies everything queued
in ONE transaction (group commit) and resolves the batch's futures once it committed; so the writes of a
task apply in call order. Only a batch in which some write fails is redone with a savepoint per write, so
that failure is that write's alone. A task read is one SQL statement (its history and artifact chunks
as arrays), which PostgreSQL runs on one snapshot; ListTasks counts and pages in one REPEATABLE READ
transaction.

Text columns use the "C" collation, so ids order by code point as in the other stores. PostgreSQL text
cannot hold NUL: a write with NUL in a stored string fails with ValueError, and a read asking for one
finds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RUNNING_STATES, TERMINAL_STATES
from a2a_grpc.store._codec import (
    decode_config_cursor,
    decode_task_cursor,
    encode_config_cursor,
    encode_task_cursor,
    now_us,
    status_ts_us,
)
from a2a_grpc.store.base import (
    InvalidPageTokenError,
    StorageFullError,
    StoreError,
    TaskPage,
    TaskQuery,
    TaskWrite,
    VersionConflictError,
)

if TYPE_CHECKING:
    import asyncpg

SCHEMA_VERSION: Final = 1
# The key of the advisory lock that makes one replica at a time create or migrate the schema.
SCHEMA_LOCK_KEY: Final = 0x613261_67727063
# A statement, a lock wait or an idle transaction that takes longer fails (StoreError) instead of holding
# every write queued behind it: a stuck replica or a half-open connection must not freeze the store.
STATEMENT_SECONDS: Final = 30.0
_SESSION_SETTINGS: Final = {"lock_timeout": "30s", "idle_in_transaction_session_timeout": "60s"}

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
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
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, status_ts_us DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (owner, context_id, status_ts_us DESC, id DESC);
CREATE TABLE IF NOT EXISTS history (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS artifact_chunks (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    artifact_id TEXT COLLATE "C" NOT NULL,
    append BOOLEAN NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT COLLATE "C" NOT NULL,
    config_id TEXT COLLATE "C" NOT NULL,
    owner TEXT COLLATE "C" NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, config_id)
);
"""
_LOCK_SCHEMA: Final = "SELECT pg_advisory_xact_lock($1)"
_SCHEMA_VERSION: Final = "SELECT MAX(version) FROM schema_version"
_INSERT_SCHEMA_VERSION: Final = "INSERT INTO schema_version (version) VALUES ($1)"

_INSERT_TASK: Final = (
    "INSERT INTO tasks (id, owner, context_id, state, status_ts_us, version, status, metadata, created_us)"
    " VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8) ON CONFLICT (id) DO NOTHING"
)
_UPDATE_VERSION: Final = "UPDATE tasks SET version = $3 WHERE id = $1 AND version = $2"
_UPDATE_STATUS: Final = (
    "UPDATE tasks SET version = $3, state = $4, status_ts_us = $5, status = $6 WHERE id = $1 AND version = $2"
)
# Appends after the task's last row; the UPDATE before it holds the task's row lock, so no other
# transaction appends to the same task in between.
_APPEND_HISTORY: Final = """
INSERT INTO history (task_id, seq, blob)
SELECT $1, last.seq + item.n, item.blob
FROM (SELECT COALESCE(MAX(seq), -1) AS seq FROM history WHERE task_id = $1) AS last,
     unnest($2::bytea[]) WITH ORDINALITY AS item (blob, n)
"""
_APPEND_CHUNKS: Final = """
INSERT INTO artifact_chunks (task_id, seq, artifact_id, append, blob)
SELECT $1, last.seq + item.n, item.artifact_id, item.append, item.blob
FROM (SELECT COALESCE(MAX(seq), -1) AS seq FROM artifact_chunks WHERE task_id = $1) AS last,
     unnest($2::text[], $3::boolean[], $4::bytea[]) WITH ORDINALITY AS item (artifact_id, append, blob, n)
"""
_SELECT_CHUNKS: Final = "SELECT artifact_id, append, blob FROM artifact_chunks WHERE task_id = $1 ORDER BY seq"
_DELETE_CHUNKS: Final = "DELETE FROM artifact_chunks WHERE task_id = $1"

_TASK_COLUMNS: Final = "t.id, t.context_id, t.status, t.metadata, t.status_ts_us, t.version"
_HISTORY_ARRAY: Final = "ARRAY(SELECT h.blob FROM history h WHERE h.task_id = t.id ORDER BY h.seq)"
_CHUNK_ARRAYS: Final = (
    "ARRAY(SELECT c.append FROM artifact_chunks c WHERE c.task_id = t.id ORDER BY c.seq),"
    " ARRAY(SELECT c.blob FROM artifact_chunks c WHERE c.task_id = t.id ORDER BY c.seq)"
)
_GET_TASK: Final = (
    f"SELECT {_TASK_COLUMNS}, {_HISTORY_ARRAY}, {_CHUNK_ARRAYS} FROM tasks t WHERE t.id = $1 AND t.owner = $2"
)
_RUNNING_TASKS: Final = "SELECT id, owner FROM tasks WHERE state = ANY($1::integer[])"

_PUT_CONFIG: Final = (
    "INSERT INTO push_configs (task_id, config_id, owner, blob) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (task_id, config_id) DO UPDATE SET owner = excluded.owner, blob = excluded.blob"
)
_GET_CONFIG: Final = "SELECT blob FROM push_configs WHERE task_id = $1 AND config_id = $2 AND owner = $3"
_LIST_CONFIGS: Final = (
    "SELECT config_id, blob FROM push_configs WHERE task_id = $1 AND owner = $2"
    " AND ($3::text IS NULL OR config_id > $3) ORDER BY config_id LIMIT $4"
)
_DELETE_CONFIG: Final = "DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2 AND owner = $3"

_DISK_FULL: Final = "53100"  # SQLSTATE disk_full: also "could not extend file" on a full disk


@dataclass(slots=True)
class _Write:
    """A TaskWrite reduced to bytes and plain values when `apply` is called."""

    task_id: str
    version: int
    status: tuple[int, int, bytes] | None  # (state, timestamp in microseconds, serialized TaskStatus)
    history: list[bytes]
    chunk_ids: list[str] = field(default_factory=list)
    chunk_appends: list[bool] = field(default_factory=list)
    chunk_blobs: list[bytes] = field(default_factory=list)
    owner: str = ""
    context_id: str = ""
    metadata: bytes | None = None  # the task's metadata, on a create
    created_us: int = 0


_Job: TypeAlias = tuple[_Write, asyncio.Future[None]]


@dataclass(slots=True)
class _Open:
    """What exists while the store is open: the pool, and the write queue with its worker."""

    pool: asyncpg.Pool
    queue: asyncio.Queue[_Job | None] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None


class PostgresStore:
    def __init__(self, url: str, pool_size: int = 10) -> None:
        self.url = url
        self.pool_size = pool_size
        self.commit_count = 0  # transactions committed by the write worker: one per batch of writes
        self._open: _Open | None = None

    async def open(self) -> None:
        """Connect, and create or migrate the schema (one replica at a time)."""
        if self._open is not None:
            return
        asyncpg = _import_asyncpg()
        try:
            with _translated("cannot open the task store"):
                pool = await asyncpg.create_pool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    command_timeout=STATEMENT_SECONDS,
                    server_settings=_SESSION_SETTINGS,
                )
        except (ValueError, TypeError, OverflowError):  # the message may quote a piece of the password
            raise StoreError(
                "cannot open the task store: not a valid PostgreSQL URL (percent-encode special characters)"
            ) from None
        try:
            with _translated("cannot open the task store"):
                async with pool.acquire() as conn:
                    await _create_schema(conn)
        except BaseException:
            await pool.close()
            raise
        opened = _Open(pool)
        opened.worker = asyncio.create_task(self._write_worker(opened), name="postgres-store-writer")
        self._open = opened

    async def close(self) -> None:
        """Commit every queued write, then close the pool."""
        opened, self._open = self._open, None
        if opened is None:
            return
        opened.queue.put_nowait(None)  # queued after every pending write, which all commit first
        try:
            if opened.worker is not None:
                await asyncio.shield(opened.worker)  # a caller giving up must not strand queued writes
        finally:
            await opened.pool.close()

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._open is None:
            future.set_exception(StoreError("the store is not open"))
            return future
        try:
            prepared = _prepare(write)
        except (ValueError, TypeError) as exc:
            future.set_exception(exc)
            return future
        self._open.queue.put_nowait((prepared, future))
        return future

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        loaded = await self.load_task(task_id, owner)
        return None if loaded is None else loaded[0]

    async def load_task(self, task_id: str, owner: str) -> tuple[a2a_pb2.Task, int] | None:
        """The version is that of the last committed write; writes still queued are not counted."""
        pool = self._pool()
        if _has_nul(task_id, owner):
            return None
        with _translated():
            row = await pool.fetchrow(_GET_TASK, task_id, owner)
        return None if row is None else (_task_from_row(row, include_artifacts=True), int(row["version"]))

    async def running_tasks(self) -> list[tuple[str, str]]:
        pool = self._pool()
        with _translated():
            rows = await pool.fetch(_RUNNING_TASKS, sorted(RUNNING_STATES))
        return [(str(row["id"]), str(row["owner"])) for row in rows]

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        pool = self._pool()
        cursor = decode_task_cursor(query.page_token) if query.page_token else None
        if cursor is not None and _has_nul(cursor[1]):
            raise InvalidPageTokenError("invalid page token")  # no stored id holds NUL: not our token
        if _has_nul(query.owner, query.context_id):
            return TaskPage()
        with _translated():
            async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                return await _list_tasks(conn, query, cursor)

    async def put_push_config(self, owner: str, config: a2a_pb2.TaskPushNotificationConfig) -> None:
        pool = self._pool()
        if _has_nul(owner, config.task_id, config.id):
            raise ValueError("a push config's owner, task id and id must not contain NUL")
        with _translated():
            await pool.execute(_PUT_CONFIG, config.task_id, config.id, owner, config.SerializeToString())

    async def get_push_config(
        self, owner: str, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig | None:
        pool = self._pool()
        if _has_nul(owner, task_id, config_id):
            return None
        with _translated():
            blob = await pool.fetchval(_GET_CONFIG, task_id, config_id, owner)
        return None if blob is None else a2a_pb2.TaskPushNotificationConfig.FromString(blob)

    async def list_push_configs(
        self, owner: str, task_id: str, page_size: int, page_token: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        pool = self._pool()
        after = decode_config_cursor(page_token) if page_token else None
        if after is not None and _has_nul(after):
            raise InvalidPageTokenError("invalid page token")
        if _has_nul(owner, task_id):
            return [], ""
        with _translated():
            rows = await pool.fetch(_LIST_CONFIGS, task_id, owner, after, page_size + 1)
        page = rows[:page_size]
        token = encode_config_cursor(page[-1]["config_id"]) if len(rows) > len(page) and page else ""
        return [a2a_pb2.TaskPushNotificationConfig.FromString(row["blob"]) for row in page], token

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> bool:
        pool = self._pool()
        if _has_nul(owner, task_id, config_id):
            return False
        with _translated():
            done = await pool.execute(_DELETE_CONFIG, task_id, config_id, owner)
        return _row_count(done) > 0

    def _pool(self) -> asyncpg.Pool:
        if self._open is None:
            raise StoreError("the store is not open")
        return self._open.pool

    # -- the write worker -------------------------------------------------------------------------

    async def _write_worker(self, opened: _Open) -> None:
        while True:
            jobs, stop = await _take_batch(opened.queue)
            if jobs:
                errors = await self._commit(opened.pool, [write for write, _ in jobs])
                _resolve([future for _, future in jobs], errors)
            if stop:
                return

    async def _commit(self, pool: asyncpg.Pool, writes: list[_Write]) -> list[BaseException | None]:
        """Apply the batch in one transaction; the first try runs the writes back to back."""
        try:
            async with pool.acquire() as conn:
                try:
                    async with conn.transaction():
                        for write in writes:
                            await _apply_write(conn, write)
                    errors: list[BaseException | None] = [None] * len(writes)
                except Exception as exc:
                    if len(writes) == 1:
                        return [_as_store_error(exc)]
                    errors = await _commit_one_by_one(conn, writes)
        except Exception as exc:  # the connection or the commit failed: so does every write of the batch
            error = _as_store_error(exc, "commit failed")
            return [error] * len(writes)
        self.commit_count += 1
        return errors


def _import_asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError as exc:
        raise StoreError("the PostgreSQL store needs asyncpg: install a2a-grpc[postgres]") from exc
    return asyncpg


async def _create_schema(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        await conn.execute(_LOCK_SCHEMA, SCHEMA_LOCK_KEY)
        await conn.execute(_SCHEMA)
        version = await conn.fetchval(_SCHEMA_VERSION)
        if version is None:
            await conn.execute(_INSERT_SCHEMA_VERSION, SCHEMA_VERSION)
        elif version > SCHEMA_VERSION:
            raise StoreError(f"database schema version {version} is newer than this server ({SCHEMA_VERSION})")


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


async def _commit_one_by_one(conn: asyncpg.Connection, writes: list[_Write]) -> list[BaseException | None]:
    async with conn.transaction():
        return [await _in_savepoint(conn, write) for write in writes]


async def _in_savepoint(conn: asyncpg.Connection, write: _Write) -> BaseException | None:
    try:
        async with conn.transaction():  # nested: a savepoint
            await _apply_write(conn, write)
    except Exception as exc:  # whatever went wrong, it fails this write only
        return _as_store_error(exc)
    return None


def _resolve(futures: list[asyncio.Future[None]], errors: list[BaseException | None]) -> None:
    for future, error in zip(futures, errors, strict=True):
        if future.done():  # cancelled by the caller
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


@contextlib.contextmanager
def _translated(prefix: str = "postgresql") -> Iterator[None]:
    """Raise database and connection errors as StoreError (StorageFullError for a full disk)."""
    try:
        yield
    except Exception as exc:
        error = _as_store_error(exc, prefix)
        if error is exc:
            raise
        raise error from exc


def _as_store_error(exc: BaseException, prefix: str = "postgresql") -> BaseException:
    asyncpg = _import_asyncpg()
    if getattr(exc, "sqlstate", None) == _DISK_FULL:
        return StorageFullError(f"{prefix}: {exc}")
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError | TimeoutError):
        return StoreError(f"{prefix}: {exc}")
    return exc


def _has_nul(*texts: str) -> bool:
    return any("\x00" in text for text in texts)


def _row_count(command_status: str) -> int:
    """The row count of a command status such as "UPDATE 1" or "INSERT 0 3"."""
    return int(command_status.rsplit(" ", 1)[-1])


# -- writes: prepared on `apply`, applied by the worker -------------------------------------------


def _prepare(write: TaskWrite) -> _Write:
    if _has_nul(write.task_id):
        raise ValueError("a task id must not contain NUL")
    if write.version == 1:
        return _prepare_create(write)
    status = None if write.status is None else _prepare_status(write.status)
    prepared = _Write(write.task_id, write.version, status, [m.SerializeToString() for m in write.history])
    _add_chunks(prepared, write.artifacts)
    return prepared


def _prepare_create(write: TaskWrite) -> _Write:
    task = write.task
    if task is None:
        raise ValueError(f"create write for task {write.task_id!r} has no task")
    if _has_nul(write.task_id, write.owner, task.context_id):
        raise ValueError(f"task {write.task_id!r}: ids and owner must not contain NUL")
    prepared = _Write(
        write.task_id,
        1,
        _prepare_status(task.status),
        [message.SerializeToString() for message in task.history],
        owner=write.owner,
        context_id=task.context_id,
        metadata=task.metadata.SerializeToString() if task.HasField("metadata") else None,
        created_us=now_us(),
    )
    _add_chunks(prepared, [(artifact, False) for artifact in task.artifacts])
    return prepared


def _prepare_status(status: a2a_pb2.TaskStatus) -> tuple[int, int, bytes]:
    return status.state, status_ts_us(status), status.SerializeToString()


def _add_chunks(prepared: _Write, chunks: Iterable[tuple[a2a_pb2.Artifact, bool]]) -> None:
    for artifact, append in chunks:
        if _has_nul(artifact.artifact_id):
            raise ValueError(f"task {prepared.task_id!r}: an artifact id must not contain NUL")
        prepared.chunk_ids.append(artifact.artifact_id)
        prepared.chunk_appends.append(append)
        prepared.chunk_blobs.append(artifact.SerializeToString())


async def _apply_write(conn: asyncpg.Connection, write: _Write) -> None:
    if write.version == 1:
        await _insert_task(conn, write)
    else:
        await _update_task(conn, write)
    if write.history:
        await conn.execute(_APPEND_HISTORY, write.task_id, write.history)
    if write.chunk_ids:
        await conn.execute(_APPEND_CHUNKS, write.task_id, write.chunk_ids, write.chunk_appends, write.chunk_blobs)
    if write.version > 1 and write.status is not None and write.status[0] in TERMINAL_STATES:
        await _compact_artifacts(conn, write.task_id)


async def _insert_task(conn: asyncpg.Connection, write: _Write) -> None:
    assert write.status is not None  # _prepare_create always sets it
    state, ts_us, blob = write.status
    row = (write.task_id, write.owner, write.context_id, state, ts_us, blob, write.metadata, write.created_us)
    if _row_count(await conn.execute(_INSERT_TASK, *row)) != 1:
        raise VersionConflictError(f"task {write.task_id!r} already exists; write carries version 1")


async def _update_task(conn: asyncpg.Connection, write: _Write) -> None:
    key = (write.task_id, write.version - 1, write.version)
    if write.status is None:
        done = await conn.execute(_UPDATE_VERSION, *key)
    else:
        done = await conn.execute(_UPDATE_STATUS, *key, *write.status)
    if _row_count(done) != 1:
        raise VersionConflictError(
            f"task {write.task_id!r} is absent or not at version {write.version - 1}; "
            f"write carries version {write.version}"
        )


async def _compact_artifacts(conn: asyncpg.Connection, task_id: str) -> None:
    """Replace a finished task's artifact chunks by one row per artifact as it stands: every chunk of an
    artifact appended to or replaced many times would otherwise stay stored."""
    rows = await conn.fetch(_SELECT_CHUNKS, task_id)
    if len({row["artifact_id"] for row in rows}) == len(rows):
        return  # one row per artifact already
    merged = _merge_chunks((row["append"], row["blob"]) for row in rows)
    await conn.execute(_DELETE_CHUNKS, task_id)
    compacted = _Write(task_id, 0, None, [])
    _add_chunks(compacted, [(artifact, False) for artifact in merged])
    await conn.execute(_APPEND_CHUNKS, task_id, compacted.chunk_ids, compacted.chunk_appends, compacted.chunk_blobs)


# -- reads ----------------------------------------------------------------------------------------


async def _list_tasks(conn: asyncpg.Connection, query: TaskQuery, cursor: tuple[int, str] | None) -> TaskPage:
    where, params = _task_filters(query)
    total = int(await conn.fetchval(f"SELECT COUNT(*) FROM tasks t WHERE {where}", *params))
    if cursor is not None:
        where += f" AND (t.status_ts_us, t.id) < (${len(params) + 1}, ${len(params) + 2})"
        params += cursor
    chunks = f", {_CHUNK_ARRAYS}" if query.include_artifacts else ""
    sql = (
        f"SELECT {_TASK_COLUMNS}, {_HISTORY_ARRAY}{chunks} FROM tasks t WHERE {where}"
        f" ORDER BY t.status_ts_us DESC, t.id DESC LIMIT ${len(params) + 1}"
    )
    rows = await conn.fetch(sql, *params, query.page_size + 1)
    page = rows[: query.page_size]
    token = encode_task_cursor(page[-1]["status_ts_us"], page[-1]["id"]) if len(rows) > len(page) and page else ""
    tasks = [_task_from_row(row, query.include_artifacts) for row in page]
    return TaskPage(tasks=tasks, next_page_token=token, total_size=total)


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
    task_id, context_id, status, metadata, _, _, history, *chunks = row
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.MergeFromString(status)
    if metadata is not None:
        task.metadata.MergeFromString(metadata)
    for blob in history:
        task.history.add().MergeFromString(blob)
    if include_artifacts:
        appends, blobs = chunks
        task.artifacts.extend(_merge_chunks(zip(appends, blobs, strict=True)))
    return task


def _merge_chunks(chunks: Iterable[tuple[bool, bytes]]) -> Sequence[a2a_pb2.Artifact]:
    """Replay the stored artifact chunks in order, as the task manager applied them."""
    merged: list[a2a_pb2.Artifact] = []
    for append, blob in chunks:
        apply_artifact_chunk(merged, a2a_pb2.Artifact.FromString(blob), append)
    return merged
