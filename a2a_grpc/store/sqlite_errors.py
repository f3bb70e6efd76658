"""How the SQLite store reports what sqlite3 raised: the kinds of StoreError the task manager tells apart."""

from __future__ import annotations

import sqlite3

from a2a_grpc.store.base import StorageFullError, StoreError, StoreUnavailableError

# Result codes of a file that cannot be read or written right now, though it may be soon.
_UNAVAILABLE = frozenset({sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN})


def as_store_error(exc: BaseException, prefix: str = "sqlite") -> BaseException:
    """StorageFullError for a full disk; StoreUnavailableError when the file cannot be read or written right
    now (an I/O error, a lock held past the busy timeout, a file that cannot be opened); StoreError for any
    other sqlite3 error; anything else as it is."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # sqlite3's own errors (a closed connection) carry none
    if code == sqlite3.SQLITE_FULL:
        return StorageFullError(f"{prefix}: {exc}")
    if code in _UNAVAILABLE or isinstance(exc, OSError):
        return StoreUnavailableError(f"{prefix}: {exc}")
    if isinstance(exc, sqlite3.Error):
        return StoreError(f"{prefix}: {exc}")
    return exc
