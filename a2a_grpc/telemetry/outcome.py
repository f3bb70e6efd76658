"""How a call ended: the status code and A2A reason it leaves with, worked out from what it raised.

The errors guard (`a2a_grpc.interceptors.server.errors`) turns the same exceptions into the status
itself; this is the read-only view of that mapping the access log and the metrics share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import grpc

from a2a_grpc.arrival import CALL_OVER, Arrival
from a2a_grpc.errors import A2AError

StatusCode = grpc.StatusCode
SERVER_FAULTS = frozenset({StatusCode.INTERNAL, StatusCode.UNKNOWN, StatusCode.DATA_LOSS})
_NO_DETAILS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Outcome:
    """`details` is the ErrorInfo metadata the caller gets; `error` what the call raised. `unexpected`:
    not an A2AError, so the caller gets a generic INTERNAL and only the server's log the traceback.
    `fault`: the server failed the call (INTERNAL, UNKNOWN, DATA_LOSS), rather than refusing or answering it.
    `code_name`: the code's name ("OK"), read once here rather than from the enum at each use."""

    code: grpc.StatusCode
    reason: str = ""
    details: Mapping[str, str] = field(default_factory=lambda: _NO_DETAILS)
    error: BaseException | None = None
    unexpected: bool = False
    fault: bool = field(init=False)
    code_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fault", self.code in SERVER_FAULTS)
        object.__setattr__(self, "code_name", self.code.name)


OK = Outcome(StatusCode.OK)


def outcome_of(error: BaseException, arrival: Arrival) -> Outcome:
    """How a call that raised `error` ends, `arrival` being what it arrived with (its deadline)."""
    if isinstance(error, A2AError):
        return Outcome(error.code, error.reason, error.metadata or _NO_DETAILS, error)
    if isinstance(error, CALL_OVER):  # the client went away, or its deadline passed
        return Outcome(StatusCode.DEADLINE_EXCEEDED if arrival.expired else StatusCode.CANCELLED, error=error)
    if not isinstance(error, Exception):  # SystemExit and the like: the guard lets them through to grpc
        return Outcome(StatusCode.UNKNOWN, error=error)
    return Outcome(StatusCode.INTERNAL, "INTERNAL", error=error, unexpected=True)
