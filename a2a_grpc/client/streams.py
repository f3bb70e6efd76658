"""The streams of the client's streaming calls: `EventStream`, and `ResumingStream`, which subscribes again
after the last event it received when its stream is cut with UNAVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

import grpc

from a2a_grpc.errors import UnavailableError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.client import ResponseExtensions
from a2a_grpc.resume import event_seq

# A resuming subscription gives up after this many failed attempts in a row, waiting between them from
# the first delay, doubled each time, up to the last.
MAX_RESUME_ATTEMPTS = 8
RESUME_DELAYS_SECONDS = (0.05, 2.0)


class EventStream:
    """The events of a streaming call, in order. `activated_extensions` is known once the first event
    (or `await stream.headers()`) arrived, and completed from the trailers when the stream ends."""

    def __init__(self, call: Any, records: list[ResponseExtensions]) -> None:
        self._call = call
        self._records = records

    @property
    def activated_extensions(self) -> tuple[str, ...]:
        return self._records[0].activated if self._records else ()

    async def headers(self) -> tuple[str, ...]:
        """Wait for the response headers and return the activated extensions."""
        await self._call.initial_metadata()
        return self.activated_extensions

    def __aiter__(self) -> AsyncIterator[a2a_pb2.StreamResponse]:
        return self._events()

    async def _events(self) -> AsyncIterator[a2a_pb2.StreamResponse]:
        async for event in self._call:
            yield event

    async def collect(self) -> list[a2a_pb2.StreamResponse]:
        return [event async for event in self]

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()


StartCall = Callable[[int | None], tuple[Any, list[ResponseExtensions]]]  # a subscription after an event


class ResumingStream(EventStream):
    """A subscription that, cut with UNAVAILABLE, subscribes again after the last event it received
    (through the stream-resume extension), so its reader sees every event once, in order. The task
    snapshot a resumed subscription starts with is skipped: the events after it follow on seamlessly."""

    def __init__(self, start: StartCall, after: int | None) -> None:
        super().__init__(*start(after))
        self._start = start
        self._last = after

    async def _events(self) -> AsyncIterator[a2a_pb2.StreamResponse]:
        failures = 0
        resumed = False
        while True:
            try:
                async for event in self._call:
                    if resumed and event.HasField("task"):
                        resumed = False
                        continue
                    resumed = False
                    failures = 0
                    seq = event_seq(event)
                    if seq is not None and (self._last is None or not event.HasField("task")):
                        self._last = seq  # a first task's number runs ahead of the events replayed after it
                    yield event
                return
            except (UnavailableError, grpc.aio.AioRpcError) as error:
                if not _unavailable(error) or failures >= MAX_RESUME_ATTEMPTS:
                    raise
            first, most = RESUME_DELAYS_SECONDS
            await asyncio.sleep(min(first * 2**failures, most))
            failures += 1
            resumed = self._last is not None
            self._call, self._records = self._start(self._last)


def _unavailable(error: Exception) -> bool:
    if isinstance(error, grpc.aio.AioRpcError):
        return bool(error.code() == grpc.StatusCode.UNAVAILABLE)
    return True
