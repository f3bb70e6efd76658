"""The PostgreSQL server of the bench's PostgreSQL cases, and a fresh database on it for each server started.

By default a throwaway cluster (bench/pg_cluster.py) on 127.0.0.1, started once the first such case needs it
and stopped at the end; with pinning its processes stay on the servers' CPUs (its backends, forked later by
its main process, inherit that). Or an existing server given by URL: databases are then created and dropped
on it, and its CPU time is not counted (the bench does not know its processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from bench.pg_cluster import PgCluster, create_database, drop_database, execute, start_cluster
from bench.procs import pin, process_tree

# Like the SQLite store's WAL with synchronous=NORMAL, a commit does not wait for the disk (fsync stays on).
BENCH_SETTINGS = {"synchronous_commit": "off"}


class Databases:
    def __init__(self, url: str | None, cpus: set[int] | None) -> None:
        self._given_url = url
        self._cpus = cpus
        self._cluster: PgCluster | None = None
        self._created: list[str] = []
        self.description = "the server given with --postgres (its CPU time is not counted)" if url else "not used"

    def start(self) -> str:
        """The server's URL, once it answers: PostgresUnavailable when none can run here."""
        if self._given_url:
            asyncio.run(execute(self._given_url, "SELECT 1"))
            return self._given_url
        if self._cluster is None:
            self._cluster = start_cluster(BENCH_SETTINGS)
            self._pin_cluster()
            settings = ", ".join(f"{key}={value}" for key, value in BENCH_SETTINGS.items())
            self.description = f"a throwaway cluster ({self._cluster.bindir}) on 127.0.0.1, {settings}"
        return self._cluster.url

    @property
    def db_pid(self) -> int | None:
        """The main process of the cluster the bench runs (None for a server given by URL)."""
        return self._cluster.postmaster_pid() if self._cluster is not None else None

    def _pin_cluster(self) -> None:
        root = self.db_pid
        if self._cpus is None or root is None:
            return
        for pid in process_tree(root):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a process that ended meanwhile
                pin(pid, self._cpus)

    def new(self) -> str:
        """The URL of an empty database of its own."""
        name = f"bench_{os.getpid()}_{len(self._created) + 1}"
        url = asyncio.run(create_database(self.start(), name))
        self._created.append(name)
        return url

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        elif self._given_url:
            for name in self._created:
                with contextlib.suppress(Exception):  # best effort, as for the tests' databases
                    asyncio.run(drop_database(self._given_url, name))
        self._created.clear()
