"""The context of one A2A call: what the server's interceptors established before the servicer runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from a2a_grpc.errors import Metadata
from a2a_grpc.trace_context import TraceContext


def no_deadline() -> float | None:
    return None


TENANT_SEPARATOR = "\x1f"

NO_CLAIMS: Mapping[str, Any] = MappingProxyType({})


def no_claims() -> Mapping[str, Any]:
    return NO_CLAIMS


@dataclass(frozen=True, slots=True)
class CallContext:
    """Built once per call by the interceptor chain and passed explicitly to the servicer, the task
    manager and the agent; nothing changes it afterwards.

    `requested_extensions` is what the client asked for (split, trimmed, de-duplicated);
    `activated_extensions` is the subset the agent declares and whose dependencies are active, and
    `echo` their comma-joined form as the response's `a2a-extensions` ("" when none is active).
    `time_remaining()` is the seconds left before the client's deadline, None when it set none (counted from
    the deadline read when the call arrived: a2a_grpc.arrival); an agent's says None too once the call is over
    (a2a_grpc.tasks.agent_view).
    `principal` is the authenticated caller ("" on an open server or for an anonymous caller), `claims` what
    its credential said about it (a JWT's claims, a client certificate's names: a2a_grpc.auth), read-only.
    `trace_context` is the call's server span, with tracing on (a2a_grpc.telemetry.tracing); None when off.
    `tenant` is the request's tenant, one the card's interfaces name ("" on a server without tenants).
    """

    method: str = ""
    metadata: Metadata = field(default=(), repr=False)  # the request headers, credentials included
    time_remaining: Callable[[], float | None] = field(default=no_deadline, repr=False, compare=False)
    principal: str = ""
    version: str = "1.0"
    requested_extensions: tuple[str, ...] = ()
    activated_extensions: tuple[str, ...] = ()
    echo: str = ""
    trace_context: TraceContext | None = field(default=None, repr=False, compare=False)
    claims: Mapping[str, Any] = field(default_factory=no_claims, repr=False, compare=False)
    tenant: str = ""
    peer: str = ""  # the transport's address of the caller, as grpc names it ("ipv4:127.0.0.1:53124")

    @property
    def owner(self) -> str:
        """The caller's partition, under which its tasks and push configs are stored: its principal, scoped to
        the tenant when there is one. Tenant names hold no TENANT_SEPARATOR (the card check) and on a server
        with tenants no principal does (the tenant check), so no two (tenant, principal) pairs share a key."""
        return f"{self.tenant}{TENANT_SEPARATOR}{self.principal}" if self.tenant else self.principal


def owner_call(owner: str) -> CallContext:
    """A context acting as the stored owner `owner`: the server's own work on a task (recovery, takeover)."""
    return CallContext(principal=owner)
