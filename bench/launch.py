"""How the tests and the bench start `a2a-grpc serve` as a process: free loopback ports, the child's
environment, and the wait until grpc.health.v1 says SERVING.

The one home of this code: tests/process.py (the tests' server processes), bench/chaos/servers.py, bench/growth.py
and bench/pg_cluster.py build on it. It lives under bench/ because the tests already import the bench (a throwaway
PostgreSQL, bench/pg_cluster.py) and the bench must not import the tests; it is not in the package, which
has no use for child processes of its own (agents are tested in-process: a2a_grpc.testing).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
SERVE = (sys.executable, "-m", "a2a_grpc.cli", "serve")
SERVING = health_pb2.HealthCheckResponse.SERVING
POLL_SECONDS = 0.05


class NotServing(RuntimeError):
    """A server process that exited, or did not say SERVING in time; the message ends with its output."""


def free_port() -> int:
    """A loopback port nothing listens on right now (bound to port 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without any A2A_GRPC_* setting, the repository importable, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("A2A_GRPC_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def health_status(
    target: str, service: str = "", timeout: float = 1.0, credentials: grpc.ChannelCredentials | None = None
) -> int:
    """grpc.health.v1 Check of `service`; over TLS with `credentials`."""
    secure = credentials is not None
    with grpc.secure_channel(target, credentials) if secure else grpc.insecure_channel(target) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        response = check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        status: int = response.status
        return status


def wait_serving(
    process: subprocess.Popen[bytes],
    target: str,
    timeout: float,
    output: Callable[[], str],
    credentials: grpc.ChannelCredentials | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """Return once the server `process` runs says SERVING at `target` (asked every `poll_seconds`); NotServing
    (with `output()`, what it wrote) when it exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise NotServing(f"server exited with {process.returncode}; its output:\n{output()}")
        try:
            if health_status(target, timeout=0.5, credentials=credentials) == SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(poll_seconds)
    raise NotServing(f"server not SERVING within {timeout:g} s; its output:\n{output()}")
