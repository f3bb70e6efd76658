"""Authentication driven by the agent card: the schemes its `securitySchemes` declare, enforced as its
`securityRequirements` say.

One module per kind of credential, each a `Scheme` (`authenticate(metadata, peer) -> Principal | None`,
raising CredentialRejected for a credential presented but not valid):
  bearer     static bearer tokens (--auth-token)
  api_keys   API keys in a request header (--api-keys FILE or env:NAME), kept hashed
  tokens     JWT access tokens (HTTP bearer JWT, OAuth 2.0, OpenID Connect), keys from jwks
  mtls       the client certificate the TLS listener verified
`requirements.CardAuthenticator` evaluates the requirements for each call; `card_security` makes the card
declare what the server enforces and refuses, at start-up, a card the server cannot enforce.
"""

from a2a_grpc.auth.card_security import card_authenticator, declare_configured, secure_cards
from a2a_grpc.auth.principal import (
    ANONYMOUS,
    CredentialRejected,
    KeysUnknown,
    PeerAuthContext,
    Principal,
    Scheme,
)
from a2a_grpc.auth.requirements import CardAuthenticator
from a2a_grpc.auth.settings import AuthSettings, JwtSettings, Verifiers
from a2a_grpc.call import NO_CLAIMS

__all__ = [
    "ANONYMOUS",
    "NO_CLAIMS",
    "AuthSettings",
    "CardAuthenticator",
    "CredentialRejected",
    "JwtSettings",
    "KeysUnknown",
    "PeerAuthContext",
    "Principal",
    "Scheme",
    "Verifiers",
    "card_authenticator",
    "declare_configured",
    "secure_cards",
]
