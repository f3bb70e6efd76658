"""Static bearer tokens (`--auth-token TOKEN=PRINCIPAL`): the simplest scheme, an HTTP bearer scheme of the
card whose bearerFormat is not JWT. Tokens are kept and looked up as digests, as API keys are."""

from __future__ import annotations

from collections.abc import Mapping

from a2a_grpc.auth.api_keys import HashedSecrets
from a2a_grpc.auth.principal import CredentialRejected, PeerAuthContext, Principal, bearer_credential
from a2a_grpc.errors import Metadata


class StaticBearerScheme:
    kind = "authorization: Bearer <token>"
    carries_scopes = False

    def __init__(self, name: str, principals_by_token: Mapping[str, str]) -> None:
        self.name = name
        self._tokens = HashedSecrets.of_plain(principals_by_token)
        self._principals = self._tokens.principals(name)

    def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal | None:
        token = bearer_credential(metadata)
        if token is None:
            return None
        principal = self._tokens.principal(token)
        if principal is None:
            raise CredentialRejected("unknown bearer token")
        return self._principals[principal]
