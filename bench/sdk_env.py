"""The reference SDK's own venv (.bench-venv-sdk/): its generated lf.a2a.v1 code cannot share a process with ours."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

SDK_REQUIREMENT = "a2a-sdk[grpc]==1.3.0"
# The grpc extra brings grpcio, grpcio-tools and grpcio-reflection; uvloop is only for --sdk-uvloop.
EXTRA_REQUIREMENTS = ("uvloop>=0.21",)
INSTALL_TIMEOUT_SECONDS = 600
VENV_NAME = ".bench-venv-sdk"
INSTALLED = " ".join((SDK_REQUIREMENT, *EXTRA_REQUIREMENTS))  # the content of a finished install's stamp file


class SdkUnavailableError(Exception):
    """The SDK could not be installed; the message says why."""


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
    """The SDK venv's python, creating the venv and installing the SDK the first time."""
    venv = root / VENV_NAME
    with _install_lock(venv):
        return _ensure_installed(venv)


def sdk_installed(root: Path) -> bool:
    """Whether the SDK venv is installed already, so that sdk_python downloads nothing."""
    return _installed(root / VENV_NAME)


def _installed(venv: Path) -> bool:
    stamp = venv / ".bench-installed"
    return (venv / "bin" / "python").exists() and stamp.exists() and stamp.read_text() == INSTALLED


def _ensure_installed(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if _installed(venv):
        return python
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK_REQUIREMENT],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *EXTRA_REQUIREMENTS],
    ]
    print(f"bench: installing {INSTALLED} into {venv.name}/ (once)", file=sys.stderr, flush=True)
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SdkUnavailableError(f"{' '.join(step[:4])} failed: {error}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SdkUnavailableError(f"{' '.join(step[:5])} failed: {' / '.join(tail)}")
    check = subprocess.run(
        [str(python), "-c", "import a2a.server.request_handlers.grpc_handler, grpc"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check.returncode != 0:
        raise SdkUnavailableError(f"the SDK's gRPC server does not import: {check.stderr.strip()[-300:]}")
    (venv / ".bench-installed").write_text(INSTALLED)
    return python
