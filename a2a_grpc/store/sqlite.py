"""The embedded durable store: one SQLite file in WAL mode.

The event loop never touches SQLite. Writes (task writes and push-config changes) are serialized on the
loop, then queued to one writer thread that applies everything queued in ONE transaction (group commit),
each write inside its own SAVEPOINT so a failing write fails alone, and resolves the batch's futures with
one `call_soon_threadsafe`. Reads run on READERS reader threads, each read on a connection of its own (WAL
lets them read side by side and while the writer writes). Listings, the reads whose cost grows with the store,
take at most HEAVY_READS of those threads at once (later ones wait their turn on the loop, bounded by their
caller's deadline), so a point read (GetTask) always finds a reader free; `ping` has a thread and connection
of its own and so never waits behind reads. The task writes are in sqlite_writes, the reads in sqlite_reads,
push-notification configs in sqlite_push and the schema in sqlite_schema.

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, Final, ParamSpec, TypeAlias, TypeVar

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import sqlite_push as push
from a2a_grpc.store import sqlite_reads as reads
from a2a_grpc.store import sqlite_writes as writes
from a2a_grpc.store._codec import decode_config_cursor, decode_task_cursor, now_us
from a2a_grpc.store.base import (
    EVENT_PAGE_BYTES,
    PRUNE_BATCH_EVENTS,
    REMOVE_BATCH_TASKS,
    CommitObserver,
    LoadedTask,
    PushTarget,
    StoreError,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskWrite,
)
from a2a_grpc.store.sqlite_errors import as_store_error
from a2a_grpc.store.sqlite_lock import FileLock
from a2a_grpc.store.sqlite_schema import create_schema

P = ParamSpec("P")
T = TypeVar("T")

_Run: TypeAlias = Callable[[sqlite3.Connection, Any], object]
_Job: TypeAlias = tuple[_Run, Any, asyncio.Future[Any]]
_Outcome: TypeAlias = tuple[asyncio.Future[Any], BaseException | None, object]
_STOP: Final = None
# Reader threads, each with its connection; listings use at most HEAVY_READS of them at once. Two listings
# keep two cores busy (SQLite steps without the GIL), more would only queue on the same cores; the third
# reader is the point reads' own.
READERS: Final = 3
HEAVY_READS: Final = READERS - 1


@dataclass(slots=True)
class _Threads:
    """What exists while the store is open: the writer thread and its queue, the reader threads with their
    idle connections, the listings' bound, and the readiness check's thread."""

    loop: asyncio.AbstractEventLoop
    lock: FileLock
    reader: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(READERS, "sqlite-store-reader")
    )
    pinger: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(1, "sqlite-store-ping")
    )
    heavy_reads: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(HEAVY_READS))
    # One connection per reader thread, so a read always finds one idle here; and the readiness check's own.
    idle: queue.SimpleQueue[sqlite3.Connection] = field(default_factory=queue.SimpleQueue)
    queue: queue.SimpleQueue[_Job | None] = field(default_factory=queue.SimpleQueue)
    ready: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    stopped: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    connections: list[sqlite3.Connection] = field(default_factory=list)
    ping_conn: sqlite3.Connection | None = None


class SqliteStore:
    shared = None  # one process's alone

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.commit_count = 0  # transactions committed by the writer thread: one per batch of writes
        self.on_commit: CommitObserver | None = None
        self._threads: _Threads | None = None

    async def open(self) -> None:
        """Lock the file (StoreInUseError while another open store has it); create the file, its directory and
        the schema when missing (or migrate an older file); start the threads."""
        if self._threads is not None:
            return
        if str(self.path) == ":memory:":
            raise StoreError("the SQLite store needs a file, not ':memory:' (the memory store is 'memory')")
        loop = asyncio.get_running_loop()
        threads = _Threads(loop, FileLock.take(self.path))
        writer = threading.Thread(target=self._writer_main, args=(threads,), name="sqlite-store-writer")
        writer.daemon = True
        writer.start()
        try:
            await asyncio.wrap_future(threads.ready)
            await loop.run_in_executor(threads.pinger, _connect_readers, threads, self.path)
        except (sqlite3.Error, OSError, StoreError) as exc:
            await _shutdown(threads)
            raise StoreError(f"cannot open the task store {self.path}: {exc}") from exc
        except BaseException:
            await _shutdown(threads)
            raise
        self._threads = threads

    async def close(self) -> None:
        """Commit every queued write, then stop the threads, close the connections and unlock the file."""
        threads, self._threads = self._threads, None
        if threads is not None:
            await _shutdown(threads)

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        try:
            prepared = writes.prepare(write)
        except (ValueError, TypeError) as exc:
            return _failed(exc)
        return self._submit(writes.apply_write, prepared)

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        return await self._read(reads.get_task, task_id, owner)

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        """The version is that of the last committed write; writes still queued are not counted."""
        return await self._read(reads.load_versioned_task, task_id, owner)

    async def read_events(
        self, task_id: str, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[TaskEvent]:
        return await self._read(reads.read_events, task_id, after, limit, max_bytes)

    async def prune_events(self, older_than_seconds: float, batch: int = PRUNE_BATCH_EVENTS) -> int:
        return await self._delete_in_batches(writes.prune_events, older_than_seconds, batch)

    async def remove_final_tasks(self, older_than_seconds: float, batch: int = REMOVE_BATCH_TASKS) -> int:
        return await self._delete_in_batches(writes.remove_final_tasks, older_than_seconds, batch)

    async def _delete_in_batches(self, delete: _Run, older_than_seconds: float, batch: int) -> int:
        """`delete(conn, (cutoff, batch))` a batch a write, so that the writes of the tasks being served go between,
        until a batch comes back short; how many went in all."""
        cutoff = now_us() - round(older_than_seconds * 1_000_000)
        total = 0
        while True:
            deleted: int = await self._submit(delete, (cutoff, batch))
            total += deleted
            if deleted < batch:
                return total

    async def running_tasks(self) -> list[tuple[str, str]]:
        return await self._read(reads.running_tasks)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        cursor = decode_task_cursor(query.page_token) if query.page_token else None
        return await self._heavy_read(reads.list_tasks, query, cursor)

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None = None
    ) -> None:
        await self._submit(push.put_config, push.config_row(owner, config, delivered))

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

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        payload: push.ClaimPayload = (claimer, lease_seconds, limit, task_ids, events)
        targets: list[PushTarget] = await self._submit(push.claim, payload)
        return targets

    async def ack_push(self, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
        held: bool = await self._submit(push.ack, (task_id, config_id, seq, claimer, lease_seconds))
        return held

    async def release_push(self, task_id: str, config_id: str, claimer: str, delivered: int | None = None) -> None:
        await self._submit(push.release, (task_id, config_id, claimer, delivered))

    async def set_max_pages(self, pages: int) -> int:
        """Cap the file at `pages` database pages (SQLite's max_page_count; 4 KiB each by default): a write
        that needs more fails with StorageFullError, as on a full disk. The cap never goes below the
        pages in use; returns the cap in force."""
        cap: int = await self._submit(writes.set_max_pages, pages)
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
        """`fn` on a reader thread, in one read transaction."""
        threads = self._open_threads()
        return await asyncio.wrap_future(threads.reader.submit(_read_idle, threads.idle, _bound(fn, *args, **kwargs)))

    async def _heavy_read(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`_read` once one of the HEAVY_READS turns is free; the turn is held until the thread is done with
        the read (a caller that gives up does not end the read)."""
        threads = self._open_threads()
        await threads.heavy_reads.acquire()
        try:
            running = threads.reader.submit(_read_idle, threads.idle, _bound(fn, *args, **kwargs))
        except BaseException:
            threads.heavy_reads.release()
            raise
        running.add_done_callback(functools.partial(_release_soon, threads))
        return await asyncio.wrap_future(running)

    def _open_threads(self) -> _Threads:
        if self._threads is None:
            raise StoreError("the store is not open")
        return self._threads

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
        started = time.perf_counter()
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
            error = as_store_error(exc, prefix="commit failed")
            return [(future, error, None) for _, _, future in jobs]
        self.commit_count += 1
        if self.on_commit is not None:
            self.on_commit(time.perf_counter() - started, len(jobs))
        return outcomes

    async def ping(self) -> None:
        """A cheap read (the schema's first row) on a thread and connection no other read uses, so reads never
        hold it up: StoreError when the file cannot be read or the writer thread has stopped."""
        threads = self._threads
        if threads is None or threads.ping_conn is None:
            raise StoreError("the store is not open")
        if threads.stopped.done():
            raise StoreError("the store's writer thread has stopped")
        await threads.loop.run_in_executor(threads.pinger, _ping, threads.ping_conn)


def _ping(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise as_store_error(exc) from exc


def _bound(
    fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs
) -> Callable[[sqlite3.Connection], T]:
    def read(conn: sqlite3.Connection) -> T:
        return fn(conn, *args, **kwargs)

    return read


def _read_idle(idle: queue.SimpleQueue[sqlite3.Connection], read: Callable[[sqlite3.Connection], T]) -> T:
    """On a reader thread: `read` in one snapshot, on a connection no other thread is using."""
    conn = idle.get_nowait()  # there are as many connections as reader threads
    try:
        return reads.in_snapshot(conn, functools.partial(read, conn))
    finally:
        idle.put(conn)


def _release_soon(threads: _Threads, _: concurrent.futures.Future[Any]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for a turn any more
        threads.loop.call_soon_threadsafe(threads.heavy_reads.release)


async def _shutdown(threads: _Threads) -> None:
    if not threads.stopped.done():
        threads.queue.put(_STOP)  # queued after every pending write, which all commit first
        await asyncio.wrap_future(threads.stopped)
    await threads.loop.run_in_executor(threads.pinger, _close_readers, threads)
    threads.pinger.shutdown(wait=False)
    threads.lock.release()


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
        return as_store_error(exc), None
    conn.execute("RELEASE write")
    return None, value


def _rollback(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):  # no transaction was open
        conn.execute("ROLLBACK")


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
        push.release_all_claims(conn)  # this process owns the file (its lock): claims left by an earlier one are void
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_reader(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def _connect_readers(threads: _Threads, path: Path) -> None:
    """The readiness check's connection, then one for each reader thread."""
    threads.ping_conn = _connect_reader(path)
    threads.connections.append(threads.ping_conn)
    for _ in range(READERS):
        conn = _connect_reader(path)
        threads.connections.append(conn)
        threads.idle.put(conn)


def _close_readers(threads: _Threads) -> None:
    """Wait for the reads under way, then close every reader connection."""
    threads.reader.shutdown(wait=True)
    for conn in threads.connections:
        conn.close()
