"""Server processes for the bench, and what the kernel says about any process (CPU time, resident memory)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.protocol import READY_PREFIX

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_LIBC = ctypes.CDLL(None, use_errno=True)
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid` so far, exited ones included, to the nanosecond (its process CPU-time
    clock; /proc/<pid>/stat only counts in clock ticks, too coarse for the bench's half-second slices)."""
    clock = ctypes.c_int()
    failure = _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock))
    if failure:
        raise OSError(failure, f"clock_getcpuclockid({pid}): {os.strerror(failure)}")
    return time.clock_gettime(clock.value)


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it, parents before children (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent = int(stat.rpartition(")")[2].split()[1])  # after "pid (comm) state"
        children.setdefault(parent, []).append(int(entry.name))
    tree = [root]
    for pid in tree:
        tree += sorted(children.get(pid, []))
    return tree


def tree_cpu_seconds(root: int) -> dict[int, float]:
    """cpu_seconds of every process in `root`'s tree, by pid (processes that end meanwhile left out)."""
    found: dict[int, float] = {}
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            found[pid] = cpu_seconds(pid)
    return found


def machine_busy_seconds() -> float:
    """CPU time all cores spent on anything but idling since boot (user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / CLOCK_TICKS


def pin(pid: int, cpus: set[int]) -> None:
    """Keep every thread of `pid` on `cpus`; the threads they start later inherit it."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class ServerProcess:
    """A server started as its own process; `port` once it printed its ready line, from then on kept on `cpus`.

    With `workers` > 1 the process supervises that many worker processes, which each print the ready line:
    `pids` is then the supervisor and its workers, all kept on `cpus`. `db_pid` is the main process of the
    database server it uses, when the bench knows it (its CPU is counted apart). `tls_roots`: the PEM CA that
    issued its certificate, when it speaks TLS.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        cwd: Path,
        cpus: set[int] | None = None,
        *,
        workers: int = 1,
        db_pid: int | None = None,
        tls_roots: bytes | None = None,
    ) -> None:
        self.name = name
        self.tls_roots = tls_roots
        self.argv = list(argv)
        self.workers = workers
        self.db_pid = db_pid
        self.pids: list[int] = []
        # A file, not a pipe, so a chatty server never blocks; it lives as long as the process (closed in stop).
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        try:
            self.port = self._wait_ready()
            self.pids = process_tree(self.pid) if workers > 1 else [self.pid]
            if workers > 1 and len(self.pids) != 1 + workers:
                raise RuntimeError(f"server {self.name} runs {len(self.pids) - 1} worker processes, not {workers}")
            for pid in self.pids:
                if cpus is not None:
                    pin(pid, cpus)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _wait_ready(self) -> int:
        """The port, once every worker printed its ready line (read from the pipe's descriptor: a buffered
        reader could hold the second line while select() waits for more)."""
        assert self.process.stdout is not None
        stdout = self.process.stdout.fileno()
        prefix = READY_PREFIX.encode()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        ports: list[int] = []
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while len(ports) < self.workers and (left := deadline - time.monotonic()) > 0:
                if not selector.select(timeout=left):
                    continue
                chunk = os.read(stdout, 4096)
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                ports += [int(line.removeprefix(prefix)) for line in lines if line.startswith(prefix)]
        if len(ports) >= self.workers:
            return ports[0]
        raise RuntimeError(f"server {self.name} did not start: {self.stderr_tail()}")

    def stderr_tail(self, chars: int = 2000) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().strip()[-chars:]

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"server {self.name} exited with {self.process.returncode}: {self.stderr_tail()}")
        gone = [pid for pid in self.pids if not Path(f"/proc/{pid}").exists()]
        if gone:  # a worker its supervisor replaced: the new one is neither pinned nor counted
            raise RuntimeError(f"server {self.name}: worker process(es) {gone} died: {self.stderr_tail()}")

    def stop(self) -> None:
        """SIGTERM (a supervisor passes it on to its workers and waits for them), else SIGKILL to the tree."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                for pid in self.pids[1:]:  # still its children: the supervisor has not exited
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_SECONDS)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()
