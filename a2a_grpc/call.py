"""The context of one A2A call: what the server's interceptors established before the servicer runs."""

from __future__ import annotations

from dataclasses import dataclass

from a2a_grpc.errors import Metadata


@dataclass(frozen=True, slots=True)
class CallContext:
    """Built once per call by the interceptor chain and passed explicitly to the servicer, the task
    manager and the agent; nothing changes it afterwards.

    `requested_extensions` is what the client asked for (split, trimmed, de-duplicated);
    `activated_extensions` is the subset the agent declares and whose dependencies are active, and
    `echo` their comma-joined form as the response's `a2a-extensions` ("" when none is active).
    `deadline` is the seconds the client left the call when it arrived, None when it set none.
    """

    method: str = ""
    metadata: Metadata = ()
    deadline: float | None = None
    principal: str = ""
    version: str = "1.0"
    requested_extensions: tuple[str, ...] = ()
    activated_extensions: tuple[str, ...] = ()
    echo: str = ""
