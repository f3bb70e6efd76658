"""A throwaway PostgreSQL cluster for the tests and the bench: its own data directory, 127.0.0.1 only, a free port.

`find_bindir()` looks for the server binaries (initdb, pg_ctl, postgres) without a fixed version:
Debian keeps them in /usr/lib/postgresql/<version>/bin (newest first), while `pg_config --bindir` and
PATH may only hold the client. `PgCluster.start()` runs initdb and `pg_ctl start -w` in a temporary
directory (as the `postgres` OS user when run as root, since initdb refuses root) and creates the
database `a2a_test`; `stop()` stops the server (`pg_ctl stop -m immediate`) and removes the directory.
`fresh_database(base_url)` creates an empty database on any server and drops it after.

Standard library only, but for asyncpg in the database helpers: `python3 tests/pg_cluster.py` runs this
file's __main__ with the system Python (.ci/run).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
OS_USER = "postgres"
DATABASE = "a2a_test"
START_SECONDS = 30
STOP_SECONDS = 30
COMMAND_SECONDS = 120.0
# For tests: no durability at all, so that nothing waits for the disk.
TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be run here (no server binaries, or root without a `postgres` user)."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name))


def candidate_bindirs() -> list[Path]:
    """Where the server binaries may be, in the order they are tried."""
    candidates: list[Path] = []
    if DEBIAN_ROOT.is_dir():
        versions = [entry for entry in DEBIAN_ROOT.iterdir() if re.fullmatch(r"\d+(\.\d+)*", entry.name)]
        candidates += [entry / "bin" for entry in sorted(versions, key=_version_key, reverse=True)]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    return list(dict.fromkeys(candidates))


def find_bindir() -> Path | None:
    """The first candidate directory that holds initdb, pg_ctl and postgres, or None."""
    for bindir in candidate_bindirs():
        if all(os.access(bindir / name, os.X_OK) for name in SERVER_BINARIES):
            return bindir
    return None


def not_found_reason() -> str:
    looked = [f"{DEBIAN_ROOT}/<version>/bin", "pg_config --bindir", "PATH"]
    return f"PostgreSQL server binaries not found (looked in {', '.join(looked)}); install Debian's postgresql package"


class PgCluster:
    """One throwaway cluster; `start()` then `stop()` (also registered with atexit)."""

    def __init__(self, bindir: Path, settings: Mapping[str, str] = TEST_SETTINGS) -> None:
        self.bindir = bindir
        self.settings = dict(settings)  # server settings (postgres -c) besides the address, port and socket
        self.root: Path | None = None
        self.port = 0
        self.start_seconds = 0.0
        self._owner: pwd.struct_passwd | None = None
        self._running = False
        self._options = ""  # the server's settings as pg_ctl's -o, once started

    @property
    def data(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    @property
    def log(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _as_owner(self, args: Sequence[str]) -> list[str]:
        """The command line that runs `args` as the cluster's owner (the `postgres` user when we are root)."""
        if self._owner is None:
            return list(args)
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", self._owner.pw_name, "--", *args]
        return ["su", self._owner.pw_name, "-s", "/bin/sh", "-c", shlex.join(args)]

    def _run(self, args: Sequence[str], what: str) -> None:
        assert self.root is not None
        result = subprocess.run(
            self._as_owner(args), cwd=self.root, capture_output=True, text=True, timeout=COMMAND_SECONDS
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}\n{log}")

    def start(self) -> str:
        began = time.monotonic()
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam(OS_USER)
            except KeyError:
                raise PostgresUnavailable(
                    f"running as root and there is no {OS_USER!r} OS user to run initdb as; "
                    "install Debian's postgresql package"
                ) from None
        atexit.register(self.stop)
        # under /tmp, not $TMPDIR: the postgres user must reach it, and its socket path must stay short
        self.root = Path(tempfile.mkdtemp(prefix="a2a-pg-", dir="/tmp"))
        self.data.mkdir(mode=0o700)
        self.data.chmod(0o700)
        if self._owner is not None:
            for path in (self.root, self.data):
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        try:
            initdb = [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
            self._run([*initdb, "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"], "initdb")
            # imported here: `python3 tests/pg_cluster.py` runs this file with the system Python, bench not importable
            from bench.launch import free_port

            for attempt in range(3):  # the free port may be taken between free_port() and the bind
                self.port = free_port()
                settings = {
                    "listen_addresses": "127.0.0.1",
                    "port": str(self.port),
                    "unix_socket_directories": str(self.root),
                    **self.settings,
                }
                self._options = " ".join(f"-c {shlex.quote(f'{key}={value}')}" for key, value in settings.items())
                try:
                    self._pg_ctl_start()
                    break
                except RuntimeError:
                    log = self.log.read_text(errors="replace") if self.log.exists() else ""
                    if attempt == 2 or "already in use" not in log:
                        raise
            self._running = True
            createdb = [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
            self._run([*createdb, DATABASE], "createdb")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self.url

    def _pg_ctl_start(self) -> None:
        pg_ctl = [str(self.bindir / "pg_ctl"), "start", "-D", str(self.data), "-l", str(self.log)]
        self._run([*pg_ctl, "-w", "-t", str(START_SECONDS), "-o", self._options], "pg_ctl start")

    def pause(self) -> None:
        """Stop the server as an outage would (`pg_ctl stop -m fast`: sessions cut), keeping its data and port."""
        pg_ctl = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast"]
        self._run([*pg_ctl, "-w", "-t", str(STOP_SECONDS)], "pg_ctl stop")
        self._running = False

    def resume(self) -> None:
        """Start a paused server again, on the same port with the same settings."""
        self._pg_ctl_start()
        self._running = True

    def postmaster_pid(self) -> int | None:
        """The server's main process (the parent of every other), while it runs."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        return None

    def stop(self) -> None:
        """Stop the server (best effort, then SIGKILL its postmaster by pid) and remove the directory."""
        atexit.unregister(self.stop)
        if self.root is None:
            return
        if self._running or self.postmaster_pid() is not None:
            pg_ctl = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate"]
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self._run([*pg_ctl, "-w", "-t", str(STOP_SECONDS)], "pg_ctl stop")
            pid = self.postmaster_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self._running = False
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


def start_cluster(settings: Mapping[str, str] = TEST_SETTINGS) -> PgCluster:
    """Find the binaries and start a cluster; PostgresUnavailable (with one line saying why) if it cannot run here."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(not_found_reason())
    cluster = PgCluster(bindir, settings)
    cluster.start()
    return cluster


def with_database(url: str, name: str) -> str:
    """`url` with its database (the path) replaced by `name`; user, host, port and query are kept."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def execute(base_url: str, statement: str) -> None:
    """Run one statement on its own connection to `base_url`."""
    import asyncpg  # type: ignore[import-untyped,unused-ignore]  # asyncpg is a test (and postgresql) extra

    admin = await asyncpg.connect(base_url)
    try:
        await admin.execute(statement)
    finally:
        await admin.close()


async def create_database(base_url: str, name: str) -> str:
    """Create the empty database `name` (a plain identifier) on the server of `base_url`; its URL."""
    await execute(base_url, f'CREATE DATABASE "{name}"')
    return with_database(base_url, name)


async def drop_database(base_url: str, name: str) -> None:
    """Drop the database `name` on the server of `base_url`, ending the sessions still on it."""
    await execute(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def fresh_database(base_url: str) -> AsyncIterator[str]:
    """Create an empty database `t_<random>` on the server of `base_url`; yield its URL, drop it after."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    url = await create_database(base_url, name)
    try:
        yield url
    finally:
        with contextlib.suppress(Exception):  # best effort: a test that broke the server still reports itself
            await drop_database(base_url, name)


if __name__ == "__main__":  # `python3 tests/pg_cluster.py` (.ci/run): print the server's bin directory, or exit 1
    import sys

    found = find_bindir()
    print(found if found is not None else not_found_reason())
    sys.exit(0 if found is not None else 1)
