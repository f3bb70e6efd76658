"""The stored tasks of the growth.* cases: a plan of N tasks, written through the store's own API, cached.

A plan is deterministic for its size: tasks in contexts of ten, each context one caller's (the anonymous
caller, the one the bench measures as, has 85% of them; three others share the rest), their states mixed as
a store holds them after a while (mostly COMPLETED; some FAILED, CANCELED, REJECTED; some waiting in
INPUT_REQUIRED or AUTH_REQUIRED; none SUBMITTED or WORKING, which a server takes over at start), their status
timestamps spread evenly over the PLAN_SPAN_SECONDS before the load, oldest first. Each task holds what the
echo agent's does: the user's message in its history, one text artifact. No task keeps an event log: these
are older than a day, which the server's default --event-retention prunes anyway.

A SQLite or PostgreSQL store is filled with `TaskStore.apply` (version-1 writes of whole tasks), LOAD_BATCH
writes queued at once, which each store commits as one transaction (group commit): the schema stays the
store's own. The loaded store is cached under the cache directory, keyed by the store's schema version, the
plan's version and the size: a SQLite file (each run measures a copy, since a server may write to it at
start), or a PostgreSQL dump (`pg_dump -Fc`) restored into a fresh database; a PostgreSQL database, loaded
or restored, is ANALYZEd before the server starts, as autovacuum keeps one in use. A cached store older
than CACHE_MAX_AGE_SECONDS is loaded again, before the server's default --task-retention (a week) would
start removing its tasks.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import TaskWrite, open_store
from a2a_grpc.store.postgres_schema import SCHEMA_VERSION as POSTGRES_SCHEMA
from a2a_grpc.store.sqlite_schema import SCHEMA_VERSION as SQLITE_SCHEMA
from bench.pg_cluster import execute, find_bindir

PLAN_VERSION = 1  # bump when the plan's tasks change: cached stores of an older plan are loaded again
PLAN_SPAN_SECONDS = 2 * 86_400.0
CONTEXT_TASKS = 10
OTHER_CALLERS = ("caller-b", "caller-c", "caller-d")
MEASURED_SHARE = 0.85  # of the contexts, the measured (anonymous) caller's
STATE_WEIGHTS = {
    a2a_pb2.TASK_STATE_COMPLETED: 85,
    a2a_pb2.TASK_STATE_FAILED: 5,
    a2a_pb2.TASK_STATE_INPUT_REQUIRED: 4,
    a2a_pb2.TASK_STATE_CANCELED: 2,
    a2a_pb2.TASK_STATE_REJECTED: 2,
    a2a_pb2.TASK_STATE_AUTH_REQUIRED: 2,
}
LOAD_BATCH = 5000  # writes queued at once: one transaction each in SQLite and PostgreSQL
CACHE_MAX_AGE_SECONDS = 4 * 86_400.0
COMMAND_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class PlannedTask:
    task_id: str
    owner: str
    context_id: str
    state: int
    ts_us: int


def plan(size: int, end_us: int) -> list[PlannedTask]:
    """The `size` tasks of the plan, oldest first, the newest at `end_us`."""
    rng = random.Random(f"growth-{PLAN_VERSION}-{size}")
    states, weights = list(STATE_WEIGHTS), list(STATE_WEIGHTS.values())
    span_us = int(PLAN_SPAN_SECONDS * 1_000_000)
    tasks: list[PlannedTask] = []
    owner = ""
    for index in range(size):
        if index % CONTEXT_TASKS == 0:
            owner = "" if rng.random() < MEASURED_SHARE else rng.choice(OTHER_CALLERS)
        tasks.append(
            PlannedTask(
                task_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                owner=owner,
                context_id=f"growth-context-{index // CONTEXT_TASKS:07d}",
                state=rng.choices(states, weights)[0],
                ts_us=end_us - span_us * (size - 1 - index) // max(size, 1),
            )
        )
    return tasks


def _write(planned: PlannedTask) -> TaskWrite:
    """The version-1 write that creates `planned` whole."""
    task = a2a_pb2.Task(id=planned.task_id, context_id=planned.context_id)
    task.status.state = planned.state  # type: ignore[assignment]
    task.status.timestamp.FromMicroseconds(planned.ts_us)
    message = task.history.add(message_id=f"m-{planned.task_id}", role=a2a_pb2.ROLE_USER)
    message.context_id = planned.context_id
    message.task_id = planned.task_id
    message.parts.add(text=f"hello from the a2a-grpc bench, task {planned.task_id}")
    artifact = task.artifacts.add(artifact_id=f"a-{planned.task_id}", name="echo")
    artifact.parts.add(text=f"echo: hello from the a2a-grpc bench, task {planned.task_id}")
    return TaskWrite(task_id=planned.task_id, version=1, owner=planned.owner, task=task)


async def load(url: str, tasks: Sequence[PlannedTask]) -> float:
    """Write `tasks` into the store at `url` through its API, LOAD_BATCH at a time; the seconds it took."""
    began = time.monotonic()
    store = open_store(url, memory_max_tasks=0)
    await store.open()
    try:
        for start in range(0, len(tasks), LOAD_BATCH):
            await asyncio.gather(*(store.apply(_write(t)) for t in tasks[start : start + LOAD_BATCH]))
    finally:
        await store.close()
    return time.monotonic() - began


def _fresh(path: Path) -> bool:
    return path.exists() and time.time() - path.stat().st_mtime < CACHE_MAX_AGE_SECONDS


def cache_path(cache_dir: Path, store: str, size: int) -> Path:
    schema = SQLITE_SCHEMA if store == "sqlite" else POSTGRES_SCHEMA
    suffix = "db" if store == "sqlite" else "dump"
    return cache_dir / f"{store}-schema{schema}-plan{PLAN_VERSION}-{size}.{suffix}"


@dataclass(frozen=True, slots=True)
class Loaded:
    url: str
    load_seconds: float | None  # None: taken from the cache


def sqlite_store(cache_dir: Path, scratch: Path, size: int) -> Loaded:
    """A copy of the cached SQLite file of `size` tasks (loaded first when missing or stale), in `scratch`."""
    cached = cache_path(cache_dir, "sqlite", size)
    load_seconds = None
    if not _fresh(cached):
        cache_dir.mkdir(parents=True, exist_ok=True)
        building = cached.with_suffix(".loading")
        for leftover in cache_dir.glob(f"{building.name}*"):
            leftover.unlink()
        load_seconds = asyncio.run(load(f"sqlite:///{building}", plan(size, _now_us())))
        os.replace(building, cached)
        for leftover in cache_dir.glob(f"{building.name}*"):  # its lock file
            leftover.unlink()
    copy = scratch / f"growth-{size}.db"
    shutil.copyfile(cached, copy)
    return Loaded(f"sqlite:///{copy}", load_seconds)


def postgres_store(cache_dir: Path, database_url: str, size: int) -> Loaded:
    """`database_url` (an empty database) holding `size` tasks: restored from the cached dump, else loaded
    through the store's API and then dumped to the cache (without pg_dump and pg_restore: loaded every time)."""
    cached = cache_path(cache_dir, "postgres", size)
    bindir = find_bindir()
    if bindir is not None and _fresh(cached):
        _run([str(bindir / "pg_restore"), "--no-owner", "--exit-on-error", "-d", database_url, str(cached)])
        asyncio.run(execute(database_url, "ANALYZE"))
        return Loaded(database_url, None)
    load_seconds = asyncio.run(load(database_url, plan(size, _now_us())))
    asyncio.run(execute(database_url, "ANALYZE"))
    if bindir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        building = cached.with_suffix(".loading")
        _run([str(bindir / "pg_dump"), "-Fc", "-Z", "1", "-d", database_url, "-f", str(building)])
        os.replace(building, cached)
    return Loaded(database_url, load_seconds)


def _now_us() -> int:
    return time.time_ns() // 1000


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
