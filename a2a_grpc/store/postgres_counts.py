"""How many tasks each owner has in each state, overall and per context: what ListTasks' total_size reads
instead of counting the tasks (the tables `task_counts` and `context_counts`).

A write batch adds up the changes its writes make to the counts (a created task, a change of state) and
applies them in one statement per table at the end of its transaction, so they commit with the tasks. The
rows are locked in one order (table, then key) by every replica: batches that touch the same counts wait on
each other, never deadlock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, TypeAlias

from a2a_grpc.store.base import TaskQuery

if TYPE_CHECKING:
    import asyncpg

# (owner, context id, state, change): a task entering (+1) or leaving (-1) a state.
CountChange: TypeAlias = tuple[str, str, int, int]

_ADD_TO_OWNER: Final = """
INSERT INTO task_counts (owner, state, n)
SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS change (owner, state, n) ORDER BY owner, state
ON CONFLICT (owner, state) DO UPDATE SET n = task_counts.n + EXCLUDED.n
"""
_ADD_TO_CONTEXT: Final = """
INSERT INTO context_counts (owner, context_id, state, n)
SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[]) AS change (owner, context_id, state, n)
ORDER BY owner, context_id, state
ON CONFLICT (owner, context_id, state) DO UPDATE SET n = context_counts.n + EXCLUDED.n
"""
# After tasks were removed: the counts that reached 0 go, so that the rows of removed contexts do not pile up.
_DROP_EMPTY: Final = """
DELETE FROM context_counts c USING unnest($1::text[], $2::text[], $3::integer[]) AS gone (owner, context_id, state)
WHERE c.n = 0 AND c.owner = gone.owner AND c.context_id = gone.context_id AND c.state = gone.state
"""


def moved(owner: str, context_id: str, old_state: int, new_state: int) -> list[CountChange]:
    """The changes a task's move from one state to another makes (none when it stays in its state)."""
    if old_state == new_state:
        return []
    return [(owner, context_id, old_state, -1), (owner, context_id, new_state, 1)]


async def apply_changes(conn: asyncpg.Connection, changes: Iterable[CountChange]) -> None:
    """Add the changes to the counts, inside the caller's transaction."""
    by_context: Counter[tuple[str, str, int]] = Counter()
    for owner, context_id, state, change in changes:
        by_context[owner, context_id, state] += change
    by_owner: Counter[tuple[str, int]] = Counter()
    for (owner, _, state), change in by_context.items():
        by_owner[owner, state] += change
    owner_rows = sorted((key, n) for key, n in by_owner.items() if n)
    if owner_rows:
        await conn.execute(_ADD_TO_OWNER, *_columns([(*key, n) for key, n in owner_rows], 3))
    context_rows = sorted((key, n) for key, n in by_context.items() if n)
    if context_rows:
        await conn.execute(_ADD_TO_CONTEXT, *_columns([(*key, n) for key, n in context_rows], 4))


async def uncount_removed(conn: asyncpg.Connection, removed: Iterable[tuple[str, str, int]]) -> None:
    """What removing tasks must do to the counts, in the transaction that deletes them: `removed` holds each
    removed task's (owner, context id, state), as `DELETE FROM tasks ... RETURNING owner, context_id, state`
    gives them."""
    gone = list(removed)
    await apply_changes(conn, [(owner, context_id, state, -1) for owner, context_id, state in gone])
    if gone:
        await conn.execute(_DROP_EMPTY, *_columns(sorted(set(gone)), 3))


async def count_tasks(conn: asyncpg.Connection, query: TaskQuery, where: str, params: list[object]) -> int:
    """How many tasks match: the sum of the kept counts (a row per state at most), or, under a timestamp bound,
    whose count no table keeps, a count over the matching range of an index."""
    if query.status_after_us is not None:
        return int(await conn.fetchval(f"SELECT COUNT(*) FROM tasks t WHERE {where}", *params))
    table, keys = (
        ("context_counts", "owner = $1 AND context_id = $2") if query.context_id else ("task_counts", "owner = $1")
    )
    args: list[object] = [query.owner, query.context_id] if query.context_id else [query.owner]
    if query.state:
        args.append(query.state)
        keys += f" AND state = ${len(args)}"
    return int(await conn.fetchval(f"SELECT COALESCE(SUM(n), 0) FROM {table} WHERE {keys}", *args))


def _columns(rows: list[tuple[object, ...]], width: int) -> list[list[object]]:
    return [[row[i] for row in rows] for i in range(width)]
