"""The PostgreSQL store's push-notification configs, each with its cursor into its task's event log and the
claim of the replica delivering to it.

Each call is one statement on a pooled connection, outside the write worker's group commit: these are not
versioned task writes, and nothing orders them after queued task writes. Claims hold until a time of the
database's clock, which every replica shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TypeAlias

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store._codec import encode_config_cursor
from a2a_grpc.store.base import InvalidPageTokenError, PushTarget
from a2a_grpc.store.postgres_common import has_nul, row_count, translated
from a2a_grpc.store.postgres_schema import TERMINAL_SQL

if TYPE_CHECKING:
    import asyncpg


def _finished_at(cursor: str) -> str:
    """SQL: whether a config of task $1 with the cursor `cursor` is finished (caught up with a final task)."""
    return f"COALESCE((SELECT t.state IN {TERMINAL_SQL} AND t.seq <= {cursor} FROM tasks t WHERE t.id = $1), false)"


# The cursor of a new config defaults to its task's last event, read by the same statement.
_PUT_CURSOR: Final = "COALESCE($5::bigint, (SELECT seq FROM tasks WHERE id = $1), 0)"
_PUT: Final = (
    "INSERT INTO push_configs (task_id, config_id, owner, blob, delivered, finished)"
    f" VALUES ($1, $2, $3, $4, {_PUT_CURSOR}, {_finished_at(_PUT_CURSOR)})"
    " ON CONFLICT (task_id, config_id) DO UPDATE"
    " SET owner = excluded.owner, blob = excluded.blob, delivered = COALESCE($5::bigint, push_configs.delivered),"
    f" finished = {_finished_at('COALESCE($5::bigint, push_configs.delivered)')}"
)
_GET: Final = "SELECT blob FROM push_configs WHERE task_id = $1 AND config_id = $2 AND owner = $3"
_LIST: Final = (
    "SELECT config_id, blob FROM push_configs WHERE task_id = $1 AND owner = $2"
    " AND ($3::text IS NULL OR config_id > $3) ORDER BY config_id LIMIT $4"
)
_DELETE: Final = "DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2 AND owner = $3"
# A config is due when its task's last event is past its cursor: a comparison across two tables, which no
# index serves, so a sweep reads open configs (push_configs_open: not caught up with a final task) and their
# tasks until it has `limit` due ones; a claim of named tasks reads only their configs, by key. SKIP
# LOCKED passes over the configs another replica is claiming right now; one it claimed after this statement
# began is re-read once locked, and found claimed.
_CLAIM: Final = """
WITH due AS (
    SELECT p.task_id, p.config_id, t.seq AS latest
    FROM push_configs p JOIN tasks t ON t.id = p.task_id
    WHERE {tasks}NOT p.finished AND t.seq > p.delivered AND (p.claimed_until IS NULL OR p.claimed_until < now())
    LIMIT $3
    FOR UPDATE OF p SKIP LOCKED
)
UPDATE push_configs p SET claimed_by = $1, claimed_until = now() + make_interval(secs => $2)
FROM due WHERE p.task_id = due.task_id AND p.config_id = due.config_id
RETURNING p.owner, p.blob, p.delivered, due.latest
"""
_CLAIM_ALL: Final = _CLAIM.format(tasks="")
_CLAIM_OF_TASKS: Final = _CLAIM.format(tasks="p.task_id = ANY($4::text[]) AND ")
_ACK: Final = (
    "UPDATE push_configs SET delivered = GREATEST(delivered, $3), claimed_until = now() + make_interval(secs => $5),"
    f" finished = {_finished_at('GREATEST(push_configs.delivered, $3)')}"
    " WHERE task_id = $1 AND config_id = $2 AND claimed_by = $4"
)
# GREATEST ignores a NULL: without a cursor, the cursor stays.
_RELEASE: Final = (
    "UPDATE push_configs SET delivered = GREATEST(delivered, $4::bigint), claimed_by = NULL, claimed_until = NULL,"
    f" finished = {_finished_at('GREATEST(push_configs.delivered, $4::bigint)')}"
    " WHERE task_id = $1 AND config_id = $2 AND claimed_by = $3"
)


# (task id, config id, owner, serialized config, cursor or None for the task's last event)
ConfigRow: TypeAlias = tuple[str, str, str, bytes, int | None]


def config_row(owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None) -> ConfigRow:
    if has_nul(owner, config.task_id, config.id):
        raise ValueError("a push config's owner, task id and id must not contain NUL")
    return (config.task_id, config.id, owner, config.SerializeToString(), delivered)


async def put_config(pool: asyncpg.Pool | asyncpg.Connection, row: ConfigRow) -> None:
    """Through the pool, or on a connection inside a transaction (the create of the config's task)."""
    with translated():
        await pool.execute(_PUT, *row)


async def get_config(
    pool: asyncpg.Pool, owner: str, task_id: str, config_id: str
) -> a2a_pb2.TaskPushNotificationConfig | None:
    if has_nul(owner, task_id, config_id):
        return None
    with translated():
        blob = await pool.fetchval(_GET, task_id, config_id, owner)
    return None if blob is None else a2a_pb2.TaskPushNotificationConfig.FromString(blob)


async def list_configs(
    pool: asyncpg.Pool, owner: str, task_id: str, page_size: int, after: str | None
) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
    if after is not None and has_nul(after):
        raise InvalidPageTokenError("invalid page token")
    if has_nul(owner, task_id):
        return [], ""
    with translated():
        rows = await pool.fetch(_LIST, task_id, owner, after, page_size + 1)
    page = rows[:page_size]
    token = encode_config_cursor(page[-1]["config_id"]) if len(rows) > len(page) and page else ""
    return [a2a_pb2.TaskPushNotificationConfig.FromString(row["blob"]) for row in page], token


async def delete_config(pool: asyncpg.Pool, owner: str, task_id: str, config_id: str) -> bool:
    if has_nul(owner, task_id, config_id):
        return False
    with translated():
        done = await pool.execute(_DELETE, task_id, config_id, owner)
    return row_count(done) > 0


async def claim(
    pool: asyncpg.Pool, claimer: str, lease_seconds: float, limit: int, task_ids: Sequence[str] | None
) -> list[PushTarget]:
    if has_nul(claimer):
        raise ValueError("a claimer must not contain NUL")
    with translated():
        if task_ids is None:
            rows = await pool.fetch(_CLAIM_ALL, claimer, float(lease_seconds), limit)
        else:
            rows = await pool.fetch(_CLAIM_OF_TASKS, claimer, float(lease_seconds), limit, list(task_ids))
    return [
        PushTarget(
            str(row["owner"]),
            a2a_pb2.TaskPushNotificationConfig.FromString(row["blob"]),
            int(row["delivered"]),
            int(row["latest"]),
        )
        for row in rows
    ]


async def ack(pool: asyncpg.Pool, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
    if has_nul(task_id, config_id, claimer):
        return False  # no stored config or claim holds NUL
    with translated():
        done = await pool.execute(_ACK, task_id, config_id, seq, claimer, float(lease_seconds))
    return row_count(done) > 0


async def release(pool: asyncpg.Pool, task_id: str, config_id: str, claimer: str, delivered: int | None) -> None:
    if has_nul(task_id, config_id, claimer):
        return
    with translated():
        await pool.execute(_RELEASE, task_id, config_id, claimer, delivered)
