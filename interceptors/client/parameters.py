"""The A2A service parameters a client sends with every call: `a2a-version` and `a2a-extensions`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import grpc

from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.wire import EXTENSIONS_HEADER, VERSION_HEADER
from a2a_grpc.wire import is_a2a_method as is_a2a_path

_extensions_override: ContextVar[tuple[str, ...] | None] = ContextVar("a2a_grpc_client_extensions", default=None)


@contextmanager
def use_extensions(uris: Iterable[str]) -> Iterator[tuple[str, ...]]:
    """Within this block, calls request exactly `uris` instead of the interceptor's configured set.

    Entries a call carries in its own metadata are still added. The set is read when a call starts,
    so a stream started inside the block keeps it.
    """
    requested = parse_extension_values(uris)
    token = _extensions_override.set(requested)
    try:
        yield requested
    finally:
        _extensions_override.reset(token)


def method_name(method: str | bytes) -> str:
    return method.decode() if isinstance(method, bytes) else method


def is_a2a_method(method: str | bytes) -> bool:
    return is_a2a_path(method_name(method))


def with_service_parameters(metadata: Any, version: str, extensions: tuple[str, ...]) -> grpc.aio.Metadata:
    """The call's metadata with `a2a-version` (unless the call sets its own) and every requested
    extension (configured or overridden, plus the call's own entries) in one comma-joined entry."""
    override = _extensions_override.get()
    requested: list[str] = list(extensions if override is None else override)
    pairs: list[tuple[str, Any]] = []
    has_version = False
    for key, value in metadata or ():
        if key == EXTENSIONS_HEADER:
            requested.append(value)
            continue
        has_version = has_version or key == VERSION_HEADER
        pairs.append((key, value))
    if not has_version:
        pairs.append((VERSION_HEADER, version))
    joined = ",".join(parse_extension_values(requested))
    if joined:
        pairs.append((EXTENSIONS_HEADER, joined))
    return grpc.aio.Metadata(*pairs)
