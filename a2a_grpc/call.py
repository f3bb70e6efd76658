"""The context of one A2A call: what the server's interceptors established before the servicer runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from a2a_grpc.errors import Metadata


def no_deadline() -> float | None:
    return None


@dataclass(frozen=True, slots=True)
class CallContext:
    """Built once per call by the interceptor chain and passed explicitly to the servicer, the task
    manager and the agent; nothing changes it afterwards.

    `requested_extensions` is what the client asked for (split, trimmed, de-duplicated);
    `activated_extensions` is the subset the agent declares and whose dependencies are active, and
    `echo` their comma-joined form as the response's `a2a-extensions` ("" when none is active).
    `time_remaining()` is the seconds left before the client's deadline, None when it set none (asked
    of the transport only when called: reading it costs more than the rest of the context).
    """

    method: str = ""
    metadata: Metadata = field(default=(), repr=False)  # the request headers, credentials included
    time_remaining: Callable[[], float | None] = field(default=no_deadline, repr=False, compare=False)
    principal: str = ""
    version: str = "1.0"
    requested_extensions: tuple[str, ...] = ()
    activated_extensions: tuple[str, ...] = ()
    echo: str = ""
