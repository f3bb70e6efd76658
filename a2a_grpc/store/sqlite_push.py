"""The SQLite store's push-notification configs, each with its cursor into its task's event log and the claim
of whoever delivers to it.

The writes (`put_config`, `delete_config`, `claim`, `ack`, `release`) are jobs of the store's writer thread,
run inside its transaction (a claim reads its targets' first due events there too, saving each courier a
read); the reads (`get_config`, `list_configs`) run on its reader thread. Claims hold until a wall-clock
time in microseconds, so that they mean the same after a restart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store._codec import encode_config_cursor, now_us
from a2a_grpc.store.base import EVENT_PAGE_BYTES, EventsPrunedError, PushTarget, TaskEvent
from a2a_grpc.store.sqlite_reads import read_events
from a2a_grpc.store.sqlite_schema import TERMINAL_SQL


def _finished_at(cursor: str) -> str:
    """SQL: whether a config of task ?1 with the cursor `cursor` is finished (caught up with a final task)."""
    return f"COALESCE((SELECT t.state IN {TERMINAL_SQL} AND t.seq <= {cursor} FROM tasks t WHERE t.id = ?1), 0)"


# The cursor of a new config defaults to its task's last event, read by the same statement.
_PUT_CURSOR: Final = "COALESCE(?5, (SELECT seq FROM tasks WHERE id = ?1), 0)"
_PUT: Final = (
    "INSERT INTO push_configs (task_id, config_id, owner, blob, delivered, finished)"
    f" VALUES (?1, ?2, ?3, ?4, {_PUT_CURSOR}, {_finished_at(_PUT_CURSOR)})"
    " ON CONFLICT (task_id, config_id) DO UPDATE"
    " SET owner = excluded.owner, blob = excluded.blob, delivered = COALESCE(?5, delivered),"
    f" finished = {_finished_at('COALESCE(?5, push_configs.delivered)')}"
)
_DELETE: Final = "DELETE FROM push_configs WHERE task_id = ? AND config_id = ? AND owner = ?"
_GET: Final = "SELECT blob FROM push_configs WHERE task_id = ? AND config_id = ? AND owner = ?"
_LIST: Final = (
    "SELECT config_id, blob FROM push_configs WHERE task_id = ? AND owner = ?"
    " AND (? IS NULL OR config_id > ?) ORDER BY config_id LIMIT ?"
)
# A config is due when its task's last event is past its cursor: a comparison across two tables, which no
# index serves. So a sweep reads every open config (push_configs_open: not caught up with a final task) and
# its task's row, by primary key, until it has `limit` due ones. A claim of named tasks reads their configs, by key.
_DUE_COLUMNS: Final = (
    "SELECT p.task_id, p.config_id, p.owner, p.blob, p.delivered, t.seq"
    " FROM push_configs p JOIN tasks t ON t.id = p.task_id"
)
_DUE_NOW: Final = "p.finished = 0 AND t.seq > p.delivered AND (p.claimed_until_us IS NULL OR p.claimed_until_us < ?1)"
_DUE: Final = f"{_DUE_COLUMNS} WHERE {_DUE_NOW} LIMIT ?2"
_DUE_OF_TASK: Final = f"{_DUE_COLUMNS} WHERE p.task_id = ?3 AND {_DUE_NOW} LIMIT ?2"
_CLAIM: Final = "UPDATE push_configs SET claimed_by = ?, claimed_until_us = ? WHERE task_id = ? AND config_id = ?"
_ACK: Final = (
    "UPDATE push_configs SET delivered = MAX(delivered, ?4), claimed_until_us = ?5,"
    f" finished = {_finished_at('MAX(push_configs.delivered, ?4)')}"
    " WHERE task_id = ?1 AND config_id = ?2 AND claimed_by = ?3"
)
_RELEASED_CURSOR: Final = "MAX(push_configs.delivered, COALESCE(?4, push_configs.delivered))"
_RELEASE: Final = (
    f"UPDATE push_configs SET delivered = {_RELEASED_CURSOR}, claimed_by = NULL, claimed_until_us = NULL,"
    f" finished = {_finished_at(_RELEASED_CURSOR)} WHERE task_id = ?1 AND config_id = ?2 AND claimed_by = ?3"
)

ClaimPayload: TypeAlias = tuple[str, float, int, Sequence[str] | None, int]
# (task id, config id, owner, serialized config, cursor or None for the task's last event)
ConfigRow: TypeAlias = tuple[str, str, str, bytes, int | None]


def config_row(owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None) -> ConfigRow:
    return (config.task_id, config.id, owner, config.SerializeToString(), delivered)


def put_config(conn: sqlite3.Connection, payload: ConfigRow) -> None:
    conn.execute(_PUT, payload)


def delete_config(conn: sqlite3.Connection, payload: tuple[str, str, str]) -> bool:
    """payload: (task id, config id, owner)."""
    return conn.execute(_DELETE, payload).rowcount > 0


def claim(conn: sqlite3.Connection, payload: ClaimPayload) -> list[PushTarget]:
    """payload: (claimer, lease in seconds, limit, task ids or None for all, events to read with each).
    The writer's transaction makes the select and the update one step: no other write comes between them."""
    claimer, lease_seconds, limit, task_ids, events = payload
    now = now_us()
    rows = _due(conn, now, limit, task_ids)
    until = now + _micros(lease_seconds)
    conn.executemany(_CLAIM, [(claimer, until, task_id, config_id) for task_id, config_id, *_ in rows])
    return [
        PushTarget(
            owner,
            a2a_pb2.TaskPushNotificationConfig.FromString(blob),
            int(delivered),
            int(latest),
            _due_events(conn, task_id, delivered, events),
        )
        for task_id, _, owner, blob, delivered, latest in rows
    ]


def _due_events(conn: sqlite3.Connection, task_id: str, after: int, limit: int) -> tuple[TaskEvent, ...]:
    """A page of the events after `after`; none when the log no longer holds the first of them."""
    if not limit:
        return ()
    try:
        return tuple(read_events(conn, task_id, after, limit, EVENT_PAGE_BYTES))
    except EventsPrunedError:
        return ()


def _due(conn: sqlite3.Connection, now: int, limit: int, task_ids: Sequence[str] | None) -> list[Any]:
    if task_ids is None:
        return conn.execute(_DUE, (now, limit)).fetchall()
    rows: list[Any] = []
    for task_id in dict.fromkeys(task_ids):  # each once: the claims are written after every read
        if len(rows) >= limit:
            break
        rows += conn.execute(_DUE_OF_TASK, (now, limit - len(rows), task_id)).fetchall()
    return rows


def ack(conn: sqlite3.Connection, payload: tuple[str, str, int, str, float]) -> bool:
    """payload: (task id, config id, delivered event, claimer, lease in seconds)."""
    task_id, config_id, seq, claimer, lease_seconds = payload
    until = now_us() + _micros(lease_seconds)
    return conn.execute(_ACK, (task_id, config_id, claimer, seq, until)).rowcount > 0


def release(conn: sqlite3.Connection, payload: tuple[str, str, str, int | None]) -> None:
    """payload: (task id, config id, claimer, delivered event or None)."""
    conn.execute(_RELEASE, payload)


def get_config(
    conn: sqlite3.Connection, owner: str, task_id: str, config_id: str
) -> a2a_pb2.TaskPushNotificationConfig | None:
    row = conn.execute(_GET, (task_id, config_id, owner)).fetchone()
    return None if row is None else a2a_pb2.TaskPushNotificationConfig.FromString(row[0])


def list_configs(
    conn: sqlite3.Connection, owner: str, task_id: str, page_size: int, after: str | None
) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
    rows = conn.execute(_LIST, (task_id, owner, after, after, page_size + 1)).fetchall()
    page = rows[:page_size]
    token = encode_config_cursor(page[-1][0]) if len(rows) > len(page) and page else ""
    return [a2a_pb2.TaskPushNotificationConfig.FromString(blob) for _, blob in page], token


def release_all_claims(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE push_configs SET claimed_by = NULL, claimed_until_us = NULL WHERE claimed_by IS NOT NULL")


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)
