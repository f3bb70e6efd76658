"""Signed push notifications: a JWT per notification, and the JWKS that verifies it.

The JWT (RS256 or ES256, `kid` in its header: the key's RFC 7638 JWK thumbprint) carries:

- `iss`: the agent (the issuer this signer was made with)
- `aud`: the webhook URL, exactly as in the push config
- `iat`, `exp` (`iat` + 300 s), `jti` (random, for replay detection)
- `taskId`: the task the notification is about
- `body_sha256`: base64url (no padding) of the SHA-256 of the request body

The first key signs; all keys are published by `jwks()`, so a new key can be put first while
receivers still verify notifications signed with the previous one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

TOKEN_LIFETIME_SECONDS = 300
MIN_RSA_BITS = 2048
# RFC 7638 §3.2: the members of a thumbprint, by key type
_THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y")}

SigningKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class _Key:
    def __init__(self, private_key: SigningKey) -> None:
        self.private_key = private_key
        if isinstance(private_key, rsa.RSAPrivateKey):
            if private_key.key_size < MIN_RSA_BITS:
                raise ValueError(f"an RSA signing key needs at least {MIN_RSA_BITS} bits")
            self.algorithm = "RS256"
            public: dict[str, Any] = RSAAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        else:
            if not isinstance(private_key.curve, ec.SECP256R1):
                raise ValueError("an EC signing key must be on the P-256 curve")
            self.algorithm = "ES256"
            public = ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        self.kid = jwk_thumbprint(public)
        self.public_jwk = {**public, "kid": self.kid, "alg": self.algorithm, "use": "sig"}


class PushSigner:
    """Signs notifications with the first of `keys`; publishes all of them."""

    def __init__(self, keys: Sequence[SigningKey], issuer: str, *, clock: Callable[[], float] = time.time) -> None:
        if not keys:
            raise ValueError("a push signer needs at least one key")
        self._keys = [_Key(key) for key in keys]
        self._issuer = issuer
        self._clock = clock

    @classmethod
    def from_pem_files(cls, paths: Sequence[str], issuer: str) -> PushSigner:
        """Unencrypted PEM private keys, RSA (2048 bits or more) or EC P-256; the first signs."""
        return cls(load_pem_keys(paths), issuer)

    @property
    def kid(self) -> str:
        """The key id of the signing key."""
        return self._keys[0].kid

    def sign(self, url: str, task_id: str, body: bytes) -> str:
        key = self._keys[0]
        now = int(self._clock())
        claims = {
            "iss": self._issuer,
            "aud": url,
            "iat": now,
            "exp": now + TOKEN_LIFETIME_SECONDS,
            "jti": secrets.token_urlsafe(16),
            "taskId": task_id,
            "body_sha256": body_sha256(body),
        }
        return jwt.encode(claims, key.private_key, algorithm=key.algorithm, headers={"kid": key.kid})

    def jwks(self) -> dict[str, Any]:
        """The public keys as a JWKS document (for `/.well-known/jwks.json`)."""
        return {"keys": [dict(key.public_jwk) for key in self._keys]}


def body_sha256(body: bytes) -> str:
    return _b64url(hashlib.sha256(body).digest())


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public RSA or EC JWK."""
    members = _THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def load_pem_keys(paths: Sequence[str]) -> list[SigningKey]:
    """Unencrypted PEM private keys, RSA (2048 bits or more) or EC P-256."""
    return [_load_pem(path) for path in paths]


def _load_pem(path: str) -> SigningKey:
    key = load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: not an RSA or EC private key")
    return key


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
