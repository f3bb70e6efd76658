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

import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from a2a_grpc.signing_keys import SigningKey, b64url, jwks_document, load_signing_keys

TOKEN_LIFETIME_SECONDS = 300

PushKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey  # what receivers verify (RS256, ES256)


class PushSigner:
    """Signs notifications with the first of `keys`; publishes all of them."""

    def __init__(self, keys: Sequence[PushKey], issuer: str, *, clock: Callable[[], float] = time.time) -> None:
        if not keys:
            raise ValueError("a push signer needs at least one key")
        if not all(isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) for key in keys):
            raise ValueError("a push signing key must be RSA or EC P-256")
        self.keys = tuple(SigningKey.of(key) for key in keys)
        self._issuer = issuer
        self._clock = clock

    @classmethod
    def from_pem_files(cls, paths: Sequence[str], issuer: str) -> PushSigner:
        """Unencrypted PEM private keys, RSA (2048 bits or more) or EC P-256; the first signs."""
        return cls(load_pem_keys(paths), issuer)

    @property
    def kid(self) -> str:
        """The key id of the signing key."""
        return self.keys[0].kid

    def sign(self, url: str, task_id: str, body: bytes) -> str:
        key = self.keys[0]
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
        return jwks_document(self.keys)


def body_sha256(body: bytes) -> str:
    return b64url(hashlib.sha256(body).digest())


def load_pem_keys(paths: Sequence[str]) -> list[PushKey]:
    """Unencrypted PEM private keys, RSA (2048 bits or more) or EC P-256 (ValueError naming the file)."""
    keys: list[PushKey] = []
    for path, key in zip(paths, load_signing_keys(paths, "--push-signing-key"), strict=True):
        if not isinstance(key.private_key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError(f"--push-signing-key {path}: not an RSA or EC P-256 private key")
        keys.append(key.private_key)
    return keys
