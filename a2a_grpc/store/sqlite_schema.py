"""The SQLite store's schema: created in a new file, migrated step by step in an older one.

`create_schema` runs on the writer connection before anything else touches the file, in one transaction:
a file is at one schema version or another, never in between.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Final

from a2a_grpc.protocol import TERMINAL_STATES
from a2a_grpc.store.base import StoreError

SCHEMA_VERSION: Final = 6
# Written inline, the same in the index and in the queries, so that SQLite matches the partial index.
TERMINAL_SQL: Final = f"({', '.join(str(int(state)) for state in sorted(TERMINAL_STATES))})"

_TASK_EVENTS: Final = """CREATE TABLE IF NOT EXISTS task_events (
        task_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        state INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID"""

# Final tasks by status time, for pruning their event logs: a task enters it once, as it becomes final.
_TASKS_FINAL: Final = f"CREATE INDEX IF NOT EXISTS tasks_final ON tasks (status_ts_us) WHERE state IN {TERMINAL_SQL}"

# Push configs that may still have events to deliver: all but those caught up with a final task, which gets no
# more events. The sweep for due configs reads these alone, however many finished ones pile up.
_PUSH_CONFIGS_OPEN: Final = (
    "CREATE INDEX IF NOT EXISTS push_configs_open ON push_configs (task_id, config_id) WHERE finished = 0"
)

# What ListTasks reads besides tasks_by_owner and tasks_by_context: the owner's tasks in one state, newest first,
# overall and per context, and how many of the owner's tasks are in each state, overall and per context. The
# counts change in the same transaction as the task, by trigger, whatever changes it: an insert, a change of
# state, a delete.
_TASKS_BY_STATE: Final = (
    "CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (owner, state, status_ts_us DESC, id DESC)",
    "CREATE INDEX IF NOT EXISTS tasks_by_context_state ON tasks (owner, context_id, state, status_ts_us DESC, id DESC)",
)
_COUNT_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS task_counts (
        owner TEXT NOT NULL,
        state INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (owner, state)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS context_counts (
        owner TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (owner, context_id, state)
    ) WITHOUT ROWID""",
)
_COUNT_IN: Final = """
    INSERT INTO task_counts (owner, state, n) VALUES (NEW.owner, NEW.state, 1)
        ON CONFLICT (owner, state) DO UPDATE SET n = n + 1;
    INSERT INTO context_counts (owner, context_id, state, n) VALUES (NEW.owner, NEW.context_id, NEW.state, 1)
        ON CONFLICT (owner, context_id, state) DO UPDATE SET n = n + 1;"""
# A count that reaches 0 goes, so that the rows of removed tasks' contexts do not pile up.
_COUNT_OUT: Final = """
    UPDATE task_counts SET n = n - 1 WHERE owner = OLD.owner AND state = OLD.state;
    UPDATE context_counts SET n = n - 1 WHERE owner = OLD.owner AND context_id = OLD.context_id AND state = OLD.state;
    DELETE FROM context_counts WHERE owner = OLD.owner AND context_id = OLD.context_id AND state = OLD.state AND n = 0;"""
_COUNT_TRIGGERS: Final = (
    f"CREATE TRIGGER IF NOT EXISTS tasks_count_insert AFTER INSERT ON tasks BEGIN {_COUNT_IN} END",
    "CREATE TRIGGER IF NOT EXISTS tasks_count_state AFTER UPDATE OF state ON tasks WHEN OLD.state <> NEW.state"
    f" BEGIN {_COUNT_OUT} {_COUNT_IN} END",
    f"CREATE TRIGGER IF NOT EXISTS tasks_count_delete AFTER DELETE ON tasks BEGIN {_COUNT_OUT} END",
)
_LISTING: Final = (*_TASKS_BY_STATE, *_COUNT_TABLES, *_COUNT_TRIGGERS)
# Counts of the tasks a file holds when it is migrated (made anew: a file set back to an older version may hold
# some); the triggers keep them from then on.
_BACKFILL_COUNTS: Final = (
    "DELETE FROM task_counts",
    "DELETE FROM context_counts",
    "INSERT INTO task_counts (owner, state, n) SELECT owner, state, COUNT(*) FROM tasks GROUP BY owner, state",
    "INSERT INTO context_counts (owner, context_id, state, n)"
    " SELECT owner, context_id, state, COUNT(*) FROM tasks GROUP BY owner, context_id, state",
)

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS tasks (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        status_ts_us INTEGER NOT NULL,
        version INTEGER NOT NULL,
        status BLOB NOT NULL,
        metadata BLOB,
        created_us INTEGER NOT NULL,
        seq INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, status_ts_us DESC, id DESC)",
    "CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (owner, context_id, status_ts_us DESC, id DESC)",
    _TASKS_FINAL,
    """CREATE TABLE IF NOT EXISTS history (
        task_id TEXT NOT NULL REFERENCES tasks (id),
        seq INTEGER NOT NULL,
        message BLOB NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS artifacts (
        task_id TEXT NOT NULL REFERENCES tasks (id),
        seq INTEGER NOT NULL,
        artifact_id TEXT NOT NULL,
        append INTEGER NOT NULL,
        chunk BLOB NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID""",
    _TASK_EVENTS,
    """CREATE TABLE IF NOT EXISTS push_configs (
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        blob BLOB NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0,
        claimed_by TEXT,
        claimed_until_us INTEGER,
        finished INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task_id, config_id)
    ) WITHOUT ROWID""",
    _PUSH_CONFIGS_OPEN,
    *_LISTING,
)

# _MIGRATIONS[n] takes a file from schema version n to n + 1.
_MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {
    1: ("ALTER TABLE tasks ADD COLUMN seq INTEGER NOT NULL DEFAULT 0", _TASK_EVENTS),
    # Push-notification cursors and claims. A config stored before it has been notified of nothing and
    # wants nothing of its task's past: its cursor starts at the task's last event.
    2: (
        "ALTER TABLE push_configs ADD COLUMN delivered INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE push_configs ADD COLUMN claimed_by TEXT",
        "ALTER TABLE push_configs ADD COLUMN claimed_until_us INTEGER",
        "UPDATE push_configs SET delivered = COALESCE((SELECT seq FROM tasks WHERE tasks.id = push_configs.task_id), 0)",
    ),
    3: (_TASKS_FINAL,),
    4: (
        "ALTER TABLE push_configs ADD COLUMN finished INTEGER NOT NULL DEFAULT 0",
        "UPDATE push_configs SET finished = 1 WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.id = push_configs.task_id"
        f" AND t.state IN {TERMINAL_SQL} AND t.seq <= push_configs.delivered)",
        _PUSH_CONFIGS_OPEN,
    ),
    5: (*_LISTING, *_BACKFILL_COUNTS),
}


def create_schema(conn: sqlite3.Connection) -> None:
    """Bring the file to SCHEMA_VERSION: create the schema in a new file, migrate an older one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _stored_version(conn)
        if version > SCHEMA_VERSION:
            raise StoreError(f"database schema version {version} is newer than this server ({SCHEMA_VERSION})")
        if version == 0:
            _run(conn, _SCHEMA)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        elif version < SCHEMA_VERSION:
            for step in range(version, SCHEMA_VERSION):
                _run(conn, _MIGRATIONS[step])
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # no transaction was open
            conn.execute("ROLLBACK")
        raise


def _stored_version(conn: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a new file."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return 0 if row[0] is None else int(row[0])


def _run(conn: sqlite3.Connection, statements: tuple[str, ...]) -> None:
    for statement in statements:
        conn.execute(statement)
