"""One owner per SQLite file: an exclusive `flock` on a file beside it (`tasks.db.lock`), holding the owner's pid.

Beside the database, not on it: SQLite locks the database with POSIX (fcntl) locks, and closing any other
descriptor of that file in the process drops them all, which a refused second open in the same process
would do. `flock` belongs to the open file description, so a second open in the same process conflicts as
one in another process does, and the kernel drops it with the last descriptor: a killed server (even by
SIGKILL) leaves no stale lock. The lock file itself stays (removing it would let two processes lock two
different files of the same name); only the lock says whether the store is in use, its pid says by whom.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from a2a_grpc.store.base import StoreError, StoreInUseError

_PID_BYTES = 32


class FileLock:
    """The lock on the database file `path` while held: `take` it before the file is opened, `release` it once
    every connection to the file is closed."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def take(cls, path: Path) -> FileLock:
        """StoreInUseError while another open store holds the file; StoreError when it cannot be locked."""
        database = Path(os.path.realpath(path))  # one lock however the file is named (relative, a symlink)
        lock_file = database.with_name(database.name + ".lock")
        try:
            database.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the agent's subprocesses
        except OSError as exc:
            raise StoreError(f"cannot open the task store {database}: cannot create {lock_file}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreInUseError(str(database), holder) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot open the task store {database}: cannot lock {lock_file}: {exc}") from exc
        with contextlib.suppress(OSError):  # the pid only tells whom a refused server names
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd)

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # the lock goes with the descriptor


def _holder(fd: int) -> int | None:
    """The pid the holder wrote, if it has yet (it writes it just after it takes the lock)."""
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, _PID_BYTES, 0))
    return None
