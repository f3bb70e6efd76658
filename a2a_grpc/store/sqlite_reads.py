"""The SQLite store's reads: run on the reader thread, each inside one read transaction (a consistent
snapshot, `in_snapshot`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RUNNING_STATES
from a2a_grpc.store._codec import encode_task_cursor
from a2a_grpc.store.base import LoadedTask, TaskEvent, TaskPage, TaskQuery, bounded_page, check_kept, tasks_within
from a2a_grpc.store.sqlite_errors import as_store_error

T = TypeVar("T")

_SELECT_EVENTS: Final = "SELECT seq, state, body FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?"
SELECT_CHUNKS: Final = "SELECT artifact_id, append, chunk FROM artifacts WHERE task_id = ? ORDER BY seq"
_TASK_COLUMNS: Final = "id, owner, context_id, status, metadata, status_ts_us"
# A listed task's stored bytes (SQLite's length() of a blob reads no content): its history, with its artifacts.
_HISTORY_BYTES: Final = "(SELECT COALESCE(SUM(LENGTH(message)), 0) FROM history h WHERE h.task_id = tasks.id)"
_CHUNK_BYTES: Final = "(SELECT COALESCE(SUM(LENGTH(chunk)), 0) FROM artifacts a WHERE a.task_id = tasks.id)"


def in_snapshot(conn: sqlite3.Connection, read: Callable[[], T]) -> T:
    try:
        conn.execute("BEGIN")
        try:
            return read()
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise as_store_error(exc) from exc


def get_task(conn: sqlite3.Connection, task_id: str, owner: str) -> a2a_pb2.Task | None:
    loaded = load_versioned_task(conn, task_id, owner)
    return None if loaded is None else loaded.task


def load_versioned_task(conn: sqlite3.Connection, task_id: str, owner: str) -> LoadedTask | None:
    row = conn.execute(f"SELECT {_TASK_COLUMNS}, version, seq FROM tasks WHERE id = ?", (task_id,)).fetchone()
    if row is None or row[1] != owner:
        return None
    return LoadedTask(_load_task(conn, row[:-2], include_artifacts=True), int(row[-2]), int(row[-1]))


def read_events(conn: sqlite3.Connection, task_id: str, after: int, limit: int, max_bytes: int) -> list[TaskEvent]:
    """A page of the log (`TaskStore.read_events`): the rows past the page's bytes are not read."""
    with contextlib.closing(conn.execute(_SELECT_EVENTS, (task_id, after, limit))) as rows:
        page = bounded_page((TaskEvent(*row) for row in rows), limit, max_bytes)
    check_kept(task_id, after, page, page[-1].seq if page else _last_seq(conn, task_id))
    return page


def _last_seq(conn: sqlite3.Connection, task_id: str) -> int:
    row = conn.execute("SELECT seq FROM tasks WHERE id = ?", (task_id,)).fetchone()
    return 0 if row is None else int(row[0])


def running_tasks(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    running = tuple(sorted(RUNNING_STATES))
    rows = conn.execute("SELECT id, owner FROM tasks WHERE state IN (?, ?)", running).fetchall()
    return [(str(task_id), str(owner)) for task_id, owner in rows]


def list_tasks(conn: sqlite3.Connection, query: TaskQuery, cursor: tuple[int, str] | None) -> TaskPage:
    where, params = _task_filters(query)
    total = count_tasks(conn, query, where, params)
    if cursor is not None:
        where += " AND (status_ts_us, id) < (?, ?)"
        params += cursor
    size = f"LENGTH(status) + COALESCE(LENGTH(metadata), 0) + {_HISTORY_BYTES}" + (
        f" + {_CHUNK_BYTES}" if query.include_artifacts else ""
    )
    sql = f"SELECT {_TASK_COLUMNS}, {size} FROM tasks WHERE {where} ORDER BY status_ts_us DESC, id DESC LIMIT ?"
    rows = conn.execute(sql, (*params, query.page_size + 1)).fetchall()
    sizes = tasks_within((row[6] for row in rows), query.page_size, query.max_bytes)
    page = rows[: len(sizes) if query.max_bytes is not None else query.page_size]
    token = encode_task_cursor(page[-1][5], page[-1][0]) if len(rows) > len(page) and page else ""
    tasks = [_load_task(conn, row[:6], query.include_artifacts) for row in page]
    return TaskPage(tasks=tasks, next_page_token=token, total_size=total, sizes=sizes)


def count_tasks(conn: sqlite3.Connection, query: TaskQuery, where: str, params: list[object]) -> int:
    """How many tasks match: the sum of the kept counts (a row per state at most), or, under a timestamp bound,
    whose count no table keeps, a count over the matching range of an index."""
    if query.status_after_us is not None:
        return int(conn.execute(f"SELECT COUNT(*) FROM tasks WHERE {where}", params).fetchone()[0])
    table, keys = (
        ("context_counts", "owner = ? AND context_id = ?") if query.context_id else ("task_counts", "owner = ?")
    )
    args: list[object] = [query.owner, query.context_id] if query.context_id else [query.owner]
    if query.state:
        keys += " AND state = ?"
        args.append(query.state)
    return int(conn.execute(f"SELECT COALESCE(SUM(n), 0) FROM {table} WHERE {keys}", args).fetchone()[0])


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
        task.artifacts.extend(merge_chunks(conn.execute(SELECT_CHUNKS, (task_id,))))
    return task


def merge_chunks(chunks: Iterable[tuple[str, int, bytes]]) -> list[a2a_pb2.Artifact]:
    """Replay the stored artifact chunks in order, as the task manager applied them."""
    merged: list[a2a_pb2.Artifact] = []
    for _, append, blob in chunks:
        apply_artifact_chunk(merged, a2a_pb2.Artifact.FromString(blob), bool(append))
    return merged
