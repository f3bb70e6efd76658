"""Mutual TLS (the card's `mtlsSecurityScheme`): the client certificate the TLS listener verified against
its client CA names the caller.

The principal is the certificate's subject common name, else its first subject alternative name (DNS, URI
such as a SPIFFE ID, email or IP, as grpc lists them). The claims carry the subject, the common name and
every alternative name. The certificate was verified during the handshake: a listener that asks for no
client certificate puts none in the peer's auth context, and the scheme then finds no credential.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from a2a_grpc.auth.principal import AuthContext, PeerAuthContext, Principal
from a2a_grpc.errors import Metadata

# grpc's auth context properties for a verified client certificate
COMMON_NAME = "x509_common_name"
SUBJECT = "x509_subject"
ALTERNATIVE_NAMES = "x509_subject_alternative_name"


def _texts(values: Sequence[bytes] | None) -> list[str]:
    return [value.decode("utf-8", "replace") for value in values or ()]


class MutualTlsScheme:
    kind = "a client certificate (TLS)"
    carries_scopes = False

    def __init__(self, name: str) -> None:
        self.name = name

    def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal | None:
        return principal_of(peer(), self.name)


def principal_of(auth_context: AuthContext, scheme: str) -> Principal | None:
    """The principal a verified client certificate names; None when the peer presented none."""
    common_names = _texts(auth_context.get(COMMON_NAME))
    alternative_names = _texts(auth_context.get(ALTERNATIVE_NAMES))
    name = next((n for n in (*common_names, *alternative_names) if n), "")
    if not name:
        return None
    claims = {
        "subject": next(iter(_texts(auth_context.get(SUBJECT))), ""),
        "common_name": common_names[0] if common_names else "",
        "subject_alternative_names": tuple(alternative_names),
    }
    return Principal(name, scheme, MappingProxyType(claims))
