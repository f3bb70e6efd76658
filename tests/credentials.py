"""Real credentials made by a test: a CA and the certificates it issues, JWT signing keys and the tokens they
sign, and a JWKS (with the OpenID Connect discovery document that names it) served over HTTPS on 127.0.0.1
with a certificate of that CA."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bench.credentials import issue, new_ca

ISSUER = "https://issuer.test"
AUDIENCE = "a2a-grpc-tests"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def pem_key(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def pem_public(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Issued:
    cert: x509.Certificate
    key: PrivateKey

    def write(self, directory: Path, name: str) -> tuple[str, str]:
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(pem_cert(self.cert))
        key_path.write_bytes(pem_key(self.key))
        return str(cert_path), str(key_path)


class CA:
    """A self-signed certificate authority that issues server and client certificates."""

    def __init__(self, name: str = "a2a-grpc test CA") -> None:
        self.cert, self.key = new_ca(name)

    @property
    def pem(self) -> bytes:
        return pem_cert(self.cert)

    def write(self, path: Path) -> str:
        path.write_bytes(self.pem)
        return str(path)

    def issue(
        self,
        common_name: str | None,
        *,
        dns: Iterable[str] = (),
        ips: Iterable[str] = (),
        uris: Iterable[str] = (),
        server: bool = False,
    ) -> Issued:
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "a2a-grpc tests")]
        if common_name is not None:
            names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        alternatives: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
        alternatives += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        alternatives += [x509.UniformResourceIdentifier(uri) for uri in uris]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        return Issued(*issue(self.cert, self.key, x509.Name(names), alternatives, usage))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def standard_claims(subject: str, **claims: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + 300, **claims}


@dataclass
class SigningKey:
    kid: str
    key: PrivateKey
    algorithm: str

    def jwk(self) -> dict[str, Any]:
        key = self.key
        if isinstance(key, rsa.RSAPrivateKey):
            public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())
        else:
            public = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())
        jwk: dict[str, Any] = json.loads(public)
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def sign(self, claims: dict[str, Any], *, kid: str | None = None) -> str:
        return jwt.encode(claims, self.key, algorithm=self.algorithm, headers={"kid": kid or self.kid})


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")


def unsigned_token(claims: dict[str, Any], kid: str) -> str:
    """`alg: none`: no signature at all."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}."


def hs256_with_public_key(claims: dict[str, Any], signing: SigningKey) -> str:
    """Key confusion: HS256 "signed" with the issuer's public key, which a verifier that lets the token pick
    its algorithm would take as the HMAC secret."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": signing.kid}).encode())
    signing_input = f"{header}.{b64url(json.dumps(claims).encode())}"
    secret = pem_public(signing.key)
    return f"{signing_input}.{b64url(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


@dataclass
class JwksServer:
    url: str
    document: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    fetches: list[float] = field(default_factory=list)
    fetched: asyncio.Event = field(default_factory=asyncio.Event)  # set at each fetch
    discovery_url: str = ""
    metadata_url: str = ""  # the same document as RFC 8414 OAuth 2.0 authorization server metadata
    discovery: dict[str, Any] = field(default_factory=dict)  # issuer ISSUER, jwks_uri `url`
    discovery_fetches: int = 0
    raw: bytes | None = None  # served instead of `document` when set: what json cannot make (a 30,000-deep array)

    def publish(self, *keys: SigningKey) -> None:
        self.raw = None
        self.document["keys"] = [key.jwk() for key in keys]


@asynccontextmanager
async def serve_jwks(ca: CA, *keys: SigningKey) -> AsyncIterator[JwksServer]:
    """A JWKS over HTTPS on 127.0.0.1, with a certificate `ca` issued (clients must trust `ca`), and the OpenID
    Connect discovery document of its issuer, ISSUER, at `discovery_url` (and as OAuth 2.0 authorization server
    metadata at `metadata_url`)."""
    issued = ca.issue("127.0.0.1", ips=["127.0.0.1"], server=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as directory:  # ssl loads a chain from files only
        context.load_cert_chain(*issued.write(Path(directory), "jwks"))
    server = JwksServer(url="")

    async def jwks(request: web.Request) -> web.Response:
        server.fetches.append(time.monotonic())
        server.fetched.set()
        if server.raw is not None:
            return web.Response(body=server.raw, content_type="application/json")
        return web.json_response(server.document)

    async def discovery(request: web.Request) -> web.Response:
        server.discovery_fetches += 1
        return web.json_response(server.discovery)

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", jwks)
    app.router.add_get("/.well-known/openid-configuration", discovery)
    app.router.add_get("/.well-known/oauth-authorization-server", discovery)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    origin = f"https://127.0.0.1:{runner.addresses[0][1]}"
    server.url, server.discovery_url = f"{origin}/.well-known/jwks.json", f"{origin}/.well-known/openid-configuration"
    server.metadata_url = f"{origin}/.well-known/oauth-authorization-server"
    server.discovery = {"issuer": ISSUER, "jwks_uri": server.url, "id_token_signing_alg_values_supported": ["RS256"]}
    server.publish(*keys)
    try:
        yield server
    finally:
        await runner.cleanup()
