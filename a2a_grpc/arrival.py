"""What the transport says of a call as it arrives, read from its grpc.aio servicer context once.

The rule this module keeps: a grpc.aio servicer context is touched only while its call is live, never at
its end. Once a handler or a stream has seen cancellation (CancelledError, GeneratorExit: the client went
away, its deadline passed, its channel closed) grpc core may already have freed what the context points
into, and `context.peer()` there is a use-after-free that kills the process with SIGSEGV (grpc/grpc pull
request 29927, closed unmerged). So the chain reads the peer (the caller's own, also behind
a2a_grpc.connection_front), the request headers and the deadline here, before anything else runs, and whatever
runs at a call's end (the access log, metrics, spans, the release of a stream slot, an agent asking for the time
left) reads this record, never the context. In an `except`
or `finally` block, or after a stream's last `yield`, the grpc context is out of bounds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from a2a_grpc.connection_front import PEERS as FRONT_PEERS
from a2a_grpc.errors import Metadata

# What a handler or stream sees when its call is over before it answered: the grpc context is then out of bounds.
CALL_OVER = (asyncio.CancelledError, GeneratorExit)
MAX_CAUSES = 32  # how far back `seen_call_over` looks along an exception's chain


def seen_call_over(error: BaseException) -> bool:
    """True when `error` is, or was raised while handling, the end of its call (CALL_OVER)."""
    seen: BaseException | None = error
    for _ in range(MAX_CAUSES):
        if seen is None:
            return False
        if isinstance(seen, CALL_OVER):
            return True
        seen = seen.__context__
    return False


@dataclass(frozen=True, slots=True)
class Arrival:
    """`deadline` is the `time.monotonic()` at which the client's deadline passes, None when it set none."""

    peer: str = ""
    metadata: Metadata = ()
    deadline: float | None = None

    @classmethod
    def of(cls, context: Any) -> Arrival:
        remaining = context.time_remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        peer = str(context.peer() or "")
        return cls(FRONT_PEERS.get(peer, peer), context.invocation_metadata() or (), deadline)

    def time_remaining(self) -> float | None:
        """Seconds left before the client's deadline (0 once it passed), None when it set none."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline
