"""Reading request headers (gRPC invocation metadata; keys arrive lower-case)."""

from __future__ import annotations

from a2a_grpc.errors import Metadata


def first_value(metadata: Metadata, key: str) -> str:
    """The value of the first `key` entry ("" when there is none)."""
    for name, value in metadata:
        if name == key:
            return str(value)
    return ""


def all_values(metadata: Metadata, key: str) -> tuple[str, ...]:
    """The values of every `key` entry, in order."""
    return tuple([str(value) for name, value in metadata if name == key])
