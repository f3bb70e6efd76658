"""ListTasks on every store: the counts it reports (kept with the tasks) and its pages by token, under every
filter the spec defines, checked against the tasks the test wrote; then each store's query plans."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
from test_stores import COMPLETED, OWNER, SUBMITTED, T0, WORKING, Manager, message, query, status

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import PostgresStore, SqliteStore, TaskStore, TaskWrite, VersionConflictError, sqlite_reads
from a2a_grpc.store.base import TaskQuery
from a2a_grpc.store.postgres import _list_tasks as postgres_list_tasks
from a2a_grpc.store.postgres_counts import uncount_removed
from a2a_grpc.store.postgres_schema import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from a2a_grpc.store.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

FAILED = a2a_pb2.TASK_STATE_FAILED
CONTEXTS = ("c1", "c2", "")
STATES = (SUBMITTED, WORKING, COMPLETED, FAILED)


@dataclass(slots=True)
class Model:
    """What the test stored: each task's owner, context, state and status time."""

    tasks: dict[str, tuple[str, str, int, int]]

    def expected(self, q: TaskQuery) -> list[str]:
        matching = [
            (ts, task_id)
            for task_id, (owner, context_id, state, ts) in self.tasks.items()
            if owner == q.owner
            and (not q.context_id or context_id == q.context_id)
            and (not q.state or state == q.state)
            and (q.status_after_us is None or ts >= q.status_after_us)
        ]
        return [task_id for _, task_id in sorted(matching, reverse=True)]


def every_filter(owner: str = OWNER) -> list[TaskQuery]:
    """Each combination of the filters: context, status, a status time bound."""
    return [
        query(owner=owner, context_id=context_id, state=state, status_after_us=after, page_size=3)
        for context_id, state, after in itertools.product(("", "c1", "c2", "c9"), (0, *STATES), (None, T0 + 7))
    ]


async def stored_model(store: TaskStore) -> tuple[Manager, Model]:
    """Tasks of two owners in three contexts, moved through states (some twice at one time, one back)."""
    manager = Manager(store)
    model = Model({})
    for i in range(14):
        owner = "bob" if i % 5 == 4 else OWNER
        context_id = CONTEXTS[i % 3]
        await manager.create(f"t{i:02}", owner=owner, context_id=context_id, ts_us=T0 + i // 2)
        model.tasks[f"t{i:02}"] = (owner, context_id, SUBMITTED, T0 + i // 2)
    moves = [("t01", WORKING, 20), ("t01", COMPLETED, 21), ("t03", WORKING, 3), ("t05", FAILED, 22)]
    moves += [("t06", WORKING, 6), ("t06", WORKING, 23), ("t08", COMPLETED, 24), ("t12", WORKING, 2)]
    for task_id, state, at in moves:
        await manager.update(task_id, state=state, ts_us=T0 + at)
        owner, context_id, _, _ = model.tasks[task_id]
        model.tasks[task_id] = (owner, context_id, state, T0 + at)
    await manager.update("t00", history=[message("more")])  # a write that leaves the status as it is
    return manager, model


async def test_total_size_counts_each_filter_after_creates_and_state_changes(store: TaskStore) -> None:
    _, model = await stored_model(store)
    for owner in (OWNER, "bob", "nobody"):
        for q in every_filter(owner):
            page = await store.list_tasks(q)
            assert page.total_size == len(model.expected(q)), q


async def test_pages_by_token_under_each_filter_list_every_match_once_in_order(store: TaskStore) -> None:
    _, model = await stored_model(store)
    for q in every_filter():
        seen: list[str] = []
        for _ in range(len(model.tasks)):
            page = await store.list_tasks(q)
            assert page.total_size == len(model.expected(q)), q
            seen += [task.id for task in page.tasks]
            if not page.next_page_token:
                break
            q.page_token = page.next_page_token
        assert seen == model.expected(q), q


async def test_counts_follow_a_task_that_changes_state_between_pages(store: TaskStore) -> None:
    manager, model = await stored_model(store)
    working = query(state=WORKING, page_size=1)
    first = await store.list_tasks(working)
    await manager.update("t02", state=WORKING, ts_us=T0)  # older than the first page: on a later one
    model.tasks["t02"] = (OWNER, CONTEXTS[2], WORKING, T0)
    working.page_token = first.next_page_token
    later = await store.list_tasks(working)
    assert later.total_size == first.total_size + 1 == len(model.expected(working))


async def test_a_refused_write_changes_no_count(store: TaskStore) -> None:
    """Writes handed over together, one refused (a second create of a task): the counts hold the others only."""
    task = a2a_pb2.Task(id="t1", context_id="c1", status=status(SUBMITTED, T0))
    writes = [
        TaskWrite("t1", 1, owner=OWNER, task=task),
        TaskWrite("t1", 1, owner=OWNER, task=task),
        TaskWrite("t1", 2, status=status(WORKING, T0 + 1)),
    ]
    results = await asyncio.gather(*(store.apply(w) for w in writes), return_exceptions=True)
    assert [type(r) for r in results] == [type(None), VersionConflictError, type(None)]
    for context_id, state, expected in (("", 0, 1), ("", WORKING, 1), ("", SUBMITTED, 0), ("c1", WORKING, 1)):
        assert (await store.list_tasks(query(context_id=context_id, state=state))).total_size == expected


async def test_task_retention_takes_removed_tasks_out_of_counts_and_pages(store: TaskStore) -> None:
    _, model = await stored_model(store)
    final = {task_id for task_id, (_, _, state, _) in model.tasks.items() if state in (COMPLETED, FAILED)}
    assert await store.remove_final_tasks(60.0, batch=2) == len(final)
    kept = Model({task_id: stored for task_id, stored in model.tasks.items() if task_id not in final})
    for owner in (OWNER, "bob"):
        for q in every_filter(owner):
            page = await store.list_tasks(q)
            assert page.total_size == len(kept.expected(q)), q
            assert [task.id for task in page.tasks] == kept.expected(q)[: q.page_size], q


# -- SQLite: migrating a file made before the counts -----------------------------------------------


async def test_sqlite_counts_the_tasks_of_a_file_from_before_the_counts(tmp_path: Path) -> None:
    path = tmp_path / "before.db"
    store = SqliteStore(path)
    await store.open()
    _, model = await stored_model(store)
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for name in ("tasks_count_insert", "tasks_count_state", "tasks_count_delete"):
            conn.execute(f"DROP TRIGGER {name}")
        for name in ("tasks_by_state", "tasks_by_context_state"):
            conn.execute(f"DROP INDEX {name}")
        conn.execute("DROP TABLE task_counts")
        conn.execute("DROP TABLE context_counts")
        conn.execute(f"UPDATE schema_version SET version = {SQLITE_SCHEMA_VERSION - 1}")
    store = SqliteStore(path)
    await store.open()
    try:
        for q in every_filter():
            assert (await store.list_tasks(q)).total_size == len(model.expected(q)), q
        await Manager(store).create("new", context_id="c1", ts_us=T0 + 30)
        model.tasks["new"] = (OWNER, "c1", SUBMITTED, T0 + 30)
        for q in every_filter():
            assert (await store.list_tasks(q)).total_size == len(model.expected(q)), q
    finally:
        await store.close()


# -- PostgreSQL: counts migrated, and kept by replicas writing at once ---------------------------


async def test_postgres_counts_the_tasks_of_a_database_from_before_the_counts(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    _, model = await stored_model(store)
    await store.close()
    db = await asyncpg.connect(postgres_url)
    try:
        await db.execute(
            "DROP INDEX tasks_by_state; DROP INDEX tasks_by_context_state; DROP TABLE task_counts;"
            f" DROP TABLE context_counts; UPDATE schema_version SET version = {POSTGRES_SCHEMA_VERSION - 1}"
        )
    finally:
        await db.close()
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    try:
        for q in every_filter():
            assert (await store.list_tasks(q)).total_size == len(model.expected(q)), q
    finally:
        await store.close()


async def test_postgres_replicas_moving_one_owners_tasks_at_once_keep_its_counts(postgres_url: str) -> None:
    """Two replicas create and finish tasks of one owner in one context at once, each batch moving counts
    of several states: every write commits (no deadlock between their batches) and the counts add up."""
    first, second = PostgresStore(postgres_url, pool_size=2), PostgresStore(postgres_url, pool_size=2)
    await asyncio.gather(first.open(), second.open())
    try:

        async def run(store: PostgresStore, name: str) -> None:
            for i in range(40):
                task_id = f"{name}{i}"
                task = a2a_pb2.Task(id=task_id, context_id="c1", status=status(SUBMITTED, T0 + i))
                await asyncio.gather(
                    store.apply(TaskWrite(task_id, 1, owner=OWNER, task=task)),
                    store.apply(TaskWrite(task_id, 2, status=status(WORKING, T0 + i))),
                    store.apply(TaskWrite(task_id, 3, status=status(COMPLETED if i % 2 else FAILED, T0 + i))),
                )

        await asyncio.gather(*(run(store, name) for store, name in ((first, "a"), (second, "b"), (first, "c"))))
        for context_id, state, expected in (("", COMPLETED, 60), ("c1", FAILED, 60), ("c1", 0, 120), ("", WORKING, 0)):
            assert (await first.list_tasks(query(context_id=context_id, state=state))).total_size == expected
    finally:
        await asyncio.gather(first.close(), second.close())


# -- removing tasks (task retention) keeps the counts --------------------------------------------

REMOVED = ("t01", "t05", "t07")


def without_removed(model: Model) -> Model:
    return Model({task_id: kept for task_id, kept in model.tasks.items() if task_id not in REMOVED})


async def test_sqlite_counts_drop_the_tasks_a_delete_removes(tmp_path: Path) -> None:
    """The counts' triggers take a removed task out, whatever deletes it; a count that reaches 0 goes."""
    store = SqliteStore(tmp_path / "removal.db")
    await store.open()
    _, model = await stored_model(store)
    await store.close()
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute(f"DELETE FROM tasks WHERE id IN {REMOVED}")
        assert conn.execute("SELECT COUNT(*) FROM context_counts WHERE n = 0").fetchone() == (0,)
    await store.open()
    try:
        for q in every_filter():
            assert (await store.list_tasks(q)).total_size == len(without_removed(model).expected(q)), q
    finally:
        await store.close()


async def test_postgres_uncount_removed_takes_deleted_tasks_out_of_the_counts(postgres_url: str) -> None:
    """What task retention must do on PostgreSQL: the deleted tasks leave the counts, and a count of theirs that
    reaches 0 goes (a change of state may leave zeros, at most a row per state of a context)."""
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    try:
        _, model = await stored_model(store)
        async with store._pool().acquire() as conn, conn.transaction():
            sql = "DELETE FROM tasks WHERE id = ANY($1::text[]) RETURNING owner, context_id, state"
            removed = [tuple(row) for row in await conn.fetch(sql, list(REMOVED))]
            await uncount_removed(conn, removed)
            left = "SELECT COUNT(*) FROM context_counts WHERE n = 0 AND (owner, context_id, state) = ($1, $2, $3)"
            assert [await conn.fetchval(left, *key) for key in removed] == [0] * len(REMOVED)
        for q in every_filter():
            assert (await store.list_tasks(q)).total_size == len(without_removed(model).expected(q)), q
    finally:
        await store.close()


# -- query plans: each listing query is answered from an index -------------------------------------


def plan_queries(cursor: tuple[int, str]) -> list[tuple[TaskQuery, tuple[int, str] | None]]:
    """Each filter combination, as a first page and as a page reached by its token."""
    return [(q, at) for q in every_filter() for at in (None, cursor)]


def tasks_constraints(q: TaskQuery, cursor: tuple[int, str] | None) -> list[str]:
    """What the index search over `tasks` must be bounded by: every filter, and the cursor."""
    wanted = ["owner=?"]
    wanted += ["context_id=?"] * bool(q.context_id) + ["state=?"] * bool(q.state)
    wanted += ["status_ts_us>?"] * (q.status_after_us is not None)
    return wanted + ["(status_ts_us,id)<(?,?)"] * (cursor is not None)


async def test_sqlite_listing_queries_search_an_index_bounded_by_every_filter(tmp_path: Path) -> None:
    """Every statement a ListTasks page runs, read from SQLite's trace, has an EXPLAIN QUERY PLAN that
    searches an index (or a primary key): no SCAN, no sort in a temporary b-tree. A search over `tasks` is
    bounded by every filter and by the page's cursor, and the tasks are counted only under a timestamp bound
    (whose count no table keeps): otherwise the count is read from the counts the store keeps."""
    store = SqliteStore(tmp_path / "plans.db")
    await store.open()
    await stored_model(store)
    await store.close()
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        for q, cursor in plan_queries((T0 + 5, "t10")):
            traced: list[str] = []
            conn.set_trace_callback(traced.append)
            sqlite_reads.list_tasks(conn, q, cursor)
            conn.set_trace_callback(None)
            for statement in traced:
                plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]
                check_sqlite_plan(q, cursor, statement, plan)


def check_sqlite_plan(q: TaskQuery, cursor: tuple[int, str] | None, statement: str, plan: list[str]) -> None:
    reads = [step for step in plan if step.startswith(("SEARCH ", "SCAN "))]
    assert reads and all(step.startswith("SEARCH ") and " USING " in step for step in reads), (statement, plan)
    assert not any("TEMP B-TREE" in step for step in plan), (statement, plan)
    tasks = [step for step in reads if step.startswith("SEARCH tasks ")]
    if "COUNT(*) FROM tasks" in statement:
        assert q.status_after_us is not None, statement  # else the kept counts answer
        assert all(c in tasks[0] for c in tasks_constraints(q, None)), (statement, plan)
    elif "ORDER BY status_ts_us DESC" in statement:  # the page
        assert all(c in tasks[0] for c in tasks_constraints(q, cursor)), (statement, plan)


class RecordingConnection:
    """Hands the statements a listing runs to a real connection, and keeps them."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.statements: list[tuple[str, tuple[object, ...]]] = []

    async def fetchval(self, sql: str, *args: object) -> object:
        self.statements.append((sql, args))
        return await self.conn.fetchval(sql, *args)

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        self.statements.append((sql, args))
        rows: list[asyncpg.Record] = await self.conn.fetch(sql, *args)
        return rows


async def test_postgres_listing_queries_use_an_index_bounded_by_every_filter(postgres_url: str) -> None:
    """Every statement a ListTasks page runs has an EXPLAIN with an index scan (Index Scan, Index Only Scan or
    Bitmap Index Scan), no Seq Scan and no Sort. The page's scan of `tasks` is bounded by every filter and its
    cursor (Index Cond), the tasks are counted only under a timestamp bound (then over an index range bounded by
    every filter), otherwise the count reads the kept counts by their key. The session sets enable_seqscan =
    off: on tables this small PostgreSQL would rightly read them whole, so the plan proves that an index CAN
    serve each query, which is what a large table needs."""
    store = PostgresStore(postgres_url, pool_size=2)
    await store.open()
    try:
        await stored_model(store)
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("ANALYZE; SET enable_seqscan = off")
        for q, cursor in plan_queries((T0 + 5, "t10")):
            recording = RecordingConnection(conn)
            await postgres_list_tasks(cast(asyncpg.Connection, recording), q, cursor)
            for sql, args in recording.statements:
                plan = "\n".join(row[0] for row in await conn.fetch(f"EXPLAIN {sql}", *args))
                check_postgres_plan(q, cursor, sql, plan)
    finally:
        await conn.close()


def check_postgres_plan(q: TaskQuery, cursor: tuple[int, str] | None, sql: str, plan: str) -> None:
    assert "Seq Scan" not in plan and " Sort " not in plan, (sql, plan)
    assert " Index Scan " in plan or " Index Only Scan " in plan or "Bitmap Index Scan" in plan, (sql, plan)
    conditions = plan[plan.index("Index Cond: ") :].splitlines()[0]
    if "COUNT(*) FROM tasks" in sql:
        assert q.status_after_us is not None, sql  # else the kept counts answer
        assert all(c in conditions for c in pg_constraints(q, None)), (sql, plan)
    elif "ORDER BY t.status_ts_us DESC" in sql:  # the page
        assert all(c in conditions for c in pg_constraints(q, cursor)), (sql, plan)
    elif "_counts" in sql:
        wanted = ["owner = "] + ["context_id = "] * bool(q.context_id) + ["state = "] * bool(q.state)
        assert all(c in conditions for c in wanted), (sql, plan)


def pg_constraints(q: TaskQuery, cursor: tuple[int, str] | None) -> list[str]:
    wanted = ["owner = "] + ["context_id = "] * bool(q.context_id) + ["state = "] * bool(q.state)
    wanted += ["status_ts_us >= "] * (q.status_after_us is not None)
    return wanted + ["ROW(status_ts_us, id) < ROW("] * (cursor is not None)
