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
    """A server started as its own process; `port` once it printed its ready line, from then on kept on `cpus`."""

    def __init__(self, name: str, argv: Sequence[str], cwd: Path, cpus: set[int] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
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
            if cpus is not None:
                pin(self.pid, cpus)
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
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(timeout=left):
                    continue
                line = self.process.stdout.readline()
                if not line:
                    break
                if line.startswith(READY_PREFIX):
                    return int(line.removeprefix(READY_PREFIX))
        raise RuntimeError(f"server {self.name} did not start: {self.stderr_tail()}")

    def stderr_tail(self, chars: int = 2000) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().strip()[-chars:]

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"server {self.name} exited with {self.process.returncode}: {self.stderr_tail()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_SECONDS)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()
