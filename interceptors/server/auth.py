"""Authenticates A2A calls with static bearer tokens (`authorization: Bearer <token>`)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping

import grpc

from a2a_grpc.call import begin_call
from a2a_grpc.errors import AuthenticationError
from a2a_grpc.interceptors.server.handlers import first_value, is_a2a_method, rejecting_handler

AUTHORIZATION_HEADER = "authorization"


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Maps each known token to its principal, which becomes the call's caller; refuses everything else."""

    def __init__(self, principals_by_token: Mapping[str, str]) -> None:
        self._principals = dict(principals_by_token)

    def principal(self, authorization: str) -> str | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        token = token.strip()
        for known, principal in self._principals.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return principal
        return None

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if not is_a2a_method(method):
            return await continuation(handler_call_details)
        authorization = first_value(handler_call_details, AUTHORIZATION_HEADER)
        principal = self.principal(authorization) if authorization else None
        if principal is None:
            error = AuthenticationError("a valid 'authorization: Bearer <token>' header is required")
            return rejecting_handler(method, error)
        begin_call().caller = principal
        return await continuation(handler_call_details)
