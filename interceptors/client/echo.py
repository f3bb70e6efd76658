"""The activated extensions a server echoes in `a2a-extensions`, read from headers or trailers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from a2a_grpc.extensions import extension_header_values, parse_extension_values

EchoSource = Literal["headers", "trailers"]


@dataclass
class ResponseExtensions:
    """What one response said about extensions.

    `activated` is the set the server echoed (empty when it echoed nothing, which is also how a
    server without an echo looks); `source` says where the echo was found. A stream's record is
    published once the echo or the first event is there and completed from the trailers when the stream ends.
    """

    method: str
    activated: tuple[str, ...] = ()
    source: EchoSource | None = None

    @property
    def echoed(self) -> bool:
        return self.source is not None

    def is_active(self, uri: str) -> bool:
        return uri in self.activated

    def read(self, metadata: Any, source: EchoSource) -> bool:
        """Take the echo from `metadata` if it has one and none was found yet; True when it did."""
        if self.source is not None:
            return False
        values = extension_header_values(tuple(metadata or ()))
        if not values:
            return False
        self.activated = parse_extension_values(values)
        self.source = source
        return True


ResponseObserver = Callable[[ResponseExtensions], None]

_observer: ContextVar[ResponseObserver | None] = ContextVar("a2a_grpc_response_observer", default=None)


@contextmanager
def observe_extensions() -> Iterator[list[ResponseExtensions]]:
    """Collect a `ResponseExtensions` for each A2A call started inside the block, in the order their
    responses arrive (a unary call's when it completes, a stream's when its headers bring the echo or its first
    event arrives, else when it ends, an error included; a stream whose echo comes in the trailers after its
    first event has its record completed in place when it ends)."""
    records: list[ResponseExtensions] = []
    outer = _observer.get()

    def observe(record: ResponseExtensions) -> None:
        records.append(record)
        if outer is not None:
            outer(record)

    token = _observer.set(observe)
    try:
        yield records
    finally:
        _observer.reset(token)


def current_observer() -> ResponseObserver | None:
    return _observer.get()
