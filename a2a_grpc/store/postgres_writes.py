"""The PostgreSQL store's writes: reduced to plain values when `apply` is called (`prepare`), then applied
inside the write worker's transaction (`apply_write`).

A write checks the task's stored version, stores its history, artifact chunks and events, records which
replica runs the task, and (when it has events) notifies the other replicas, which PostgreSQL delivers
at commit: a refused or rolled back write stores and announces nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RUNNING_STATES, TERMINAL_STATES
from a2a_grpc.store._codec import now_us, status_ts_us
from a2a_grpc.store.base import TaskWrite, VersionConflictError, WriteChain
from a2a_grpc.store.postgres_common import as_store_error, has_nul, row_count
from a2a_grpc.store.postgres_counts import CountChange, apply_changes, moved
from a2a_grpc.store.postgres_push import ConfigRow, config_row, put_config
from a2a_grpc.store.postgres_schema import EVENTS_CHANNEL, RUNNING_SQL

if TYPE_CHECKING:
    import asyncpg

_INSERT_TASK: Final = (
    "INSERT INTO tasks (id, owner, context_id, state, status_ts_us, version, status, metadata, created_us, seq, runner)"
    " VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, COALESCE($9::bigint, 0), $10) ON CONFLICT (id) DO NOTHING"
)
_UPDATE_VERSION: Final = (
    "UPDATE tasks SET version = $3, seq = COALESCE($4::bigint, seq),"
    f" runner = CASE WHEN state IN {RUNNING_SQL} THEN $5::text END WHERE id = $1 AND version = $2"
)
# Returns the state the task leaves (read under the row's lock, as the version check is), for the counts.
_UPDATE_STATUS: Final = (
    "UPDATE tasks t SET version = $3, seq = COALESCE($4::bigint, t.seq), runner = $5,"
    " state = $6, status_ts_us = $7, status = $8"
    " FROM (SELECT state FROM tasks WHERE id = $1 FOR UPDATE) AS old WHERE t.id = $1 AND t.version = $2"
    " RETURNING old.state, t.owner, t.context_id"
)
# Appends after the task's last row; the UPDATE before it holds the task's row lock, so no other
# transaction appends to the same task in between.
_APPEND_HISTORY: Final = """
INSERT INTO history (task_id, seq, blob)
SELECT $1, last.seq + item.n, item.blob
FROM (SELECT COALESCE(MAX(seq), -1) AS seq FROM history WHERE task_id = $1) AS last,
     unnest($2::bytea[]) WITH ORDINALITY AS item (blob, n)
"""
_TRIM_HISTORY: Final = (
    "DELETE FROM history WHERE task_id = $1 AND seq <= (SELECT MAX(seq) FROM history WHERE task_id = $1) - $2"
)
_APPEND_CHUNKS: Final = """
INSERT INTO artifact_chunks (task_id, seq, artifact_id, append, blob)
SELECT $1, last.seq + item.n, item.artifact_id, item.append, item.blob
FROM (SELECT COALESCE(MAX(seq), -1) AS seq FROM artifact_chunks WHERE task_id = $1) AS last,
     unnest($2::text[], $3::boolean[], $4::bytea[]) WITH ORDINALITY AS item (artifact_id, append, blob, n)
"""
# A data-modifying WITH always runs to completion: the events and the notification in one round trip.
_APPEND_EVENTS: Final = f"""
WITH appended AS (
    INSERT INTO task_events (task_id, seq, state, body)
    SELECT $1, item.seq, item.state, item.body
    FROM unnest($2::bigint[], $3::integer[], $4::bytea[]) AS item (seq, state, body)
)
SELECT pg_notify('{EVENTS_CHANNEL}', $5)
"""
_SELECT_CHUNKS: Final = "SELECT artifact_id, append, blob FROM artifact_chunks WHERE task_id = $1 ORDER BY seq"
_DELETE_CHUNKS: Final = "DELETE FROM artifact_chunks WHERE task_id = $1"


@dataclass(slots=True)
class PreparedWrite:
    """A TaskWrite reduced to bytes and plain values when `apply` is called."""

    task_id: str
    version: int
    writer: str  # the id of the replica making the write: the task's runner if it leaves the task running
    status: tuple[int, int, bytes] | None  # (state, timestamp in microseconds, serialized TaskStatus)
    history: list[bytes]
    chunk_ids: list[str] = field(default_factory=list)
    chunk_appends: list[bool] = field(default_factory=list)
    chunk_blobs: list[bytes] = field(default_factory=list)
    event_seqs: list[int] = field(default_factory=list)
    event_states: list[int] = field(default_factory=list)
    event_bodies: list[bytes] = field(default_factory=list)
    owner: str = ""
    context_id: str = ""
    metadata: bytes | None = None  # the task's metadata, on a create
    created_us: int = 0
    history_kept: int | None = None
    push_config: ConfigRow | None = None  # on a create: the config sent with the task's first message
    chain: WriteChain | None = None  # the writes this one follows: none applies once one failed

    @property
    def last_seq(self) -> int | None:
        """The number of the write's last event; None without events (the stored number stays)."""
        return self.event_seqs[-1] if self.event_seqs else None

    @property
    def runner(self) -> str | None:
        """The task's runner after a write that sets its status."""
        return self.writer if self.status is not None and self.status[0] in RUNNING_STATES else None


def prepare(write: TaskWrite, writer: str) -> PreparedWrite:
    if has_nul(write.task_id):
        raise ValueError("a task id must not contain NUL")
    if write.version == 1:
        prepared = _prepare_create(write, writer)
    else:
        status = None if write.status is None else _prepare_status(write.status)
        history = [message.SerializeToString() for message in write.history]
        prepared = PreparedWrite(write.task_id, write.version, writer, status, history)
        prepared.history_kept = write.history_kept
        _add_chunks(prepared, write.artifacts)
    prepared.chain = write.chain
    for event in write.events:
        prepared.event_seqs.append(event.seq)
        prepared.event_states.append(event.state)
        prepared.event_bodies.append(event.body)
    return prepared


def _prepare_create(write: TaskWrite, writer: str) -> PreparedWrite:
    task = write.task
    if task is None:
        raise ValueError(f"create write for task {write.task_id!r} has no task")
    if has_nul(write.task_id, write.owner, task.context_id):
        raise ValueError(f"task {write.task_id!r}: ids and owner must not contain NUL")
    prepared = PreparedWrite(
        write.task_id,
        1,
        writer,
        _prepare_status(task.status),
        [message.SerializeToString() for message in task.history],
        owner=write.owner,
        context_id=task.context_id,
        metadata=task.metadata.SerializeToString() if task.HasField("metadata") else None,
        created_us=now_us(),
        push_config=None if write.push_config is None else config_row(write.owner, write.push_config, 0),
    )
    _add_chunks(prepared, [(artifact, False) for artifact in task.artifacts])
    return prepared


def _prepare_status(status: a2a_pb2.TaskStatus) -> tuple[int, int, bytes]:
    return status.state, status_ts_us(status), status.SerializeToString()


def _add_chunks(prepared: PreparedWrite, chunks: Iterable[tuple[a2a_pb2.Artifact, bool]]) -> None:
    for artifact, append in chunks:
        if has_nul(artifact.artifact_id):
            raise ValueError(f"task {prepared.task_id!r}: an artifact id must not contain NUL")
        prepared.chunk_ids.append(artifact.artifact_id)
        prepared.chunk_appends.append(append)
        prepared.chunk_blobs.append(artifact.SerializeToString())


async def apply_write(conn: asyncpg.Connection, write: PreparedWrite) -> list[CountChange]:
    """Apply the write; returns the changes it makes to the task counts, which the batch applies before it
    commits (`postgres_counts.apply_changes`)."""
    if write.chain is not None and write.chain.failed:
        raise VersionConflictError(
            f"task {write.task_id!r}: a write this one follows failed; write carries version {write.version}"
        )
    if write.version == 1:
        changes = await _insert_task(conn, write)
        if write.push_config is not None:
            await put_config(conn, write.push_config)
    else:
        changes = await _update_task(conn, write)
    if write.history:
        await conn.execute(_APPEND_HISTORY, write.task_id, write.history)
        if write.history_kept is not None:
            await conn.execute(_TRIM_HISTORY, write.task_id, write.history_kept)
    if write.chunk_ids:
        await conn.execute(_APPEND_CHUNKS, write.task_id, write.chunk_ids, write.chunk_appends, write.chunk_blobs)
    if write.event_seqs:
        notice = f"{write.writer} {write.task_id} {write.last_seq}"
        events = (write.event_seqs, write.event_states, write.event_bodies)
        await conn.execute(_APPEND_EVENTS, write.task_id, *events, notice)
    if write.version > 1 and write.status is not None and write.status[0] in TERMINAL_STATES:
        await _compact_artifacts(conn, write.task_id)
    return changes


def chain_failed(write: PreparedWrite) -> None:
    """Mark the chain of a write that failed: no later write of it applies (`WriteChain`)."""
    if write.chain is not None:
        write.chain.failed = True


async def commit_one_by_one(conn: asyncpg.Connection, writes: list[PreparedWrite]) -> list[BaseException | None]:
    """Apply the writes in one transaction, each in a savepoint: a write that fails, fails alone."""
    changes: list[CountChange] = []
    async with conn.transaction():
        errors = [await _in_savepoint(conn, write, changes) for write in writes]
        await apply_changes(conn, changes)
    return errors


async def _in_savepoint(
    conn: asyncpg.Connection, write: PreparedWrite, changes: list[CountChange]
) -> BaseException | None:
    """Apply the write in a savepoint; on success, add the changes it makes to the counts to `changes`."""
    try:
        async with conn.transaction():  # nested: a savepoint
            made = await apply_write(conn, write)
    except Exception as exc:  # whatever went wrong, it fails this write only (and the writes that follow it)
        chain_failed(write)
        return as_store_error(exc)
    changes += made
    return None


async def _insert_task(conn: asyncpg.Connection, write: PreparedWrite) -> list[CountChange]:
    assert write.status is not None  # _prepare_create always sets it
    state, ts_us, blob = write.status
    row = (write.task_id, write.owner, write.context_id, state, ts_us, blob, write.metadata, write.created_us)
    if row_count(await conn.execute(_INSERT_TASK, *row, write.last_seq, write.runner)) != 1:
        raise VersionConflictError(f"task {write.task_id!r} already exists; write carries version 1")
    return [(write.owner, write.context_id, state, 1)]


async def _update_task(conn: asyncpg.Connection, write: PreparedWrite) -> list[CountChange]:
    key = (write.task_id, write.version - 1, write.version, write.last_seq)
    if write.status is None:
        if row_count(await conn.execute(_UPDATE_VERSION, *key, write.writer)) == 1:
            return []
    elif (left := await conn.fetchrow(_UPDATE_STATUS, *key, write.runner, *write.status)) is not None:
        old_state, owner, context_id = left
        return moved(owner, context_id, old_state, write.status[0])
    raise VersionConflictError(
        f"task {write.task_id!r} is absent or not at version {write.version - 1}; write carries version {write.version}"
    )


async def _compact_artifacts(conn: asyncpg.Connection, task_id: str) -> None:
    """Replace a finished task's artifact chunks by one row per artifact as it stands: every chunk of an
    artifact appended to or replaced many times would otherwise stay stored."""
    rows = await conn.fetch(_SELECT_CHUNKS, task_id)
    if len({row["artifact_id"] for row in rows}) == len(rows):
        return  # one row per artifact already
    merged = merge_chunks((row["append"], row["blob"]) for row in rows)
    await conn.execute(_DELETE_CHUNKS, task_id)
    compacted = PreparedWrite(task_id, 0, "", None, [])
    _add_chunks(compacted, [(artifact, False) for artifact in merged])
    await conn.execute(_APPEND_CHUNKS, task_id, compacted.chunk_ids, compacted.chunk_appends, compacted.chunk_blobs)


def merge_chunks(chunks: Iterable[tuple[bool, bytes]]) -> Sequence[a2a_pb2.Artifact]:
    """Replay the stored artifact chunks in order, as the task manager applied them."""
    merged: list[a2a_pb2.Artifact] = []
    for append, blob in chunks:
        apply_artifact_chunk(merged, a2a_pb2.Artifact.FromString(blob), append)
    return merged
