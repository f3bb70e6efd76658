"""What an agent sees of the call that sent its message: the call without the caller's credentials, and a
`time_remaining()` that says None once that call is over (its answer made: a run outlives its call).

An agent gets the request headers (`context.call.metadata`) to read what it needs (trace context, its own
headers), not the caller's secrets: `authorization`, `proxy-authorization`, `x-api-key`, `cookie` and the
header of every API-key scheme the card declares are left out. An agent that must act as its caller (pass
the credential on to another service) says so with a `sees_credentials = True` attribute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.call import CallContext

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})


class CallClock:
    """The agent's `time_remaining()`: the call's own until `over()`, then None."""

    __slots__ = ("_over", "_remaining")

    def __init__(self, remaining: Callable[[], float | None]) -> None:
        self._remaining = remaining
        self._over = False

    def __call__(self) -> float | None:
        return None if self._over else self._remaining()

    def over(self) -> None:
        self._over = True


class AgentView:
    """`credential_headers`: the headers of the card's API-key schemes, beside CREDENTIAL_HEADERS."""

    def __init__(self, executor: AgentExecutor, credential_headers: Iterable[str] = ()) -> None:
        self._sees_credentials = getattr(executor, "sees_credentials", False) is True
        self._hidden = CREDENTIAL_HEADERS | {header.lower() for header in credential_headers}

    def __call__(self, clock: CallClock, call: CallContext) -> CallContext:
        metadata = call.metadata
        hidden = self._hidden
        if not self._sees_credentials and any(name in hidden for name, _ in metadata):
            metadata = tuple([entry for entry in metadata if entry[0] not in hidden])
        return dataclasses.replace(call, metadata=metadata, time_remaining=clock)
