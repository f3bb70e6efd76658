"""Task stores: the interface, the in-memory, SQLite and PostgreSQL stores, and `open_store` to pick one by URL."""

from __future__ import annotations

from a2a_grpc.settings.defaults import MEMORY_STORE_MAX_TASKS
from a2a_grpc.store._codec import config_page_token_after, page_token_after
from a2a_grpc.store.base import (
    InvalidPageTokenError,
    StorageFullError,
    StoreError,
    StoreInUseError,
    StoreUnavailableError,
    TaskPage,
    TaskQuery,
    TaskStore,
    TaskWrite,
    VersionConflictError,
)
from a2a_grpc.store.memory import MemoryStore
from a2a_grpc.store.postgres import POOL_SIZE, PostgresStore
from a2a_grpc.store.sqlite import SqliteStore

__all__ = [
    "POOL_SIZE",
    "InvalidPageTokenError",
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "StorageFullError",
    "StoreError",
    "StoreInUseError",
    "StoreUnavailableError",
    "TaskPage",
    "TaskQuery",
    "TaskStore",
    "TaskWrite",
    "VersionConflictError",
    "config_page_token_after",
    "open_store",
    "page_token_after",
]

_ACCEPTED = (
    "'memory', 'memory://', 'sqlite:///relative/path', 'sqlite:////absolute/path' or 'postgresql://USER@HOST:PORT/DB'"
)
_SQLITE_PREFIX = "sqlite:///"
_POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def open_store(url: str, pool_size: int = POOL_SIZE, memory_max_tasks: int = MEMORY_STORE_MAX_TASKS) -> TaskStore:
    """The store named by `url`, not yet opened (await its `open()`); `pool_size` connections for PostgreSQL,
    `memory_max_tasks` tasks at most in the memory store (0: no bound)."""
    if url in ("memory", "memory://"):
        return MemoryStore(max_tasks=memory_max_tasks)
    if url.startswith(_SQLITE_PREFIX):
        path = url.removeprefix(_SQLITE_PREFIX)  # "sqlite:////abs" leaves "/abs"; "sqlite:///rel", "rel"
        if not path:
            raise ValueError(f"store URL {url!r} names no file; accepted forms: {_ACCEPTED}")
        return SqliteStore(path)
    if url.startswith(_POSTGRES_PREFIXES):
        return PostgresStore(url, pool_size)
    scheme = url.partition(":")[0][:32]  # the rest may hold a password
    raise ValueError(f"unsupported store URL scheme {scheme!r}; accepted forms: {_ACCEPTED}")
