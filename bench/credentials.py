"""Throwaway credentials for the auth.* cases, made when the bench runs, in its scratch directory (and the CA
and certificates the tests make: `new_ca`, `issue`).

A JWT signing key, its public half in a PEM file for `--jwt-key`, and one token it signed (valid for a day:
every call of the run carries it, so the server verifies it once and then finds it in its cache). A CA and
a server certificate it issued for 127.0.0.1 and localhost, for `--tls-cert` and `--tls-key`; the load
generator trusts that CA alone.
"""

from __future__ import annotations

import datetime
import ipaddress
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ISSUER = "https://issuer.bench.invalid"
AUDIENCE = "a2a-bench"
SUBJECT = "bench-load"
VALID = datetime.timedelta(days=1)
JWT_ALGORITHM = "ES256"


@dataclass(frozen=True)
class Credentials:
    jwt_key: Path  # PEM public key verifying `token`
    token: str
    tls_cert: Path
    tls_key: Path
    ca_pem: bytes  # the CA that issued `tls_cert`

    @classmethod
    def create(cls, directory: Path) -> Credentials:
        directory.mkdir(parents=True, exist_ok=True)
        signing = ec.generate_private_key(ec.SECP256R1())
        jwt_key = directory / "jwt-public.pem"
        jwt_key.write_bytes(
            signing.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        ca, ca_key = new_ca("a2a bench CA")
        server_names: list[x509.GeneralName] = [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.DNSName("localhost"),
        ]
        server_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "a2a bench server")])
        server, server_key = issue(ca, ca_key, server_subject, server_names, ExtendedKeyUsageOID.SERVER_AUTH)
        tls_cert, tls_key = directory / "server.crt", directory / "server.key"
        tls_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        tls_key.write_bytes(
            server_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cls(jwt_key, _token(signing), tls_cert, tls_key, ca.public_bytes(serialization.Encoding.PEM))


def _token(signing: ec.EllipticCurvePrivateKey) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": SUBJECT, "iat": now, "exp": now + int(VALID.total_seconds())}
    return jwt.encode(claims, signing, algorithm=JWT_ALGORITHM)


def new_ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed P-256 CA certificate named `name`, valid for a day, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    certificate = (
        _builder(subject, subject, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def issue(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    names: Sequence[x509.GeneralName],
    usage: x509.ObjectIdentifier,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A P-256 leaf certificate `ca` signs for `subject`, its subject alternative `names` (none: no such
    extension) and extended key `usage`, valid for a day; and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
    )
