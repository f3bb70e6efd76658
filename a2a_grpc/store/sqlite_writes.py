"""The SQLite store's task writes: reduced to bytes and plain values on the event loop (`prepare`), then
applied on the writer thread, inside its transaction (`apply_write`). A write checks the task's stored
version, appends its history, artifact chunks and events, and compacts a finished task's artifacts. Old final
tasks lose their events (`prune_events`), later the whole task (`remove_final_tasks`)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import TERMINAL_STATES
from a2a_grpc.store._codec import now_us, status_ts_us
from a2a_grpc.store.base import TaskWrite, VersionConflictError
from a2a_grpc.store.sqlite_push import ConfigRow, config_row, put_config
from a2a_grpc.store.sqlite_reads import SELECT_CHUNKS, merge_chunks
from a2a_grpc.store.sqlite_schema import TERMINAL_SQL

_INSERT_TASK: Final = (
    "INSERT INTO tasks (id, owner, context_id, state, status_ts_us, version, status, metadata, created_us, seq)"
    " VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_INSERT_HISTORY: Final = "INSERT INTO history (task_id, seq, message) VALUES (?, ?, ?)"
_TRIM_HISTORY: Final = (
    "DELETE FROM history WHERE task_id = ? AND seq <= (SELECT MAX(seq) FROM history WHERE task_id = ?) - ?"
)
_INSERT_CHUNK: Final = "INSERT INTO artifacts (task_id, seq, artifact_id, append, chunk) VALUES (?, ?, ?, ?, ?)"
_INSERT_EVENT: Final = "INSERT INTO task_events (task_id, seq, state, body) VALUES (?, ?, ?, ?)"
_PRUNE_EVENTS: Final = (
    "DELETE FROM task_events WHERE (task_id, seq) IN (SELECT e.task_id, e.seq FROM tasks t"
    f" JOIN task_events e ON e.task_id = t.id WHERE t.state IN {TERMINAL_SQL} AND t.status_ts_us < ? LIMIT ?)"
)

# The tasks final the longest, through the index tasks_final.
OLDEST_FINAL_TASKS: Final = (
    f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} AND status_ts_us < ? ORDER BY status_ts_us LIMIT ?"
)
# What a task holds, deleted before the task (history and artifacts reference it).
_DELETE_HELD: Final = tuple(
    f"DELETE FROM {table} WHERE task_id = ?" for table in ("task_events", "history", "artifacts", "push_configs")
)


@dataclass(slots=True)
class _Status:
    state: int
    ts_us: int
    blob: bytes


@dataclass(slots=True)
class PreparedWrite:
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
    history_kept: int | None = None
    push_config: ConfigRow | None = None  # on a create: the config sent with the task's first message

    @property
    def seq(self) -> int:
        """The number of the write's last event; 0 when it has none."""
        return self.events[-1][1] if self.events else 0


def prepare(write: TaskWrite) -> PreparedWrite:
    if write.version == 1:
        return _prepare_create(write)
    status = None if write.status is None else _prepare_status(write.status)
    history = [message.SerializeToString() for message in write.history]
    chunks = [_chunk(artifact, append) for artifact, append in write.artifacts]
    events = _event_rows(write)
    return PreparedWrite(
        write.task_id, write.version, status, None, history, chunks, events, history_kept=write.history_kept
    )


def _prepare_create(write: TaskWrite) -> PreparedWrite:
    task = write.task
    if task is None:
        raise ValueError(f"create write for task {write.task_id!r} has no task")
    metadata = task.metadata.SerializeToString() if task.HasField("metadata") else None
    history = [message.SerializeToString() for message in task.history]
    chunks = [_chunk(artifact, False) for artifact in task.artifacts]
    return PreparedWrite(
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
        push_config=None if write.push_config is None else config_row(write.owner, write.push_config, 0),
    )


def _event_rows(write: TaskWrite) -> list[tuple[str, int, int, bytes]]:
    return [(write.task_id, event.seq, event.state, event.body) for event in write.events]


def _prepare_status(status: a2a_pb2.TaskStatus) -> _Status:
    return _Status(status.state, status_ts_us(status), status.SerializeToString())


def _chunk(artifact: a2a_pb2.Artifact, append: bool) -> tuple[str, bool, bytes]:
    return artifact.artifact_id, append, artifact.SerializeToString()


def apply_write(conn: sqlite3.Connection, write: PreparedWrite) -> None:
    if write.version == 1:
        _insert_task(conn, write)
        if write.push_config is not None:
            put_config(conn, write.push_config)
        history_seq = chunk_seq = 0
    else:
        _update_task(conn, write)
        history_seq = _next_seq(conn, "history", write.task_id) if write.history else 0
        chunk_seq = _next_seq(conn, "artifacts", write.task_id) if write.chunks else 0
    if write.history:
        rows = [(write.task_id, history_seq + i, blob) for i, blob in enumerate(write.history)]
        conn.executemany(_INSERT_HISTORY, rows)
        if write.history_kept is not None:
            conn.execute(_TRIM_HISTORY, (write.task_id, write.task_id, write.history_kept))
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
    rows = conn.execute(SELECT_CHUNKS, (task_id,)).fetchall()
    if len({artifact_id for artifact_id, _, _ in rows}) == len(rows):
        return  # one row per artifact already
    merged = merge_chunks(rows)
    conn.execute("DELETE FROM artifacts WHERE task_id = ?", (task_id,))
    compacted = [(task_id, seq, *_chunk(artifact, False)) for seq, artifact in enumerate(merged)]
    conn.executemany(_INSERT_CHUNK, compacted)


def _insert_task(conn: sqlite3.Connection, write: PreparedWrite) -> None:
    status = write.status
    assert status is not None  # _prepare_create always sets it
    row = (write.task_id, write.owner, write.context_id, status.state, status.ts_us, status.blob)
    cursor = conn.execute(_INSERT_TASK, (*row, write.metadata, write.created_us, write.seq))
    if cursor.rowcount != 1:
        raise VersionConflictError(f"task {write.task_id!r} already exists; write carries version 1")


def _update_task(conn: sqlite3.Connection, write: PreparedWrite) -> None:
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


def prune_events(conn: sqlite3.Connection, payload: tuple[int, int]) -> int:
    """payload: (cutoff, batch). Delete up to `batch` events of tasks final since before the cutoff (µs);
    returns how many went."""
    return conn.execute(_PRUNE_EVENTS, payload).rowcount


def remove_final_tasks(conn: sqlite3.Connection, payload: tuple[int, int]) -> int:
    """payload: (cutoff, batch). Delete up to `batch` tasks final since before the cutoff (µs), the oldest
    first, with all they hold; returns how many went."""
    task_ids = [task_id for (task_id,) in conn.execute(OLDEST_FINAL_TASKS, payload)]
    for task_id in task_ids:
        delete_task(conn, task_id)
    return len(task_ids)


def delete_task(conn: sqlite3.Connection, task_id: str) -> None:
    """Delete a task with its events, history, artifacts and push configs."""
    for statement in _DELETE_HELD:
        conn.execute(statement, (task_id,))
    conn.execute("DELETE FROM tasks WHERE id = ?", (task_id,))


def set_max_pages(conn: sqlite3.Connection, pages: int) -> int:
    return int(conn.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])
