"""The PostgreSQL store's task retention: deleting the tasks final for longer than the retention, a batch a
transaction, by one replica at a time.

The replica removing holds the lease `task-retention` (a row of `leases`): each batch renews it in its own
transaction, and a replica that finds it held by another live one removes nothing. A holder that stops lets
it lapse after LEASE_SECONDS; the next replica to try takes it over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from a2a_grpc.store.postgres_common import row_count, translated
from a2a_grpc.store.postgres_counts import uncount_removed
from a2a_grpc.store.postgres_schema import RETENTION_LEASE, TERMINAL_SQL

if TYPE_CHECKING:
    import asyncpg

# Two rounds of the retention loop (every 5 minutes): the holder keeps the lease while it runs.
LEASE_SECONDS: Final = 600.0

_TAKE_LEASE: Final = (
    "UPDATE leases SET holder = $1, held_until = now() + make_interval(secs => $2)"
    f" WHERE name = '{RETENTION_LEASE}' AND (holder = $1 OR held_until < now())"
)
# The tasks final the longest, through the index tasks_final.
OLDEST_FINAL_TASKS: Final = (
    f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} AND status_ts_us < $1"
    " ORDER BY status_ts_us LIMIT $2 FOR UPDATE SKIP LOCKED"
)
# What a task holds, deleted before the task (events, history and chunks reference it).
_DELETE_HELD: Final = tuple(
    f"DELETE FROM {table} WHERE task_id = ANY($1::text[])"
    for table in ("task_events", "history", "artifact_chunks", "push_configs", "cancel_requests")
)
_DELETE_TASKS: Final = "DELETE FROM tasks WHERE id = ANY($1::text[]) RETURNING owner, context_id, state"


async def remove_final_tasks(pool: asyncpg.Pool, replica_id: str, cutoff_us: int, batch: int) -> int:
    """Delete the tasks final since before `cutoff_us`, `batch` a transaction, while this replica holds the
    lease; returns how many went (0 when another replica holds it)."""
    removed = 0
    while True:
        with translated():
            async with pool.acquire() as conn, conn.transaction():
                if row_count(await conn.execute(_TAKE_LEASE, replica_id, LEASE_SECONDS)) != 1:
                    return removed
                task_ids = [str(row["id"]) for row in await conn.fetch(OLDEST_FINAL_TASKS, cutoff_us, batch)]
                await delete_tasks(conn, task_ids)
        removed += len(task_ids)
        if len(task_ids) < batch:
            return removed


async def delete_tasks(conn: asyncpg.Connection, task_ids: list[str]) -> None:
    """Delete these tasks with their events, history, artifact chunks, push configs and cancel requests, and
    take them out of the task counts."""
    for statement in _DELETE_HELD:
        await conn.execute(statement, task_ids)
    removed = await conn.fetch(_DELETE_TASKS, task_ids)
    await uncount_removed(conn, [(row["owner"], row["context_id"], row["state"]) for row in removed])
