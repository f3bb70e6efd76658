"""What every authentication scheme shares: the principal it finds, the one interface it implements, and
the ways it says no."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from a2a_grpc.call import no_claims
from a2a_grpc.errors import Metadata

# The transport's view of the peer: grpc's `context.auth_context()` (property name -> values), asked for
# only by a scheme that needs it (mutual TLS), since reading it costs a call into the transport.
AuthContext = Mapping[str, Sequence[bytes]]
PeerAuthContext = Callable[[], AuthContext]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `name` is its identity everywhere (the owner of its tasks, the access log's
    principal, the agent's `context.caller`); `claims` what the credential said about it (a JWT's claims, a
    client certificate's subject and names), read-only; `scopes` what it was granted (JWT `scope`/`scp`)."""

    name: str
    scheme: str  # the card's name of the scheme that authenticated it
    claims: Mapping[str, Any] = field(default_factory=no_claims, compare=False)
    scopes: frozenset[str] = frozenset()


ANONYMOUS = Principal("", "")


class CredentialRejected(Exception):
    """A credential for the scheme was presented but is not valid. `reason` is for a DEBUG log line and names
    no part of the credential; the caller is only ever told which schemes the server accepts."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeysUnknown(Exception):
    """The credential names a key the scheme does not know yet: await `refresh()` (False when the keys could not
    be fetched), then ask again (once)."""

    def __init__(self, refresh: Callable[[], Awaitable[bool]]) -> None:
        super().__init__("unknown key")
        self.refresh = refresh


class Scheme(Protocol):
    """One kind of credential. `authenticate` returns the caller's principal, None when the call presents no
    credential of this kind, and raises CredentialRejected when it presents one that is not valid (or
    KeysUnknown when it may become valid once the keys are fetched again). It runs on the event loop for every
    call: it must be cheap and never block."""

    kind: str  # how the unauthenticated message tells a client to authenticate, e.g. "authorization: Bearer <JWT>"
    carries_scopes: bool  # whether a requirement may list scopes for it

    def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal | None: ...


def bearer_credential(metadata: Metadata) -> str | None:
    """The token of the call's first `authorization: Bearer <token>` header; None without one."""
    for name, value in metadata:
        if name == "authorization":
            scheme, _, token = str(value).partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None
