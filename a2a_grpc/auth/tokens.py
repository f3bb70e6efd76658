"""JWT access tokens (`authorization: Bearer <JWT>`): the card's HTTP bearer scheme with bearerFormat JWT, and
its OAuth 2.0 and OpenID Connect schemes, verified with PyJWT against a JWKS URL or a static key file.

A token is accepted when its signature verifies with a key of the key set (by its `kid`), with an algorithm
that key admits (a2a_grpc.auth.jwks), its `iss` is one of the configured issuers (else the one an OpenID
Connect discovery document names), its `aud` names one of the configured audiences, `exp` (required) and
`nbf` hold within the clock-skew leeway, and it has a `sub`, which becomes the principal. The scopes it
grants are its `scope` claim (space-separated) and its `scp` claim (a list, or space-separated).

Verifying costs a signature check (tens of microseconds), so an accepted token is remembered until it
expires, in a bounded LRU map: a repeated token costs a dictionary lookup. Whatever was remembered is
verified afresh once the key set withdraws or replaces a key.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import jwt

from a2a_grpc.auth.jwks import KeySet
from a2a_grpc.auth.principal import CredentialRejected, PeerAuthContext, Principal, bearer_credential
from a2a_grpc.errors import Metadata
from a2a_grpc.settings.defaults import JWT_LEEWAY_SECONDS

DEFAULT_LEEWAY_SECONDS = JWT_LEEWAY_SECONDS
DEFAULT_CACHE_SIZE = 4096
MAX_TOKEN_CHARS = 16 * 1024  # a longer bearer token is refused unread
MAX_HEADER_CHARS = 2048  # likewise a longer JOSE header
MAX_REMEMBER_SECONDS = 24 * 3600.0
_REQUIRED = ["exp", "iss", "aud", "sub"]


def granted_scopes(claims: dict[str, Any]) -> frozenset[str]:
    scopes: set[str] = set()
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(item for item in value if isinstance(item, str))
    return frozenset(scopes)


def _header(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWS, to pick its key: PyJWT's own reader checks every character of the
    whole token first, which costs as much again as the rest of the verification (decode checks it anyway)."""
    segments = token.split(".")
    if len(segments) != 3 or len(segments[0]) > MAX_HEADER_CHARS:
        raise CredentialRejected("not a JWT")
    try:
        header = json.loads(base64.urlsafe_b64decode(segments[0] + "=" * (-len(segments[0]) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested past the stack
        raise CredentialRejected("not a JWT") from None
    if not isinstance(header, dict):
        raise CredentialRejected("not a JWT")
    return header


class JwtVerifier:
    """Checks one token against the key set and the claims the server requires; knows nothing of caching."""

    def __init__(
        self,
        keys: KeySet,
        *,
        issuers: Sequence[str],
        audiences: Sequence[str],
        leeway_seconds: float = DEFAULT_LEEWAY_SECONDS,
    ) -> None:
        if not audiences:
            raise ValueError("JWT verification needs an audience (--jwt-audience)")
        self.keys = keys
        self.leeway = leeway_seconds
        # The iss a token must carry: none (every token refused) until an OpenID provider's discovery sets it.
        self.issuers = tuple(issuers)
        self._audiences = list(audiences)

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; CredentialRejected (or KeysUnknown, from the key set) when it does not verify,
        whatever it holds: a token too long, JSON nested past the interpreter's stack, numbers out of range."""
        if len(token) > MAX_TOKEN_CHARS:
            raise CredentialRejected("JWT too long")
        header = _header(token)
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(kid, str | None) or not isinstance(algorithm, str):
            raise CredentialRejected("malformed JWT header")
        key = self.keys.key(kid)
        if algorithm not in key.algorithms:  # `none`, HS256 with the public key, or another key type's algorithm
            raise CredentialRejected("algorithm not allowed for the key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self._audiences,
                issuer=self.issuers,
                leeway=self.leeway,
                options={"require": _REQUIRED},
            )
        except (jwt.PyJWTError, RecursionError, ArithmeticError, ValueError, TypeError) as error:
            raise CredentialRejected(f"JWT refused: {type(error).__name__}") from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise CredentialRejected("JWT without a subject")
        return claims

    def remember_until(self, claims: dict[str, Any]) -> float:
        """The time.time() until which an accepted token may be taken without verifying it again: its expiry
        (plus the leeway), at most MAX_REMEMBER_SECONDS from now."""
        try:
            until = float(claims["exp"]) + self.leeway
        except OverflowError:  # an integer past any float: as good as never
            until = math.inf
        return min(until, time.time() + MAX_REMEMBER_SECONDS)


class JwtScheme:
    kind = "authorization: Bearer <JWT>"
    carries_scopes = True

    def __init__(self, name: str, verifier: JwtVerifier, *, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.name = name
        self._verifier = verifier
        self._keys = verifier.keys
        self._cache_size = cache_size
        # token -> (principal, the time.time() it expires at, the key set's generation it was verified in)
        self._accepted: OrderedDict[str, tuple[Principal, float, int]] = OrderedDict()

    def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal | None:
        token = bearer_credential(metadata)
        if token is None:
            return None
        accepted = self._accepted
        remembered = accepted.get(token)
        if remembered is not None:
            principal, expires, generation = remembered
            if time.time() < expires and generation == self._keys.generation:
                accepted.move_to_end(token)
                return principal
            del accepted[token]
        generation = self._keys.generation
        claims = self._verifier.verify(token)
        principal = Principal(claims["sub"], self.name, MappingProxyType(claims), granted_scopes(claims))
        accepted[token] = (principal, self._verifier.remember_until(claims), generation)
        if len(accepted) > self._cache_size:
            accepted.popitem(last=False)
        return principal
