"""Venvs of the reference SDK (a2a-sdk), each made once, under a lock, with a stamp file: its generated code
cannot share a process with ours.

The bench's venv (.bench-venv-sdk/, a2a-sdk 1.x) is `BENCH_SDK`, reached through `sdk_python` and
`sdk_installed`; its HTTP servers' (.bench-venv-sdk-http/) is `BENCH_SDK_HTTP`, through `sdk_http_python`; the tests describe their own venvs as `SdkVenv` values (tests/sdk03_env.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SDK_REQUIREMENT = "a2a-sdk[grpc]==1.3.0"
# The grpc extra brings grpcio, grpcio-tools and grpcio-reflection; uvloop is only for --sdk-uvloop.
EXTRA_REQUIREMENTS = ("uvloop>=0.21",)
INSTALL_TIMEOUT_SECONDS = 600
VENV_NAME = ".bench-venv-sdk"
STAMP = ".bench-installed"


class SdkUnavailableError(Exception):
    """The SDK could not be installed; the message says why."""


@dataclass(frozen=True)
class SdkVenv:
    """A venv `name` (under the root it is asked for) holding `requirement` and `extras`, each installed by one
    pip call; `check` is Python code that must run in it once installed; `label` starts the line that says an
    install began."""

    name: str
    requirement: str
    extras: tuple[str, ...]
    check: str
    label: str

    @property
    def stamp_text(self) -> str:
        return " ".join((self.requirement, *self.extras))

    def python(self, root: Path) -> Path:
        """The venv's python, creating the venv and installing the SDK the first time."""
        venv = root / self.name
        with _install_lock(venv):
            return self._ensure_installed(venv)

    def installed(self, root: Path) -> bool:
        """Whether the venv is installed already, so that `python` downloads nothing."""
        venv = root / self.name
        stamp = venv / STAMP
        return (venv / "bin" / "python").exists() and stamp.exists() and stamp.read_text() == self.stamp_text

    def _ensure_installed(self, venv: Path) -> Path:
        python = venv / "bin" / "python"
        if self.installed(venv.parent):
            return python
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        steps = [[sys.executable, "-m", "venv", "--clear", str(venv)], [*pip, self.requirement]]
        if self.extras:
            steps.append([*pip, *self.extras])
        print(f"{self.label}: installing {self.stamp_text} into {venv.name}/ (once)", file=sys.stderr, flush=True)
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise SdkUnavailableError(f"{' '.join(step[:4])} failed: {error}") from None
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise SdkUnavailableError(f"{' '.join(step[:5])} failed: {' / '.join(tail)}")
        check = subprocess.run([str(python), "-I", "-c", self.check], capture_output=True, text=True, timeout=120)
        if check.returncode != 0:
            raise SdkUnavailableError(f"the SDK does not import: {check.stderr.strip()[-300:]}")
        (venv / STAMP).write_text(self.stamp_text)
        return python


BENCH_SDK = SdkVenv(
    name=VENV_NAME,
    requirement=SDK_REQUIREMENT,
    extras=EXTRA_REQUIREMENTS,
    check="import a2a.server.request_handlers.grpc_handler, grpc",
    label="bench",
)

# The SDK's own JSON-RPC and HTTP+JSON servers (its Starlette apps) under uvicorn, for the send.http.*.sdk cases.
BENCH_SDK_HTTP = SdkVenv(
    name=".bench-venv-sdk-http",
    requirement="a2a-sdk[grpc,http-server]==1.3.0",
    extras=("uvicorn>=0.30", "uvloop>=0.21"),
    check="import a2a.server.routes, starlette, sse_starlette, uvicorn",
    label="bench",
)


@contextlib.contextmanager
def _install_lock(venv: Path) -> Iterator[None]:
    """One installer at a time per venv (two bench runs, or two test runs, may start together)."""
    name = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"a2a-bench-sdk-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def sdk_python(root: Path) -> Path:
    """The bench SDK venv's python, creating the venv and installing the SDK the first time."""
    return BENCH_SDK.python(root)


def sdk_installed(root: Path) -> bool:
    """Whether the bench SDK venv is installed already, so that sdk_python downloads nothing."""
    return BENCH_SDK.installed(root)


def sdk_http_python(root: Path) -> Path:
    """The venv of the SDK's HTTP servers (BENCH_SDK_HTTP), made the first time."""
    return BENCH_SDK_HTTP.python(root)
