"""The PostgreSQL store's schema and notification channels, created or migrated by one replica at a time.

Version 1 holds tasks, their history, artifact chunks and push configs. Version 2 adds each task's event
log (`task_events`, with the last event's number in `tasks.seq`) and what replicas coordinate through:
`tasks.runner` (the replica running a SUBMITTED or WORKING task, NULL otherwise), `replicas` (a heartbeat
per live replica) and `cancel_requests`. Tasks a version 1 server left running have no runner, so they
count as expired runs. Version 3 adds each push config's cursor into its task's event log (`delivered`)
and its claim (`claimed_by`, `claimed_until`); configs stored before start at their task's last event.
Version 4 indexes final tasks by status time (`tasks_final`), for pruning their event logs. Version 5 marks
the push configs caught up with a final task (`finished`) and indexes the others (`push_configs_open`), which
are all the sweep for due notifications reads. Version 6 adds `leases`: the replica holding `task-retention`
removes old final tasks. Version 7 indexes each owner's tasks by state, newest first, overall and per context
(`tasks_by_state`, `tasks_by_context_state`), for ListTasks' status filter, and keeps how many tasks each
owner has in each state, overall and per context (`task_counts`, `context_counts`, counted once from the
tasks when the database is migrated; a2a_grpc.store.postgres_counts keeps them). A database is migrated from
its version one step at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from a2a_grpc.protocol import RUNNING_STATES, TERMINAL_STATES
from a2a_grpc.store.base import StoreError

if TYPE_CHECKING:
    import asyncpg

SCHEMA_VERSION: Final = 7
# The key of the advisory lock that makes one replica at a time create or migrate the schema.
SCHEMA_LOCK_KEY: Final = 0x613261_67727063
# Written inline, not as a parameter, so that the planner matches the partial index `tasks_running`.
RUNNING_SQL: Final = f"({', '.join(str(int(state)) for state in sorted(RUNNING_STATES))})"
TERMINAL_SQL: Final = f"({', '.join(str(int(state)) for state in sorted(TERMINAL_STATES))})"

# pg_notify channels. Payloads: "<writer replica id> <task id> <last event seq>" when a write stored
# events, and "<runner replica id> <task id>" when a cancel of a running task was requested.
EVENTS_CHANNEL: Final = "a2a_task_events"
CANCEL_CHANNEL: Final = "a2a_cancel"
# The lease whose holder removes the tasks final for longer than the retention (postgres_retention).
RETENTION_LEASE: Final = "task-retention"

_VERSION_TABLE: Final = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
_SCHEMA_V1: Final = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT COLLATE "C" NOT NULL,
    context_id TEXT COLLATE "C" NOT NULL,
    state INTEGER NOT NULL,
    status_ts_us BIGINT NOT NULL,
    version BIGINT NOT NULL,
    status BYTEA NOT NULL,
    metadata BYTEA,
    created_us BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, status_ts_us DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (owner, context_id, status_ts_us DESC, id DESC);
CREATE TABLE IF NOT EXISTS history (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS artifact_chunks (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    artifact_id TEXT COLLATE "C" NOT NULL,
    append BOOLEAN NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT COLLATE "C" NOT NULL,
    config_id TEXT COLLATE "C" NOT NULL,
    owner TEXT COLLATE "C" NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (task_id, config_id)
);
"""
_SCHEMA_V2: Final = f"""
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS runner TEXT COLLATE "C";
CREATE TABLE IF NOT EXISTS task_events (
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    seq BIGINT NOT NULL,
    state INTEGER NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS replicas (
    id TEXT COLLATE "C" PRIMARY KEY,
    heartbeat_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS cancel_requests (
    task_id TEXT COLLATE "C" PRIMARY KEY,
    requested_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tasks_running ON tasks (runner) WHERE state IN {RUNNING_SQL};
"""
_SCHEMA_V3: Final = """
ALTER TABLE push_configs ADD COLUMN IF NOT EXISTS delivered BIGINT NOT NULL DEFAULT 0;
ALTER TABLE push_configs ADD COLUMN IF NOT EXISTS claimed_by TEXT COLLATE "C";
ALTER TABLE push_configs ADD COLUMN IF NOT EXISTS claimed_until TIMESTAMPTZ;
UPDATE push_configs p SET delivered = t.seq FROM tasks t WHERE t.id = p.task_id;
"""
_SCHEMA_V4: Final = f"CREATE INDEX IF NOT EXISTS tasks_final ON tasks (status_ts_us) WHERE state IN {TERMINAL_SQL};"
# Push configs that may still have events to deliver: all but those caught up with a final task, which gets no
# more events. The sweep for due configs reads these alone, however many finished ones pile up.
_SCHEMA_V5: Final = f"""
ALTER TABLE push_configs ADD COLUMN IF NOT EXISTS finished BOOLEAN NOT NULL DEFAULT false;
UPDATE push_configs p SET finished = true FROM tasks t
    WHERE t.id = p.task_id AND t.state IN {TERMINAL_SQL} AND t.seq <= p.delivered AND NOT p.finished;
CREATE INDEX IF NOT EXISTS push_configs_open ON push_configs (task_id, config_id) WHERE NOT finished;
"""
_SCHEMA_V6: Final = f"""
CREATE TABLE IF NOT EXISTS leases (
    name TEXT COLLATE "C" PRIMARY KEY,
    holder TEXT COLLATE "C",
    held_until TIMESTAMPTZ NOT NULL
);
INSERT INTO leases (name, held_until) VALUES ('{RETENTION_LEASE}', '-infinity') ON CONFLICT (name) DO NOTHING;
"""
_SCHEMA_V7: Final = """
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (owner, state, status_ts_us DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_context_state ON tasks (owner, context_id, state, status_ts_us DESC, id DESC);
CREATE TABLE IF NOT EXISTS task_counts (
    owner TEXT COLLATE "C" NOT NULL,
    state INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (owner, state)
);
CREATE TABLE IF NOT EXISTS context_counts (
    owner TEXT COLLATE "C" NOT NULL,
    context_id TEXT COLLATE "C" NOT NULL,
    state INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (owner, context_id, state)
);
DELETE FROM task_counts;
DELETE FROM context_counts;
INSERT INTO task_counts (owner, state, n) SELECT owner, state, COUNT(*) FROM tasks GROUP BY owner, state;
INSERT INTO context_counts (owner, context_id, state, n)
    SELECT owner, context_id, state, COUNT(*) FROM tasks GROUP BY owner, context_id, state;
"""
# _STEPS[n] takes a database from schema version n to n + 1 (0: a new database).
_STEPS: Final = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3, _SCHEMA_V4, _SCHEMA_V5, _SCHEMA_V6, _SCHEMA_V7)
_LOCK_SCHEMA: Final = "SELECT pg_advisory_xact_lock($1)"
_SCHEMA_VERSION: Final = "SELECT MAX(version) FROM schema_version"
_SET_SCHEMA_VERSION: Final = f"DELETE FROM schema_version; INSERT INTO schema_version VALUES ({SCHEMA_VERSION})"


async def create_schema(conn: asyncpg.Connection) -> None:
    """Create the schema, or migrate an older one, holding the advisory lock for the transaction."""
    async with conn.transaction():
        await conn.execute(_LOCK_SCHEMA, SCHEMA_LOCK_KEY)
        await conn.execute(_VERSION_TABLE)
        version = await conn.fetchval(_SCHEMA_VERSION)
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(f"database schema version {version} is newer than this server ({SCHEMA_VERSION})")
        await conn.execute("".join(_STEPS[version or 0 :]))
        await conn.execute(_SET_SCHEMA_VERSION)
