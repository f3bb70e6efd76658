"""What an agent sees of the call that sent its message: the call without the caller's credentials.

An agent gets the request headers (`context.call.metadata`) to read what it needs (trace context, its own
headers), not the caller's secrets: `authorization`, `proxy-authorization`, `x-api-key`, `cookie` and the
header of every API-key scheme the card declares are left out. An agent that must act as its caller (pass
the credential on to another service) says so with a `sees_credentials = True` attribute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.call import CallContext

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})


class AgentView:
    """`credential_headers`: the headers of the card's API-key schemes, beside CREDENTIAL_HEADERS."""

    def __init__(self, executor: AgentExecutor, credential_headers: Iterable[str] = ()) -> None:
        self._sees_credentials = getattr(executor, "sees_credentials", False) is True
        self._hidden = CREDENTIAL_HEADERS | {header.lower() for header in credential_headers}

    def __call__(self, call: CallContext) -> CallContext:
        if self._sees_credentials:
            return call
        hidden = self._hidden
        metadata = call.metadata
        if not any(name in hidden for name, _ in metadata):
            return call
        return dataclasses.replace(call, metadata=tuple([entry for entry in metadata if entry[0] not in hidden]))
