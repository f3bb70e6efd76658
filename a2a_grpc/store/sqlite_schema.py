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

SCHEMA_VERSION: Final = 5
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
    # No index on state: every status change would move an entry in it, and a state filter is served
    # well enough by scanning the owner's tasks in tasks_by_owner order.
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
