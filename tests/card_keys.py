"""Keys and signatures for the card-signing tests: real keys made here (cryptography), written as PEM files, and
signatures made by hand for the cases a server never makes (HMAC, alg none, a crit header, another key)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from google.protobuf import json_format
from jwt import api_jws

from a2a_grpc.card.canonical import rfc8785_bytes
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.signing_keys import PrivateKey, SigningKey

KEY_MAKERS = {
    "ec": lambda: ec.generate_private_key(ec.SECP256R1()),
    "rsa": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "ed25519": ed25519.Ed25519PrivateKey.generate,
}
ALGORITHMS = {"ec": "ES256", "rsa": "RS256", "ed25519": "EdDSA"}


def write_key(path: Path, key: Any) -> str:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    return str(path)


def make_key_files(folder: Path, *names: str) -> dict[str, str]:
    """A PEM file per name; a name's kind is its text before any `-` (`ec-next` is an EC key)."""
    return {name: write_key(folder / f"{name}.pem", KEY_MAKERS[name.split("-")[0]]()) for name in names}


def signing_key(path: str) -> SigningKey:
    private = serialization.load_pem_private_key(Path(path).read_bytes(), None)
    assert isinstance(private, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey)
    return SigningKey.of(private)


def write_jwks(path: Path, *key_files: str) -> str:
    path.write_text(json.dumps({"keys": [dict(signing_key(file).public_jwk) for file in key_files]}))
    return str(path)


def parse_served(document: dict[str, Any]) -> a2a_pb2.AgentCard:
    """A served card document as our client parses it (the 0.3 keys merged in are not 1.0 fields)."""
    return json_format.ParseDict(document, a2a_pb2.AgentCard(), ignore_unknown_fields=True)


def protected_header(signature: a2a_pb2.AgentCardSignature) -> dict[str, Any]:
    padded = signature.protected + "=" * (-len(signature.protected) % 4)
    header: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return header


def signed_by_hand(card: a2a_pb2.AgentCard, key: PrivateKey | bytes | str, header: dict[str, Any]) -> a2a_pb2.AgentCard:
    """A copy of `card` whose only signature is a JWS made with `key` under `header` (its `alg` included)."""
    unsigned = a2a_pb2.AgentCard()
    unsigned.CopyFrom(card)
    del unsigned.signatures[:]
    token = api_jws.encode(rfc8785_bytes(unsigned), key, algorithm=header["alg"], headers=header)
    protected, _, signature = token.split(".")
    unsigned.signatures.add(protected=protected, signature=signature)
    return unsigned
