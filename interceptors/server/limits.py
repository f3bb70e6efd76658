"""The limits layer of the interceptor chain: requests per second per caller, and open streams per caller
and in all.

A caller is the call's authenticated principal, or for an anonymous call its peer's address without the
port (so opening more connections does not earn more). Every A2A call takes a token from its caller's
bucket, which refills at `requests_per_second` up to one second's worth (at least one token); an empty
bucket refuses the call with RATE_LIMITED and the wait until the next token as its RetryInfo. A stream
holds a slot of its caller's and one of the server's from the moment it is opened until it ends, however
it ends (done, failed, cancelled by the client); a stream past either limit is refused with
TOO_MANY_STREAMS. Both refusals are RESOURCE_EXHAUSTED, and the server keeps serving everyone else.

Everything runs on the server's one event loop, so a check is a dict lookup and some arithmetic, no lock.
In worker mode (`--workers N`) each process keeps its own counts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from a2a_grpc.errors import RateLimitedError, TooManyStreamsError

# Retrying a refused stream this soon (seconds) gives other streams time to end.
STREAM_RETRY_SECONDS = 1.0
# Buckets kept before full ones (callers idle for a second or more) are dropped.
MAX_IDLE_BUCKETS = 10_000

Release = Callable[[], None]


def caller_of(principal: str, peer: str) -> str:
    """Whom a call counts against: its principal, else its peer's address without the port."""
    if principal:
        return "principal:" + principal
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rpartition(":")[0]
    return peer


class Limits:
    """`requests_per_second` 0 turns the rate limit off."""

    def __init__(
        self, *, requests_per_second: float = 0.0, max_streams_per_caller: int = 100, max_streams: int = 10_000
    ) -> None:
        self.requests_per_second = requests_per_second
        self.burst = max(1.0, requests_per_second)
        self.max_streams_per_caller = max_streams_per_caller
        self.max_streams = max_streams
        self._buckets: dict[str, list[float]] = {}  # caller -> [tokens, when they were counted]
        self._streams: dict[str, int] = {}  # caller -> open streams
        self.open_streams = 0
        self._clock = time.monotonic

    @property
    def rate_limited(self) -> bool:
        return self.requests_per_second > 0

    def take_request(self, caller: str) -> None:
        """Spend one of `caller`'s tokens, or raise RateLimitedError with the wait for the next one."""
        now = self._clock()
        rate = self.requests_per_second
        bucket = self._buckets.get(caller)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_BUCKETS:
                self._drop_full_buckets(now)
            self._buckets[caller] = [self.burst - 1.0, now]
            return
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if tokens > 0.999_999:  # a caller that waited the retry delay it was given is served
            bucket[0] = tokens - 1.0
            return
        bucket[0] = tokens
        raise RateLimitedError(
            f"too many requests: at most {rate:g} per second per caller",
            metadata={"limit": f"{rate:g}"},
            retry_delay=(1.0 - tokens) / rate,
        )

    def _drop_full_buckets(self, now: float) -> None:
        rate, burst = self.requests_per_second, self.burst
        full = [caller for caller, (tokens, then) in self._buckets.items() if tokens + (now - then) * rate >= burst]
        for caller in full:
            del self._buckets[caller]

    def open_stream(self, caller: str) -> Release:
        """Take a stream slot for `caller`, or raise TooManyStreamsError; the result gives it back (once)."""
        held = self._streams.get(caller, 0)
        if held >= self.max_streams_per_caller:
            raise TooManyStreamsError(
                f"too many open streams: at most {self.max_streams_per_caller} per caller",
                metadata={"limit": str(self.max_streams_per_caller), "scope": "caller"},
                retry_delay=STREAM_RETRY_SECONDS,
            )
        if self.open_streams >= self.max_streams:
            raise TooManyStreamsError(
                f"too many open streams: the server serves at most {self.max_streams}",
                metadata={"limit": str(self.max_streams), "scope": "server"},
                retry_delay=STREAM_RETRY_SECONDS,
            )
        self._streams[caller] = held + 1
        self.open_streams += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.open_streams -= 1
            left = self._streams[caller] - 1
            if left:
                self._streams[caller] = left
            else:
                del self._streams[caller]

        return release

    def streams_of(self, caller: str) -> int:
        return self._streams.get(caller, 0)


async def released_when_done(events: AsyncIterator[Any], release: Release) -> AsyncIterator[Any]:
    """`events`, giving the stream's slot back when the stream ends, however it ends."""
    try:
        async for event in events:
            yield event
    finally:
        release()
