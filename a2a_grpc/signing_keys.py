"""The server's private signing keys (push notifications, agent cards): read from PEM files, named by their
RFC 7638 thumbprint (`kid`), and published together as one JWKS at `/.well-known/jwks.json`.

A key's algorithm follows from its type: RSA (2048 bits or more) signs RS256, EC P-256 ES256, Ed25519 EdDSA.
A private key never leaves its `SigningKey`: its repr, the JWK and every error name the file or the kid only.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

MIN_RSA_BITS = 2048
# RFC 7638 §3.2 (and RFC 8037 §2 for OKP): the members of a thumbprint, by key type
_THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x")}

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True)
class SigningKey:
    """A private key, the JWS algorithm it signs with, and its public half as a JWK named by its thumbprint."""

    private_key: PrivateKey = field(repr=False)
    algorithm: str
    kid: str
    public_jwk: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, private_key: PrivateKey) -> SigningKey:
        """ValueError for an RSA key under 2048 bits or an EC key off P-256."""
        public: dict[str, Any]
        if isinstance(private_key, rsa.RSAPrivateKey):
            if private_key.key_size < MIN_RSA_BITS:
                raise ValueError(f"an RSA signing key needs at least {MIN_RSA_BITS} bits")
            algorithm, public = "RS256", RSAAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            if not isinstance(private_key.curve, ec.SECP256R1):
                raise ValueError("an EC signing key must be on the P-256 curve")
            algorithm, public = "ES256", ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        else:
            algorithm, public = "EdDSA", OKPAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
        kid = jwk_thumbprint(public)
        return cls(private_key, algorithm, kid, {**public, "kid": kid, "alg": algorithm, "use": "sig"})


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public RSA, EC or OKP JWK."""
    members = _THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def load_signing_keys(paths: Sequence[str], setting: str) -> list[SigningKey]:
    """The unencrypted PEM private keys at `paths`; ValueError naming `setting` and the file when one cannot
    be used."""
    keys = []
    for path in paths:
        try:
            keys.append(SigningKey.of(_load_pem(path)))
        except ValueError as error:
            raise ValueError(f"{setting} {path}: {error}") from None
    return keys


def _load_pem(path: str) -> PrivateKey:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"cannot read it: {error.strerror}") from None
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError:  # cryptography's word for an encrypted key given no password
        raise ValueError("an encrypted private key: give it unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError("not a PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise ValueError("not an RSA, EC P-256 or Ed25519 private key")
    return key


def jwks_document(keys: Iterable[SigningKey]) -> dict[str, Any]:
    """The public keys as one JWKS document, each kid once (a key may sign both cards and notifications)."""
    published = {key.kid: dict(key.public_jwk) for key in keys}
    return {"keys": list(published.values())}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
