"""The negotiated state of one A2A call, handed from the interceptors to the servicer and the agent."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from a2a_grpc.errors import Metadata


@dataclass(slots=True)
class CallState:
    """What the interceptors learned about the call before the servicer runs.

    `requested_extensions` is what the client asked for (split, trimmed, de-duplicated);
    `activated_extensions` is the subset the agent declares and whose dependencies are active.
    `deadline` is seconds remaining when the call started, None when the client set none.
    """

    version: str = "1.0"
    requested_extensions: tuple[str, ...] = ()
    activated_extensions: tuple[str, ...] = ()
    caller: str = ""
    deadline: float | None = None
    metadata: Metadata = ()
    echo: str | None = None  # the `a2a-extensions` response value, once the call is accepted

    def is_active(self, uri: str) -> bool:
        return uri in self.activated_extensions


_ANONYMOUS_CALL = CallState()
_current_call: ContextVar[CallState] = ContextVar("a2a_grpc_call", default=_ANONYMOUS_CALL)


def current_call() -> CallState:
    """The state of the call being served (a default state when no interceptor ran)."""
    return _current_call.get()


def begin_call() -> CallState:
    """The state of the running RPC, created on first use.

    grpc.aio serves each RPC in its own asyncio task, and a task copies the context it starts from,
    so a state bound here is seen by this call's interceptors, servicer and agent only.
    """
    state = _current_call.get()
    if state is _ANONYMOUS_CALL:
        state = CallState()
        _current_call.set(state)
    return state
