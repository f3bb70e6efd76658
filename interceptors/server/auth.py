"""The authentication layer of the chain: the card's security requirements (a2a_grpc.auth), evaluated for
every A2A call before anything else reads it, give the call its principal and claims; a refusal is
UNAUTHENTICATED (no credential the card accepts) or PERMISSION_DENIED (a scope missing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a_grpc.auth import CardAuthenticator, Principal
from a2a_grpc.errors import Metadata

# (request headers, grpc context) -> the caller's principal, or raises the refusal
Authenticate = Callable[[Metadata, Any], Awaitable[Principal]]


def authentication(authenticator: CardAuthenticator) -> Authenticate:
    """`authenticator` given the transport's view of the peer (its TLS client certificate), which only a scheme
    that needs it asks for."""
    authenticate = authenticator.authenticate

    def authenticated(metadata: Metadata, context: Any) -> Awaitable[Principal]:
        return authenticate(metadata, context.auth_context)

    return authenticated
