"""What every module of the PostgreSQL store uses: importing asyncpg, error translation, text checks."""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator
from typing import Any, Final

from a2a_grpc.setting_types import SHOWN_CHARS
from a2a_grpc.store.base import StorageFullError, StoreError, StoreUnavailableError

_DISK_FULL: Final = "53100"  # SQLSTATE disk_full: also "could not extend file" on a full disk
# SQLSTATE classes of a database out of reach: connection exceptions (08), and the server shutting down,
# crashed or not yet accepting connections (57P01-57P03), a statement cancelled by its timeout (57014)
_UNREACHABLE: Final = ("08", "57P", "57014")
_DEFAULT_PORT: Final = "5432"
_UNCLEAR: Final = "an address the URL does not make clear"


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
    """StorageFullError for a full disk; StoreUnavailableError when the database cannot be reached or is
    going away (a refused or lost connection, a server shutting down or starting, a timeout); StoreError for
    any other database error; anything else as it is."""
    asyncpg = import_asyncpg()
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate == _DISK_FULL:
        return StorageFullError(f"{prefix}: {exc}")
    lost = asyncpg.InterfaceError | asyncpg.InternalClientError | OSError | TimeoutError  # a connection gone bad
    if sqlstate.startswith(_UNREACHABLE) or isinstance(exc, lost):
        return StoreUnavailableError(f"{prefix}: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        return StoreError(f"{prefix}: {exc}")
    return exc


def address_of(url: str) -> str:
    """The PostgreSQL server(s) `url` names, HOST:PORT (comma-joined when several), never its user or password;
    where the URL leaves them out, what asyncpg falls back to (the host and port query parameters, PGHOST and
    PGPORT, localhost and 5432). Cut to SHOWN_CHARS."""
    try:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
    except ValueError:
        return _UNCLEAR
    if "@" in url and "@" not in parts.netloc:  # the user part holds a '/', '?' or '#': the host is unclear
        return _UNCLEAR
    hosts = urllib.parse.unquote(parts.netloc.rpartition("@")[2])
    hosts = hosts or query.get("host", [os.environ.get("PGHOST") or "localhost"])[0]
    default_port = query.get("port", [os.environ.get("PGPORT") or _DEFAULT_PORT])[0]
    named = ",".join(host if _has_port(host) else f"{host}:{default_port}" for host in hosts.split(","))
    return named if len(named) <= SHOWN_CHARS else named[:SHOWN_CHARS] + "\u2026"


def _has_port(host: str) -> bool:
    return not host.endswith("]") and host.rpartition(":")[2].isdigit()


def has_nul(*texts: str) -> bool:
    """PostgreSQL text cannot hold NUL: no stored string has one."""
    return any("\x00" in text for text in texts)


def row_count(command_status: str) -> int:
    """The row count of a command status such as "UPDATE 1" or "INSERT 0 3"."""
    return int(command_status.rsplit(" ", 1)[-1])
