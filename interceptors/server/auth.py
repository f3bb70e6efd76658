"""Authenticates A2A calls with static bearer tokens (`authorization: Bearer <token>`)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from a2a_grpc.errors import AuthenticationError, Metadata
from a2a_grpc.interceptors.server.metadata import first_value
from a2a_grpc.protocol import AUTHORIZATION_HEADER


class BearerTokenAuthenticator:
    """Maps each known token to its principal, which becomes the call's principal; refuses everything else."""

    def __init__(self, principals_by_token: Mapping[str, str]) -> None:
        self._principals = [(token.encode(), principal) for token, principal in principals_by_token.items()]

    def __call__(self, metadata: Metadata) -> str:
        """The caller's principal; raises AuthenticationError when the call carries no known token."""
        principal = self.principal(first_value(metadata, AUTHORIZATION_HEADER))
        if principal is None:
            raise AuthenticationError("a valid 'authorization: Bearer <token>' header is required")
        return principal

    def principal(self, authorization: str) -> str | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        presented = token.strip().encode()
        found = None
        for known, principal in self._principals:  # every token is compared: the time says nothing
            if hmac.compare_digest(known, presented):
                found = principal
        return found
