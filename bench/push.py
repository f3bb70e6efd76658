"""The push.* cases' webhook as the bench drives it: the receiver process (bench/push_receiver.py), and waiting
for the notifications owed once the load stops."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.procs import ServerProcess
from bench.protocol import PUSH_TOKEN
from bench.push_receiver import NOTIFY_PATH

DRAIN_LIMIT_SECONDS = 120.0  # at most this long after the load stops
# No new notification for this long: what has not come is lost. Longer than the push worker's sweep (1 s) and
# a lapsing claim on a local store (5 s), the two ways a webhook nobody announced is found again.
STALL_SECONDS = 10.0
POLL_SECONDS = 0.05
CONTROL_TIMEOUT_SECONDS = 60.0


class PushReceiver:
    """The receiver process, on `cpus` (the load generator's: see bench/run.py), until `stop`."""

    def __init__(self, root: Path, cpus: set[int] | None) -> None:
        argv = [sys.executable, "-m", "bench.push_receiver", "--token", PUSH_TOKEN]
        self.process = ServerProcess("push.receiver", argv, root, cpus)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        """The webhook every push config names."""
        return f"http://{self.process.target}{NOTIFY_PATH}"

    def _call(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(f"http://{self.process.target}{path}", method=method)
        with urllib.request.urlopen(request, timeout=CONTROL_TIMEOUT_SECONDS) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def reset(self) -> None:
        self._call("POST", "/bench/reset")

    def progress(self) -> dict[str, int]:
        return self._call("GET", "/bench/progress")

    def summary(self) -> dict[str, Any]:
        self.process.check_alive()
        return self._call("GET", "/bench/summary")

    def drain(self, expected_tasks: int) -> bool:
        """Wait until `expected_tasks` tasks have their final status notified, or nothing new came for
        STALL_SECONDS, or DRAIN_LIMIT_SECONDS passed; whether every one came."""
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        last_received, last_change = -1, time.monotonic()
        while True:
            progress = self.progress()
            now = time.monotonic()
            if progress["finished_tasks"] >= expected_tasks:
                return True
            if progress["received"] != last_received:
                last_received, last_change = progress["received"], now
            if now - last_change >= STALL_SECONDS or now >= deadline:
                return False
            time.sleep(POLL_SECONDS)

    def stop(self) -> None:
        self.process.stop()
