"""What every module of the PostgreSQL store uses: importing asyncpg, error translation, text checks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from a2a_grpc.store.base import StorageFullError, StoreError

_DISK_FULL: Final = "53100"  # SQLSTATE disk_full: also "could not extend file" on a full disk


def import_asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError as exc:
        raise StoreError("the PostgreSQL store needs asyncpg: install a2a-grpc[postgres]") from exc
    return asyncpg


@contextlib.contextmanager
def translated(prefix: str = "postgresql") -> Iterator[None]:
    """Raise database and connection errors as StoreError (StorageFullError for a full disk)."""
    try:
        yield
    except Exception as exc:
        error = as_store_error(exc, prefix)
        if error is exc:
            raise
        raise error from exc


def as_store_error(exc: BaseException, prefix: str = "postgresql") -> BaseException:
    asyncpg = import_asyncpg()
    if getattr(exc, "sqlstate", None) == _DISK_FULL:
        return StorageFullError(f"{prefix}: {exc}")
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError | TimeoutError):
        return StoreError(f"{prefix}: {exc}")
    return exc


def has_nul(*texts: str) -> bool:
    """PostgreSQL text cannot hold NUL: no stored string has one."""
    return any("\x00" in text for text in texts)


def row_count(command_status: str) -> int:
    """The row count of a command status such as "UPDATE 1" or "INSERT 0 3"."""
    return int(command_status.rsplit(" ", 1)[-1])
