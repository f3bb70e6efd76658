"""A throwaway PKI for tests: a CA, server certificates for 127.0.0.1 and localhost, client certificates.

pki = Pki(tmp_path)
server = pki.server("server-a")        # files: server.cert, server.key (PEM)
client = pki.client("alice")           # a client certificate, its SAN a SPIFFE id
pki.ca_file                            # the CA certificate (PEM), to trust or to require clients by
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bench.credentials import issue, new_ca

VALID = datetime.timedelta(days=1)
TLS_SECONDS = 10.0


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, and the files they are written to."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey
    cert: Path
    key: Path

    @property
    def serial(self) -> int:
        return self.certificate.serial_number

    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def key_lines(self) -> list[str]:
        """The base64 lines of the key's PEM: none of them may ever appear in a log."""
        return [line for line in self.key_pem().decode().splitlines() if line and not line.startswith("-----")]


class Pki:
    """A CA writing its certificate and the ones it issues under `directory`."""

    def __init__(self, directory: Path, name: str = "test CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.certificate, self._key = new_ca(name)
        self.ca_file = directory / f"{name.replace(' ', '-')}.crt"
        self.ca_file.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def server(self, name: str) -> Issued:
        """A server certificate for 127.0.0.1 and localhost."""
        sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        return self._issue(name, sans, ExtendedKeyUsageOID.SERVER_AUTH)

    def client(self, name: str) -> Issued:
        """A client certificate: CN `name`, SAN spiffe://test.example/`name`."""
        sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(f"spiffe://test.example/{name}")]
        return self._issue(name, sans, ExtendedKeyUsageOID.CLIENT_AUTH)

    def _issue(self, name: str, sans: list[x509.GeneralName], usage: x509.ObjectIdentifier) -> Issued:
        certificate, key = issue(self.certificate, self._key, _name(name), sans, usage)
        issued = Issued(certificate, key, self.directory / f"{name}.crt", self.directory / f"{name}.key")
        issued.cert.write_bytes(issued.cert_pem())
        issued.key.write_bytes(issued.key_pem())
        return issued


def install(issued: Issued, cert: Path, key: Path) -> None:
    """Put `issued` in place of the files `cert` and `key`, each replaced at once (write, then rename)."""
    for source, target in ((issued.cert_pem(), cert), (issued.key_pem(), key)):
        staged = target.with_name(target.name + ".new")
        staged.write_bytes(source)
        staged.replace(target)


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS
HTTP_REQUEST = b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def served_certificate(
    port: int, ca_file: Path, client: Issued | None = None, alpn: tuple[str, ...] = ()
) -> x509.Certificate:
    """The certificate a new TLS connection to 127.0.0.1:`port` is served (verified against `ca_file`), once
    the server answered a first request on it (HTTP/2's preface with `alpn` h2, else an HTTP/1.1 GET): a
    refused client certificate, which TLS 1.3 tells after the handshake, is an OSError here.
    Blocking: call it from a thread when the server runs on the caller's event loop."""
    context = ssl.create_default_context(cafile=ca_file)
    if alpn:
        context.set_alpn_protocols(list(alpn))
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=TLS_SECONDS) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        tls.sendall(H2_PREFACE if "h2" in alpn else HTTP_REQUEST)
        if not tls.recv(1):
            raise ConnectionResetError(f"127.0.0.1:{port} closed the connection without an answer")
    assert der is not None
    return x509.load_der_x509_certificate(der)
