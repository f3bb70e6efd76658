"""The tenant a request names: one of those the card's interfaces name, which then scopes the call's tasks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from a2a_grpc.call import TENANT_SEPARATOR, CallContext
from a2a_grpc.errors import InvalidRequestError, PermissionDeniedError


class TenantCheck:
    """Built from the tenants the card's interfaces name ("" for an interface that names none). Without any
    named tenant every request must leave `tenant` empty; with some, `tenant` must be one of them, and the
    call's tasks and push configs are partitioned by (tenant, principal) (`CallContext.owner`)."""

    def __init__(self, interface_tenants: Iterable[str]) -> None:
        self.tenants = frozenset(interface_tenants)
        self.enabled = any(self.tenants)

    def __call__(self, call: CallContext, tenant: str) -> CallContext:
        if not self.enabled:
            raise InvalidRequestError(
                "this agent serves no tenants: leave tenant empty",
                violations=[("tenant", "must be empty: the agent card names no tenant")],
            )
        if tenant not in self.tenants:
            problem = (
                "names no tenant of this agent" if tenant else "is required: every interface of this agent names one"
            )
            raise InvalidRequestError(
                f"tenant {problem}", violations=[("tenant", "must be a tenant the agent card names")]
            )
        if TENANT_SEPARATOR in call.principal:
            raise PermissionDeniedError("this caller's name cannot be scoped to a tenant")
        return dataclasses.replace(call, tenant=tenant) if tenant else call
