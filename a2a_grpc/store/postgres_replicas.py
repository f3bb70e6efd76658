"""How replicas sharing one PostgreSQL database coordinate: heartbeats, expired runs, cancel requests, and
a `Listener` that receives the notifications of `postgres_schema.EVENTS_CHANNEL` and `CANCEL_CHANNEL`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from a2a_grpc.store.postgres_common import has_nul, import_asyncpg, translated
from a2a_grpc.store.postgres_schema import CANCEL_CHANNEL, EVENTS_CHANNEL, RUNNING_SQL

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

RECONNECT_MIN_SECONDS: Final = 0.1
RECONNECT_MAX_SECONDS: Final = 2.0
# A lost connection usually closes its socket, which asyncpg reports at once; a half-open one is only
# found by a query: the listener runs one when it has heard nothing for this long.
CHECK_SECONDS: Final = 5.0
CONNECT_SECONDS: Final = 10.0

_HEARTBEAT: Final = (
    "INSERT INTO replicas (id, heartbeat_at) VALUES ($1, now())"
    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
)
_RELEASE: Final = "DELETE FROM replicas WHERE id = $1"
# A replica silent this many leases is gone for good (killed, not stopped): its row goes, its runs taken over
# long before. Should it come back, its next heartbeat writes the row again.
FORGOTTEN_AFTER_LEASES: Final = 10
_FORGET_DEAD: Final = "DELETE FROM replicas WHERE heartbeat_at < now() - make_interval(secs => $1)"
# Takes the expired runs over (this replica becomes their runner), so that no other replica fails them too.
_EXPIRED_RUNS: Final = f"""
WITH expired AS (
    SELECT t.id FROM tasks t LEFT JOIN replicas r ON r.id = t.runner
    WHERE t.state IN {RUNNING_SQL} AND (r.id IS NULL OR r.heartbeat_at < now() - make_interval(secs => $1))
    FOR UPDATE OF t SKIP LOCKED
)
UPDATE tasks t SET runner = $2 FROM expired WHERE t.id = expired.id RETURNING t.id, t.owner
"""
_EVENT_HEADS: Final = "SELECT id, seq FROM tasks WHERE id = ANY($1::text[])"
_REQUEST_CANCEL: Final = f"""
WITH requested AS (INSERT INTO cancel_requests (task_id) VALUES ($1) ON CONFLICT (task_id) DO NOTHING)
SELECT pg_notify('{CANCEL_CHANNEL}', runner || ' ' || id) FROM tasks WHERE id = $1 AND runner IS NOT NULL
"""
# Takes this replica's requests, and drops those of tasks that no longer run (settled or never created).
_TAKE_CANCEL_REQUESTS: Final = f"""
WITH stale AS (
    DELETE FROM cancel_requests c
    WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = c.task_id AND t.state IN {RUNNING_SQL})
)
DELETE FROM cancel_requests c USING tasks t
WHERE t.id = c.task_id AND t.runner = $1 AND t.state IN {RUNNING_SQL}
RETURNING c.task_id
"""


async def heartbeat(pool: asyncpg.Pool, replica_id: str) -> None:
    with translated():
        await pool.execute(_HEARTBEAT, replica_id)


async def release(pool: asyncpg.Pool, replica_id: str) -> None:
    with translated():
        await pool.execute(_RELEASE, replica_id)


async def expired_runs(pool: asyncpg.Pool, lease_seconds: float, replica_id: str) -> list[tuple[str, str]]:
    with translated():
        rows = await pool.fetch(_EXPIRED_RUNS, float(lease_seconds), replica_id)
        await pool.execute(_FORGET_DEAD, float(lease_seconds * FORGOTTEN_AFTER_LEASES))
    return [(str(row["id"]), str(row["owner"])) for row in rows]


async def event_heads(pool: asyncpg.Pool, task_ids: Sequence[str]) -> dict[str, int]:
    wanted = [task_id for task_id in task_ids if not has_nul(task_id)]
    if not wanted:
        return {}
    with translated():
        rows = await pool.fetch(_EVENT_HEADS, wanted)
    return {str(row["id"]): int(row["seq"]) for row in rows}


async def request_cancel(pool: asyncpg.Pool, task_id: str) -> None:
    if has_nul(task_id):
        return  # no such task
    with translated():
        await pool.execute(_REQUEST_CANCEL, task_id)


async def take_cancel_requests(pool: asyncpg.Pool, replica_id: str) -> list[str]:
    with translated():
        rows = await pool.fetch(_TAKE_CANCEL_REQUESTS, replica_id)
    return [str(row["task_id"]) for row in rows]


def listener_name(replica_id: str) -> str:
    """The application_name of a replica's listener connection (in pg_stat_activity)."""
    return f"a2a-grpc listener {replica_id}"


class Listener:
    """A connection of its own, LISTENing on both channels, reopened with capped backoff whenever it drops."""

    def __init__(
        self, url: str, replica_id: str, on_event: Callable[[str, int], None], on_cancel: Callable[[], None]
    ) -> None:
        self._url = url
        self._replica_id = replica_id
        self._on_event = on_event
        self._on_cancel = on_cancel
        self._conn: asyncpg.Connection | None = None
        self._task = asyncio.create_task(self._run(), name="postgres-store-listener")

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.wait([self._task])

    async def _run(self) -> None:
        delay = RECONNECT_MIN_SECONDS
        failing = False  # logged once per outage
        while True:
            try:
                conn, lost = await self._connect()
            except Exception as exc:  # the database is down or unreachable: try again later
                if not failing:
                    log.warning("task store listener cannot connect (%s); retrying until it can", exc)
                failing = True
            else:
                if failing:
                    log.warning("task store listener connected again")
                failing = False
                delay = RECONNECT_MIN_SECONDS
                self._conn = conn
                try:
                    await _until_lost(conn, lost)
                finally:
                    self._conn = None
                    await _close(conn)
                log.warning("task store listener lost its connection; reconnecting")
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    async def _connect(self) -> tuple[asyncpg.Connection, asyncio.Event]:
        conn = await import_asyncpg().connect(
            self._url,
            timeout=CONNECT_SECONDS,
            command_timeout=CHECK_SECONDS,
            server_settings={"application_name": listener_name(self._replica_id)},
        )
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(EVENTS_CHANNEL, self._events_notified)
            await conn.add_listener(CANCEL_CHANNEL, self._cancel_notified)
        except BaseException:
            await _close(conn)
            raise
        return conn, lost

    def _events_notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        writer, _, rest = payload.partition(" ")
        task_id, _, seq = rest.rpartition(" ")
        if writer != self._replica_id and task_id and seq.isdecimal():
            self._on_event(task_id, int(seq))

    def _cancel_notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        runner, _, _task_id = payload.partition(" ")
        if runner == self._replica_id:
            self._on_cancel()


async def _until_lost(conn: asyncpg.Connection, lost: asyncio.Event) -> None:
    """Return once asyncpg reports the connection closed, or a check query on a quiet connection fails."""
    while True:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CHECK_SECONDS):
                await lost.wait()
        if lost.is_set():
            return
        try:
            await conn.execute("SELECT 1")
        except Exception:  # whatever failed, this connection is no longer to be trusted
            return


async def _close(conn: asyncpg.Connection) -> None:
    """Close gracefully; asyncpg aborts the connection itself when that fails."""
    with contextlib.suppress(Exception):
        await conn.close(timeout=CHECK_SECONDS)
