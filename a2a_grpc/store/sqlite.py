"""The embedded durable store: one SQLite file in WAL mode.

The event loop never touches SQLite. Writes (task writes and push-config changes) are serialized on the
loop, then queued to one writer thread that applies everything queued in ONE transaction (group commit),
each write inside its own SAVEPOINT so a failing write fails alone, and resolves the batch's futures with
one `call_soon_threadsafe`. Reads run on one reader thread with its own connection (WAL lets it read
while the writer writes).

With synchronous=NORMAL in WAL mode a committed write survives the process being killed, not a power cut.

`apply` never raises: it returns a future, which raises the write's error (`VersionConflictError`,
`StoreError`, or `ValueError` for a create without a task) when awaited.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, Final, ParamSpec, TypeAlias, TypeVar

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RUNNING_STATES, TERMINAL_STATES
from a2a_grpc.store import sqlite_push as push
from a2a_grpc.store._codec import decode_config_cursor, decode_task_cursor, encode_task_cursor, now_us, status_ts_us
from a2a_grpc.store.base import (
    LoadedTask,
    PushTarget,
    StorageFullError,
    StoreError,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskWrite,
    VersionConflictError,
)
from a2a_grpc.store.sqlite_schema import create_schema

P = ParamSpec("P")
T = TypeVar("T")

_INSERT_TASK: Final = (
    "INSERT INTO tasks (id, owner, context_id, state, status_ts_us, version, status, metadata, created_us, seq)"
    " VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_INSERT_HISTORY: Final = "INSERT INTO history (task_id, seq, message) VALUES (?, ?, ?)"
_INSERT_CHUNK: Final = "INSERT INTO artifacts (task_id, seq, artifact_id, append, chunk) VALUES (?, ?, ?, ?, ?)"
_INSERT_EVENT: Final = "INSERT INTO task_events (task_id, seq, state, body) VALUES (?, ?, ?, ?)"
_SELECT_EVENTS: Final = "SELECT seq, state, body FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?"
_SELECT_CHUNKS: Final = "SELECT artifact_id, append, chunk FROM artifacts WHERE task_id = ? ORDER BY seq"
_TASK_COLUMNS: Final = "id, owner, context_id, status, metadata, status_ts_us"

# The type of google.protobuf.Struct, without importing google.protobuf (it has no type stubs).

_Run: TypeAlias = Callable[[sqlite3.Connection, Any], object]
_Job: TypeAlias = tuple[_Run, Any, asyncio.Future[Any]]
_Outcome: TypeAlias = tuple[asyncio.Future[Any], BaseException | None, object]
_STOP: Final = None


@dataclass(slots=True)
class _Status:
    state: int
    ts_us: int
    blob: bytes


@dataclass(slots=True)
class _Write:
    """A TaskWrite reduced to bytes and plain values, safe to hand to the writer thread."""

    task_id: str
    version: int
    status: _Status | None
    metadata: bytes | None  # the task's metadata, on a create
    history: list[bytes]
    chunks: list[tuple[str, bool, bytes]]  # (artifact_id, append, serialized Artifact)
    events: list[tuple[str, int, int, bytes]]  # task_events rows
    owner: str = ""
    context_id: str = ""
    created_us: int = 0

    @property
    def seq(self) -> int:
        """The number of the write's last event; 0 when it has none."""
        return self.events[-1][1] if self.events else 0


@dataclass(slots=True)
class _Threads:
    """What exists while the store is open: the writer thread and its queue, the reader thread."""

    loop: asyncio.AbstractEventLoop
    reader: concurrent.futures.ThreadPoolExecutor
    queue: queue.SimpleQueue[_Job | None] = field(default_factory=queue.SimpleQueue)
    ready: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    stopped: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    reader_conn: sqlite3.Connection | None = None


class SqliteStore:
    shared = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.commit_count = 0  # transactions committed by the writer thread: one per batch of writes
        self._threads: _Threads | None = None

    async def open(self) -> None:
        """Create the file, its directory and the schema when missing (or migrate an older file); start the threads."""
        if self._threads is not None:
            return
        loop = asyncio.get_running_loop()
        threads = _Threads(loop, concurrent.futures.ThreadPoolExecutor(1, "sqlite-store-reader"))
        writer = threading.Thread(target=self._writer_main, args=(threads,), name="sqlite-store-writer")
        writer.daemon = True
        writer.start()
        try:
            await asyncio.wrap_future(threads.ready)
            threads.reader_conn = await loop.run_in_executor(threads.reader, _connect_reader, self.path)
        except (sqlite3.Error, OSError, StoreError) as exc:
            await _shutdown(threads)
            raise StoreError(f"cannot open the task store {self.path}: {exc}") from exc
        except BaseException:
            await _shutdown(threads)
            raise
        self._threads = threads

    async def close(self) -> None:
        """Commit every queued write, then stop the threads and close the connections."""
        threads, self._threads = self._threads, None
        if threads is not None:
            await _shutdown(threads)

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        try:
            prepared = _prepare(write)
        except (ValueError, TypeError) as exc:
            return _failed(exc)
        return self._submit(_apply_write, prepared)

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        return await self._read(_get_task, task_id, owner)

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        """The version is that of the last committed write; writes still queued are not counted."""
        return await self._read(_load_versioned_task, task_id, owner)

    async def read_events(self, task_id: str, after: int, limit: int) -> list[TaskEvent]:
        return await self._read(_read_events, task_id, after, limit)

    async def running_tasks(self) -> list[tuple[str, str]]:
        return await self._read(_running_tasks)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        cursor = decode_task_cursor(query.page_token) if query.page_token else None
        return await self._read(_list_tasks, query, cursor)

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None = None
    ) -> None:
        await self._submit(push.put_config, (config.task_id, config.id, owner, config.SerializeToString(), delivered))

    async def get_push_config(
        self, owner: str, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig | None:
        return await self._read(push.get_config, owner, task_id, config_id)

    async def list_push_configs(
        self, owner: str, task_id: str, page_size: int, page_token: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        after = decode_config_cursor(page_token) if page_token else None
        return await self._read(push.list_configs, owner, task_id, page_size, after)

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> bool:
        deleted: bool = await self._submit(push.delete_config, (task_id, config_id, owner))
        return deleted

    async def claim_push_targets(self, claimer: str, lease_seconds: float, limit: int) -> list[PushTarget]:
        targets: list[PushTarget] = await self._submit(push.claim, (claimer, lease_seconds, limit))
        return targets

    async def ack_push(self, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
        held: bool = await self._submit(push.ack, (task_id, config_id, seq, claimer, lease_seconds))
        return held

    async def release_push(self, task_id: str, config_id: str, claimer: str) -> None:
        await self._submit(push.release, (task_id, config_id, claimer))

    async def set_max_pages(self, pages: int) -> int:
        """Cap the file at `pages` database pages (SQLite's max_page_count; 4 KiB each by default): a write
        that needs more fails with StorageFullError, as on a full disk. The cap never goes below the
        pages in use; returns the cap in force."""
        cap: int = await self._submit(_set_max_pages, pages)
        return cap

    # -- event loop side --------------------------------------------------------------------------

    def _submit(self, run: _Run, payload: object) -> asyncio.Future[Any]:
        threads = self._threads
        if threads is None:
            return _failed(StoreError("the store is not open"))
        future = threads.loop.create_future()
        threads.queue.put((run, payload, future))
        return future

    async def _read(self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        threads = self._threads
        if threads is None or threads.reader_conn is None:
            raise StoreError("the store is not open")
        call = functools.partial(fn, threads.reader_conn, *args, **kwargs)
        return await threads.loop.run_in_executor(threads.reader, _in_snapshot, threads.reader_conn, call)

    # -- writer thread ----------------------------------------------------------------------------

    def _writer_main(self, threads: _Threads) -> None:
        try:
            conn = _connect_writer(self.path)
        except BaseException as exc:
            threads.stopped.set_result(None)
            threads.ready.set_exception(exc)
            return
        threads.ready.set_result(None)
        try:
            while self._serve_batch(conn, threads):
                pass
        finally:
            conn.close()
            threads.stopped.set_result(None)

    def _serve_batch(self, conn: sqlite3.Connection, threads: _Threads) -> bool:
        """Commit everything queued as one transaction; False once the stop marker was seen."""
        jobs, stop = _drain(threads.queue)
        if jobs:
            outcomes = self._commit(conn, jobs)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                threads.loop.call_soon_threadsafe(_resolve, outcomes)
        return not stop

    def _commit(self, conn: sqlite3.Connection, jobs: list[_Job]) -> list[_Outcome]:
        """Apply the batch in one transaction. The first try runs the writes back to back; only a batch
        in which some write fails is rolled back and redone with a savepoint per write, so that failure
        is that write's alone."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes: list[_Outcome] = [(future, None, run(conn, payload)) for run, payload, future in jobs]
            except Exception:
                _rollback(conn)
                conn.execute("BEGIN IMMEDIATE")
                outcomes = [(future, *_run_in_savepoint(conn, run, payload)) for run, payload, future in jobs]
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            error = _as_store_error(exc, prefix="commit failed")
            return [(future, error, None) for _, _, future in jobs]
        self.commit_count += 1
        return outcomes


async def _shutdown(threads: _Threads) -> None:
    if not threads.stopped.done():
        threads.queue.put(_STOP)  # queued after every pending write, which all commit first
        await asyncio.wrap_future(threads.stopped)
    if threads.reader_conn is not None:
        await threads.loop.run_in_executor(threads.reader, threads.reader_conn.close)
    threads.reader.shutdown(wait=False)


def _failed(error: BaseException) -> asyncio.Future[Any]:
    future = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


def _drain(jobs_queue: queue.SimpleQueue[_Job | None]) -> tuple[list[_Job], bool]:
    """Block for one job, then take every job already queued; True when the stop marker came."""
    jobs: list[_Job] = []
    item = jobs_queue.get()
    while item is not _STOP:
        jobs.append(item)
        try:
            item = jobs_queue.get_nowait()
        except queue.Empty:
            return jobs, False
    return jobs, True


def _resolve(outcomes: list[_Outcome]) -> None:
    for future, error, value in outcomes:
        if future.done():  # cancelled by the caller
            continue
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


def _run_in_savepoint(conn: sqlite3.Connection, run: _Run, payload: object) -> tuple[BaseException | None, object]:
    conn.execute("SAVEPOINT write")
    try:
        value = run(conn, payload)
    except Exception as exc:  # whatever went wrong, it fails this write only
        if not conn.in_transaction:
            raise  # SQLite rolled the whole transaction back (it does on a full disk): the batch fails
        conn.execute("ROLLBACK TO write")
        conn.execute("RELEASE write")
        return _as_store_error(exc), None
    conn.execute("RELEASE write")
    return None, value


def _rollback(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):  # no transaction was open
        conn.execute("ROLLBACK")


def _as_store_error(exc: BaseException, prefix: str = "sqlite") -> BaseException:
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return StorageFullError(f"{prefix}: {exc}")
    if isinstance(exc, sqlite3.Error | OSError):
        return StoreError(f"{prefix}: {exc}")
    return exc


# -- connections (writer and reader threads); the schema is in sqlite_schema ----------------------


def _connect_writer(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"cannot use WAL journal mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        create_schema(conn)
        push.release_all_claims(conn)  # one process owns the file: claims left by an earlier one are void
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_reader(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


# -- writes: prepared on the event loop, applied on the writer thread -----------------------------


def _prepare(write: TaskWrite) -> _Write:
    if write.version == 1:
        return _prepare_create(write)
    status = None if write.status is None else _prepare_status(write.status)
    history = [message.SerializeToString() for message in write.history]
    chunks = [_chunk(artifact, append) for artifact, append in write.artifacts]
    return _Write(write.task_id, write.version, status, None, history, chunks, _event_rows(write))


def _prepare_create(write: TaskWrite) -> _Write:
    task = write.task
    if task is None:
        raise ValueError(f"create write for task {write.task_id!r} has no task")
    metadata = task.metadata.SerializeToString() if task.HasField("metadata") else None
    history = [message.SerializeToString() for message in task.history]
    chunks = [_chunk(artifact, False) for artifact in task.artifacts]
    return _Write(
        write.task_id,
        1,
        _prepare_status(task.status),
        metadata,
        history,
        chunks,
        _event_rows(write),
        owner=write.owner,
        context_id=task.context_id,
        created_us=now_us(),
    )


def _event_rows(write: TaskWrite) -> list[tuple[str, int, int, bytes]]:
    return [(write.task_id, event.seq, event.state, event.body) for event in write.events]


def _prepare_status(status: a2a_pb2.TaskStatus) -> _Status:
    return _Status(status.state, status_ts_us(status), status.SerializeToString())


def _chunk(artifact: a2a_pb2.Artifact, append: bool) -> tuple[str, bool, bytes]:
    return artifact.artifact_id, append, artifact.SerializeToString()


def _apply_write(conn: sqlite3.Connection, write: _Write) -> None:
    if write.version == 1:
        _insert_task(conn, write)
        history_seq = chunk_seq = 0
    else:
        _update_task(conn, write)
        history_seq = _next_seq(conn, "history", write.task_id) if write.history else 0
        chunk_seq = _next_seq(conn, "artifacts", write.task_id) if write.chunks else 0
    if write.history:
        rows = [(write.task_id, history_seq + i, blob) for i, blob in enumerate(write.history)]
        conn.executemany(_INSERT_HISTORY, rows)
    if write.chunks:
        chunks = [(write.task_id, chunk_seq + i, *chunk) for i, chunk in enumerate(write.chunks)]
        conn.executemany(_INSERT_CHUNK, chunks)
    if write.events:
        conn.executemany(_INSERT_EVENT, write.events)
    if write.version > 1 and write.status is not None and write.status.state in TERMINAL_STATES:
        _compact_artifacts(conn, write.task_id)


def _compact_artifacts(conn: sqlite3.Connection, task_id: str) -> None:
    """Replace a finished task's artifact chunks by one row per artifact as it stands: every chunk of an
    artifact appended to or replaced many times would otherwise stay stored."""
    rows = conn.execute(_SELECT_CHUNKS, (task_id,)).fetchall()
    if len({artifact_id for artifact_id, _, _ in rows}) == len(rows):
        return  # one row per artifact already
    merged = _merge_chunks(rows)
    conn.execute("DELETE FROM artifacts WHERE task_id = ?", (task_id,))
    compacted = [(task_id, seq, *_chunk(artifact, False)) for seq, artifact in enumerate(merged)]
    conn.executemany(_INSERT_CHUNK, compacted)


def _insert_task(conn: sqlite3.Connection, write: _Write) -> None:
    status = write.status
    assert status is not None  # _prepare_create always sets it
    row = (write.task_id, write.owner, write.context_id, status.state, status.ts_us, status.blob)
    cursor = conn.execute(_INSERT_TASK, (*row, write.metadata, write.created_us, write.seq))
    if cursor.rowcount != 1:
        raise VersionConflictError(f"task {write.task_id!r} already exists; write carries version 1")


def _update_task(conn: sqlite3.Connection, write: _Write) -> None:
    columns = ["version = ?"]
    values: list[object] = [write.version]
    if write.status is not None:
        columns.append("state = ?, status_ts_us = ?, status = ?")
        values += (write.status.state, write.status.ts_us, write.status.blob)
    if write.events:
        columns.append("seq = ?")
        values.append(write.seq)
    sql = f"UPDATE tasks SET {', '.join(columns)} WHERE id = ? AND version = ?"
    if conn.execute(sql, (*values, write.task_id, write.version - 1)).rowcount != 1:
        raise VersionConflictError(
            f"task {write.task_id!r} is absent or not at version {write.version - 1}; "
            f"write carries version {write.version}"
        )


def _next_seq(conn: sqlite3.Connection, table: str, task_id: str) -> int:
    row = conn.execute(f"SELECT MAX(seq) FROM {table} WHERE task_id = ?", (task_id,)).fetchone()
    return 0 if row[0] is None else int(row[0]) + 1


def _set_max_pages(conn: sqlite3.Connection, pages: int) -> int:
    return int(conn.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])


# -- reads: on the reader thread, each inside one read transaction (a consistent snapshot) --------


def _in_snapshot(conn: sqlite3.Connection, read: Callable[[], T]) -> T:
    try:
        conn.execute("BEGIN")
        try:
            return read()
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite: {exc}") from exc


def _get_task(conn: sqlite3.Connection, task_id: str, owner: str) -> a2a_pb2.Task | None:
    loaded = _load_versioned_task(conn, task_id, owner)
    return None if loaded is None else loaded.task


def _load_versioned_task(conn: sqlite3.Connection, task_id: str, owner: str) -> LoadedTask | None:
    row = conn.execute(f"SELECT {_TASK_COLUMNS}, version, seq FROM tasks WHERE id = ?", (task_id,)).fetchone()
    if row is None or row[1] != owner:
        return None
    return LoadedTask(_load_task(conn, row[:-2], include_artifacts=True), int(row[-2]), int(row[-1]))


def _read_events(conn: sqlite3.Connection, task_id: str, after: int, limit: int) -> list[TaskEvent]:
    rows = conn.execute(_SELECT_EVENTS, (task_id, after, limit)).fetchall()
    return [TaskEvent(seq, state, body) for seq, state, body in rows]


def _running_tasks(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    running = tuple(sorted(RUNNING_STATES))
    rows = conn.execute("SELECT id, owner FROM tasks WHERE state IN (?, ?)", running).fetchall()
    return [(str(task_id), str(owner)) for task_id, owner in rows]


def _list_tasks(conn: sqlite3.Connection, query: TaskQuery, cursor: tuple[int, str] | None) -> TaskPage:
    where, params = _task_filters(query)
    total: int = conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {where}", params).fetchone()[0]
    if cursor is not None:
        where += " AND (status_ts_us, id) < (?, ?)"
        params += cursor
    sql = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE {where} ORDER BY status_ts_us DESC, id DESC LIMIT ?"
    rows = conn.execute(sql, (*params, query.page_size + 1)).fetchall()
    page = rows[: query.page_size]
    token = encode_task_cursor(page[-1][5], page[-1][0]) if len(rows) > len(page) and page else ""
    tasks = [_load_task(conn, row, query.include_artifacts) for row in page]
    return TaskPage(tasks=tasks, next_page_token=token, total_size=total)


def _task_filters(query: TaskQuery) -> tuple[str, list[object]]:
    clauses = ["owner = ?"]
    params: list[object] = [query.owner]
    if query.context_id:
        clauses.append("context_id = ?")
        params.append(query.context_id)
    if query.state:
        clauses.append("state = ?")
        params.append(query.state)
    if query.status_after_us is not None:
        clauses.append("status_ts_us >= ?")
        params.append(query.status_after_us)
    return " AND ".join(clauses), params


def _load_task(conn: sqlite3.Connection, row: tuple[Any, ...], include_artifacts: bool) -> a2a_pb2.Task:
    task_id, _, context_id, status, metadata, _ = row
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.MergeFromString(status)
    if metadata is not None:
        task.metadata.MergeFromString(metadata)
    for (message,) in conn.execute("SELECT message FROM history WHERE task_id = ? ORDER BY seq", (task_id,)):
        task.history.add().MergeFromString(message)
    if include_artifacts:
        task.artifacts.extend(_merge_chunks(conn.execute(_SELECT_CHUNKS, (task_id,))))
    return task


def _merge_chunks(chunks: Iterable[tuple[str, int, bytes]]) -> list[a2a_pb2.Artifact]:
    """Replay the stored artifact chunks in order, as the task manager applied them."""
    merged: list[a2a_pb2.Artifact] = []
    for _, append, blob in chunks:
        apply_artifact_chunk(merged, a2a_pb2.Artifact.FromString(blob), bool(append))
    return merged
