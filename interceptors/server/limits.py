"""The limits layer of the interceptor chain: requests per second per caller, and open streams per caller
and in all.

A caller is the call's authenticated principal, or for an anonymous call its peer's address without the
port (so opening more connections does not earn more). Every A2A call takes a token from its caller's
bucket, which refills at `requests_per_second` up to one second's worth (at least one token); an empty
bucket refuses the call with RATE_LIMITED and the wait until the next token as its RetryInfo. A stream
holds a slot of its caller's and one of the server's from the moment it is opened until it ends, however
it ends (done, failed, cancelled by the client); a stream past either limit is refused with
TOO_MANY_STREAMS. Every call that fails authentication takes a token from its peer address's bucket of
failures (the address without the port), which refills at `auth_failures_per_second` up to one second's worth:
a failure that finds the bucket empty is answered RATE_LIMITED in place of UNAUTHENTICATED. A valid credential
is never refused by it, whatever its address's count (callers behind one NAT, proxy or sidecar share an
address). All these refusals are RESOURCE_EXHAUSTED with a RetryInfo, and the server keeps serving everyone
else.

Everything runs on the server's one event loop, so a check is a dict lookup and some arithmetic, no lock.
In worker mode (`--workers N`) each process keeps its own counts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from a2a_grpc.errors import RateLimitedError, TooManyStreamsError
from a2a_grpc.setting_types import MAX_RATE, MIN_RATE
from a2a_grpc.settings.defaults import MAX_AUTH_FAILURES_PER_SECOND as MAX_AUTH_FAILURES_PER_SECOND
from a2a_grpc.settings.defaults import MAX_REQUESTS_PER_SECOND
from a2a_grpc.settings.defaults import MAX_STREAMS as MAX_STREAMS
from a2a_grpc.settings.defaults import MAX_STREAMS_PER_CALLER as MAX_STREAMS_PER_CALLER

# Retrying a refused stream this soon (seconds) gives other streams time to end.
STREAM_RETRY_SECONDS = 1.0
# Buckets kept before full ones (callers idle for a second or more) are dropped.
MAX_IDLE_BUCKETS = 10_000

Release = Callable[[], None]


def caller_of(principal: str, peer: str) -> str:
    """Whom a call counts against: its principal, else its peer's address without the port."""
    if principal:
        return "principal:" + principal
    return address_of(peer)


def address_of(peer: str) -> str:
    """A grpc peer ("ipv4:127.0.0.1:53124") without its port: one address however many connections it opens."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rpartition(":")[0]
    return peer


class TokenBuckets:
    """A token bucket per key, refilling at `rate` a second up to `burst` tokens (at least one); the buckets
    of idle keys are dropped once MAX_IDLE_BUCKETS are kept."""

    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = max(1.0, rate)
        self.clock = clock
        self._buckets: dict[str, list[float]] = {}  # key -> [tokens, when they were counted]

    def take(self, key: str) -> float:
        """Spend one of `key`'s tokens and return 0, or spend nothing and return the seconds until there is one."""
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_BUCKETS:
                self._drop_full(now)
            self._buckets[key] = [self.burst - 1.0, now]
            return 0.0
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens > 0.999_999:  # a caller that waited the retry delay it was given is served
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / self.rate

    def _drop_full(self, now: float) -> None:
        rate, burst = self.rate, self.burst
        full = [key for key, (tokens, then) in self._buckets.items() if tokens + (now - then) * rate >= burst]
        for key in full:
            del self._buckets[key]

    def __len__(self) -> int:
        return len(self._buckets)


def check_rate(name: str, rate: float) -> None:
    """ValueError unless `rate` is 0 (no limit) or one a token bucket can hold (a2a_grpc.setting_types.MIN_RATE)."""
    if not (rate == 0 or MIN_RATE <= rate < MAX_RATE):
        raise ValueError(f"{name} must be 0 (no limit), or from {MIN_RATE:g} and below {MAX_RATE:g}, not {rate!r}")


class Limits:
    """`requests_per_second` 0 turns the rate limit off, `auth_failures_per_second` 0 the throttle on failed
    authentication."""

    def __init__(
        self,
        *,
        requests_per_second: float = MAX_REQUESTS_PER_SECOND,
        max_streams_per_caller: int = MAX_STREAMS_PER_CALLER,
        max_streams: int = MAX_STREAMS,
        auth_failures_per_second: float = MAX_AUTH_FAILURES_PER_SECOND,
    ) -> None:
        check_rate("requests_per_second", requests_per_second)
        check_rate("auth_failures_per_second", auth_failures_per_second)
        self.max_streams_per_caller = max_streams_per_caller
        self.max_streams = max_streams
        self.clock: Callable[[], float] = time.monotonic  # the buckets' clock (a test may stand in its own)
        self._requests = TokenBuckets(requests_per_second, lambda: self.clock())
        self._auth_failures = TokenBuckets(auth_failures_per_second, lambda: self.clock())
        self._streams: dict[str, int] = {}  # caller -> open streams
        self.open_streams = 0

    @property
    def rate_limited(self) -> bool:
        return self._requests.rate > 0

    @property
    def auth_throttled(self) -> bool:
        return self._auth_failures.rate > 0

    def take_request(self, caller: str) -> None:
        """Spend one of `caller`'s tokens, or raise RateLimitedError with the wait for the next one."""
        wait = self._requests.take(caller)
        if wait:
            rate = self._requests.rate
            raise RateLimitedError(
                f"too many requests: at most {rate:g} per second per caller",
                metadata={"limit": f"{rate:g}"},
                retry_delay=wait,
            )

    def auth_failed(self, peer: str) -> None:
        """Count a failed authentication against the peer's address; past its budget, raise RateLimitedError (with
        the wait) for the caller to be answered in place of the failure."""
        wait = self._auth_failures.take(address_of(peer))
        if wait:
            rate = self._auth_failures.rate
            raise RateLimitedError(
                f"too many failed authentications from this address: at most {rate:g} per second",
                metadata={"limit": f"{rate:g}", "scope": "authentication-failures"},
                retry_delay=wait,
            )

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
