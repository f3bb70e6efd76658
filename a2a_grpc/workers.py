"""`a2a-grpc serve --workers N`: N server processes on one machine sharing the gRPC and HTTP ports.

The parent serves nothing and opens no store. It holds both ports bound (SO_REUSEPORT, as the workers
bind them; a port given as 0 is picked here), runs the same command line again for each worker with
WORKER_ENV set to its index, restarts a worker that dies, passes SIGHUP on (each worker reads its TLS
files again), and on SIGTERM or SIGINT passes SIGTERM on and waits for the workers to drain. A worker's
stdin is a pipe the parent never writes to: when the parent is gone, however it ended, the pipe ends and the
worker stops as on SIGTERM. The parent also makes the directory where the workers meet to answer a
scrape of `/metrics` with all their metrics (a2a_grpc.telemetry.worker_metrics), and removes it at the end.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

from a2a_grpc.listen_errors import cannot_listen
from a2a_grpc.telemetry.worker_metrics import WORKER_METRICS_DIR_ENV

log = logging.getLogger(__name__)

WORKER_ENV = "A2A_GRPC_WORKER_INDEX"  # set by the parent: the worker's index, 1 to N
SHARED_STORE_PREFIXES = ("postgresql://", "postgres://")
DEATHS_TO_GIVE_UP = 5
DEATH_WINDOW_SECONDS = 10.0
KILL_AFTER_GRACE_SECONDS = 10.0  # a worker still running this long after its grace period is killed
SETTINGS_REFUSED = 2  # a worker's exit status for a bad setting: a new worker would refuse it too


def worker_index() -> int | None:
    """This process's index when it is a worker, else None."""
    index = os.environ.get(WORKER_ENV)
    return int(index) if index else None


def unshared_store(url: str) -> str | None:
    """The store `url` names, described, when only one process can use it; None when processes can share it."""
    if url.startswith(SHARED_STORE_PREFIXES):
        return None
    if url in ("memory", "memory://"):
        return "the memory store"
    if url.startswith("sqlite:"):
        return f"the SQLite store {url}"
    return f"the store {url.partition(':')[0][:32]!r}"  # the rest of an unknown URL may hold a password


@contextmanager
def held_ports(listen: str, http_listen: str) -> Iterator[list[str]]:
    """The `--listen` and `--http-listen` flags that give every worker the same concrete ports, which this
    process holds bound meanwhile; OSError, saying which, when one cannot be had."""
    with ExitStack() as held:
        flags: list[str] = []
        for flag, address, serving in (
            ("--listen", listen, "listen on"),
            ("--http-listen", http_listen, "serve the agent card on"),
        ):
            if address:
                concrete, sock = _hold(address, serving, flag)
                held.enter_context(sock)
                flags += [flag, concrete]
        yield flags


def _hold(listen: str, serving: str, flag: str) -> tuple[str, socket.socket]:
    host, _, port = listen.rpartition(":")
    try:
        if not port.isdigit():
            raise OSError(f"takes HOST:PORT, got {listen!r}")
        family, _, _, _, address = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        if int(port):  # SO_REUSEPORT alone would join the listeners of another server of this user
            _bind(family, address, socket.SO_REUSEADDR).close()
        sock = _bind(family, address, socket.SO_REUSEPORT)
    except OSError as error:
        raise cannot_listen(serving, listen, flag, error) from None
    return f"{host}:{sock.getsockname()[1]}", sock


def _bind(family: int, address: tuple[Any, ...], option: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def stop_when_orphaned(stop: asyncio.Event) -> None:
    """In a worker: set `stop` once the parent is gone (its end of the stdin pipe closed)."""
    loop = asyncio.get_running_loop()
    stdin = 0

    def parent_gone() -> None:
        loop.remove_reader(stdin)
        stop.set()

    loop.add_reader(stdin, parent_gone)


def _exit_text(status: int) -> str:
    if status >= 0:
        return f"exited with status {status}"
    try:
        return f"was killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"was killed by signal {-status}"


class Supervisor:
    """Runs `count` workers, each `command` with WORKER_ENV set, until SIGTERM or SIGINT."""

    def __init__(self, command: Sequence[str], count: int, grace_seconds: float) -> None:
        self._command = list(command)
        self._count = count
        self._grace_seconds = grace_seconds
        self._workers: dict[int, asyncio.subprocess.Process] = {}
        self._deaths: collections.deque[float] = collections.deque()
        self._lifeline = os.pipe()  # the workers' stdin (read end); the write end closes when this process ends
        self._metrics_dir = tempfile.mkdtemp(prefix="a2a-grpc-metrics-")

    async def run(self) -> int:
        """0 once stopped by a signal, 1 when workers die too often, 2 when a worker refused its settings."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._signal_workers, signal.SIGHUP)
        try:
            for index in range(1, self._count + 1):
                await self._start(index)
            status = await self._supervise(stop)
            await self._stop_workers()
        finally:
            for fd in self._lifeline:
                os.close(fd)
            shutil.rmtree(self._metrics_dir, ignore_errors=True)
        return status

    async def _start(self, index: int) -> None:
        env = {**os.environ, WORKER_ENV: str(index), WORKER_METRICS_DIR_ENV: self._metrics_dir}
        self._workers[index] = await asyncio.create_subprocess_exec(
            *self._command,
            env=env,
            stdin=self._lifeline[0],
            start_new_session=True,  # signals come from here only
        )

    async def _supervise(self, stop: asyncio.Event) -> int:
        stopping = asyncio.ensure_future(stop.wait())
        exits = {asyncio.ensure_future(worker.wait()): index for index, worker in self._workers.items()}
        try:
            while True:
                done, _ = await asyncio.wait({stopping, *exits}, return_when=asyncio.FIRST_COMPLETED)
                if stopping in done:
                    return 0
                for exited in done:
                    index = exits.pop(exited)
                    status = self._died(index)
                    if status is not None:
                        return status
                    await self._start(index)
                    exits[asyncio.ensure_future(self._workers[index].wait())] = index
        finally:
            for waiting in (stopping, *exits):
                waiting.cancel()

    def _died(self, index: int) -> int | None:
        """The parent's exit status when worker `index`, just exited, is not to be started again."""
        worker = self._workers[index]
        status = worker.returncode or 0  # it has exited: never None
        if status == SETTINGS_REFUSED:
            return SETTINGS_REFUSED
        now = time.monotonic()
        self._deaths.append(now)
        while self._deaths[0] < now - DEATH_WINDOW_SECONDS:
            self._deaths.popleft()
        died = f"worker {index}/{self._count} (pid {worker.pid}) {_exit_text(status)}"
        if len(self._deaths) < DEATHS_TO_GIVE_UP:
            log.warning("%s; starting a new one", died)
            return None
        log.error("%s: %d worker deaths within %gs, giving up", died, len(self._deaths), DEATH_WINDOW_SECONDS)
        return 1

    def _signal_workers(self, signum: signal.Signals) -> list[asyncio.subprocess.Process]:
        """Send `signum` to every running worker; those it was sent to."""
        running = [worker for worker in self._workers.values() if worker.returncode is None]
        for worker in running:
            with suppress(ProcessLookupError):
                worker.send_signal(signum)
        return running

    async def _stop_workers(self) -> None:
        running = self._signal_workers(signal.SIGTERM)
        exited = asyncio.gather(*(worker.wait() for worker in running))
        try:
            await asyncio.wait_for(asyncio.shield(exited), self._grace_seconds + KILL_AFTER_GRACE_SECONDS)
        except TimeoutError:
            for worker in running:
                if worker.returncode is None:
                    log.error("worker (pid %d) did not stop in time: killing it", worker.pid)
                    worker.kill()
            await exited
