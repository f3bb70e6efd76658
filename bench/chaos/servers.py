"""`a2a-grpc serve` processes for the chaos harness: started on free loopback ports, watched, signalled."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.launch import REPO, SERVE, NotServing, child_env, free_port, wait_serving
from bench.procs import rss_bytes

AGENT = "bench.chaos.agent:ChaosAgent"
START_SECONDS = 60.0
STOP_SECONDS = 15.0
# What no server may ever write: a traceback is an exception nobody handled.
UNHANDLED = re.compile(r"^Traceback \(most recent call last\)|Fatal Python error|Segmentation fault", re.MULTILINE)


@dataclass
class Server:
    """One `a2a-grpc serve` with `flags` (besides its ports, agent and card), its output in `log_dir`."""

    name: str
    flags: Sequence[str]
    log_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    agent: str = AGENT
    grpc_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    deaths: list[str] = field(default_factory=list)  # how earlier processes of this server ended, unasked
    _read_up_to: int = 0  # how much of the log the last `new_output` read

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def argv(self) -> list[str]:
        listen = ["--listen", self.target, "--http-listen", f"127.0.0.1:{self.http_port}"]
        return [*SERVE, *listen, "--agent", self.agent, *self.flags]

    def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as log:
            log.write(f"---- start {self.starts}: {' '.join(self.argv()[1:])}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.argv(),
                cwd=REPO,
                env=child_env(self.env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.wait_serving(START_SECONDS)

    def wait_serving(self, timeout: float) -> None:
        """Until it says SERVING; NotServing (a RuntimeError) naming it when it exits or `timeout` passes."""
        assert self.process is not None
        try:
            wait_serving(self.process, self.target, timeout, self.tail)
        except NotServing as error:
            raise NotServing(f"{self.name}: {error}") from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def death(self) -> str | None:
        """How the process ended, if it did: a signal or an exit code."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"

    def rss(self) -> int:
        return rss_bytes(self.pid) if self.alive() else 0

    def signal(self, signum: signal.Signals) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL, as a fault: the process is gone, and that death is not one of `deaths`."""
        if self.alive():
            self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(STOP_SECONDS)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit; an exit other than 0 is recorded in `deaths`."""
        if self.process is None:
            return
        if self.alive():
            self.signal(signal.SIGCONT)  # in case a fault left it stopped
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.deaths.append(f"did not exit within {STOP_SECONDS:g} s of SIGTERM")
                self.kill()
                return
        if self.process.returncode != 0:
            self.deaths.append(f"stopped with {self.death()}")

    def new_output(self) -> str:
        """What the log gained since the last call."""
        with self.log.open("rb") as log:
            log.seek(self._read_up_to)
            data = log.read()
        self._read_up_to += len(data)
        return data.decode(errors="replace")

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def output_since(self, offset: int) -> str:
        with self.log.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def tail(self, chars: int = 1500) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""
