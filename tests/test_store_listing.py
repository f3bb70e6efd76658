"""ListTasks on every store: the counts it reports (kept with the tasks) and its pages by token, under every
filter the spec defines, checked against the tasks the test wrote; then each store's query plans."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test extra
from test_stores import COMPLETED, OWNER, SUBMITTED, T0, WORKING, Manager, message, query

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import PostgresStore, SqliteStore, TaskStore, sqlite_reads
from a2a_grpc.store.base import TaskQuery
from a2a_grpc.store.postgres import _list_tasks as postgres_list_tasks

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


# -- SQLite: migrating a file made before the counts -----------------------------------------------


async def test_sqlite_counts_the_tasks_of_a_file_made_before_the_counts(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
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
        conn.execute("UPDATE schema_version SET version = 5")
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
                assert plan and all(step.startswith("SEARCH ") and " USING " in step for step in plan), (
                    statement,
                    plan,
                )
                if "FROM tasks" not in statement:
                    continue
                assert "COUNT(*)" not in statement or q.status_after_us is not None, statement
                bounds = plan[0][plan[0].index("(") :]
                for constraint in tasks_constraints(q, None if "COUNT(*)" in statement else cursor):
                    assert constraint in bounds, (statement, plan)


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
    Bitmap Index Scan) on `tasks` whose Index Cond holds every filter (and a page's cursor), no Seq Scan and no Sort. The session sets
    enable_seqscan = off: on a table this small PostgreSQL would rightly read it all, so the plan proves that an
    index CAN serve each query, which is what a large table needs."""
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
                assert "Seq Scan" not in plan, (sql, plan)
                scans = [line for line in plan.splitlines() if " Index " in line and " on tasks" in line]
                assert scans, (sql, plan)
                conditions = plan[plan.index("Index Cond: ") :].splitlines()[0]
                assert " Sort " not in plan, (sql, plan)
                for column in pg_constraints(q, None if "COUNT(*)" in sql else cursor):
                    assert column in conditions, (sql, plan)
    finally:
        await conn.close()


def pg_constraints(q: TaskQuery, cursor: tuple[int, str] | None) -> list[str]:
    wanted = ["owner = "] + ["context_id = "] * bool(q.context_id) + ["state = "] * bool(q.state)
    wanted += ["status_ts_us >= "] * (q.status_after_us is not None)
    return wanted + ["ROW(status_ts_us, id) < ROW("] * (cursor is not None)
