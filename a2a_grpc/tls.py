"""TLS and mutual TLS: the server's two ports (`ServerTLS`), and the client's channel and card fetch (`ClientTLS`).

The server reads its certificate chain, its key and the client CA from files, and reads them again on
`reload()` (SIGHUP): new handshakes on both ports get the new files, connections already open keep theirs.
The gRPC port takes them through grpc's dynamic credentials, whose callback grpc runs at each new handshake;
the HTTP port through an SSL context whose SNI callback (run on every ClientHello) hands the handshake the
current context. Files that cannot be used are refused as a whole: at start-up a TLSError, at a reload a
WARNING and the files in use stay. No log line or error carries the content of a file.

With a client CA, grpc puts the verified client certificate of each call in `context.auth_context()`:
`x509_common_name`, `x509_subject`, `x509_subject_alternative_name`, `x509_pem_cert` (what the mutual TLS
scheme of a2a_grpc.auth reads); without one, no client certificate is asked for and those are absent.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

log = logging.getLogger(__name__)

GRPC_ROOTS_ENV = "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"  # grpc's own default roots, which win over SSL_CERT_FILE
OPENSSL_CAFILE_ENV = "SSL_CERT_FILE"


class TLSError(ValueError):
    """A TLS setting or file that cannot be used; the message names the file, never its content."""


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise TLSError(f"cannot read the {what} {path}: {error.strerror or error}") from None


def _no_password() -> bytes:
    """The password callback of ssl: an encrypted key is refused, never prompted for on the terminal."""
    raise TLSError("the TLS key is encrypted; give it unencrypted")


def _certificates(pem: bytes, path: str | Path, what: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise TLSError(f"the {what} {path} holds no PEM certificate") from None


def _check_key(pem: bytes, path: str | Path, leaf: x509.Certificate, cert_path: str | Path) -> None:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:  # encrypted: grpc cannot use it, and ssl would prompt for a password
        raise TLSError(f"the TLS key {path} is encrypted; give it unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise TLSError(f"the TLS key {path} holds no PEM private key") from None
    if _spki(key.public_key()) != _spki(leaf.public_key()):
        raise TLSError(f"the TLS key {path} is not the key of the certificate {cert_path}")


def _spki(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def describe(certificate: x509.Certificate) -> str:
    """Public facts of a certificate for a log line: subject, serial, expiry."""
    subject = certificate.subject.rfc4514_string() or "(no subject)"
    expires = certificate.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{subject}, serial {certificate.serial_number:x}, valid until {expires}"


@dataclass(frozen=True)
class ServerFiles:
    """The server's TLS files: certificate chain (leaf first) and key, PEM; with `client_ca`, client
    certificates signed by one of its CAs are required on both ports (mutual TLS)."""

    cert: str
    key: str
    client_ca: str | None = None

    @classmethod
    def from_settings(cls, cert: str | None, key: str | None, client_ca: str | None) -> ServerFiles | None:
        """The files of --tls-cert, --tls-key and --tls-client-ca; None for plaintext; TLSError for a partial set."""
        if not cert and not key:
            if client_ca:
                raise TLSError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")
            return None
        if not cert or not key:
            raise TLSError("--tls-cert and --tls-key go together: give both, or neither for plaintext")
        return cls(cert, key, client_ca or None)


@dataclass(frozen=True)
class _Loaded:
    """One consistent reading of the files: the bytes grpc takes, and the HTTP port's context."""

    chain: bytes
    key: bytes
    client_ca: bytes | None
    context: ssl.SSLContext
    summary: str

    def grpc_configuration(self) -> Any:
        return grpc.ssl_server_certificate_configuration([(self.key, self.chain)], root_certificates=self.client_ca)


def _load(files: ServerFiles) -> _Loaded:
    """Read and check `files`; TLSError saying what is wrong with which."""
    chain = _read(files.cert, "TLS certificate")
    key = _read(files.key, "TLS key")
    leaf = _certificates(chain, files.cert, "TLS certificate")[0]
    _check_key(key, files.key, leaf, files.cert)
    client_ca = None
    if files.client_ca:
        client_ca = _read(files.client_ca, "client CA file")
        _certificates(client_ca, files.client_ca, "client CA file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(files.cert, files.key, password=_no_password)
        if client_ca is not None:
            context.load_verify_locations(cadata=client_ca.decode("ascii", errors="replace"))
            context.verify_mode = ssl.CERT_REQUIRED
    except ssl.SSLError as error:  # the checks above passed, so the files changed under us or OpenSSL disagrees
        raise TLSError(f"cannot use the TLS files {files.cert}, {files.key}: {error.reason or error}") from None
    return _Loaded(chain, key, client_ca, context, describe(leaf))


class ServerTLS:
    """The server's certificates, for the gRPC port (`grpc_credentials`) and the HTTP port (`ssl_context`)."""

    def __init__(self, files: ServerFiles) -> None:
        self.files = files
        self._current = _load(files)
        self._pending: Any = None  # a grpc configuration not yet handed to grpc
        self._lock = threading.Lock()  # grpc calls _fetch from a thread of its own

    @property
    def client_certificates_required(self) -> bool:
        return self.files.client_ca is not None

    @property
    def summary(self) -> str:
        return self._current.summary

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._current.grpc_configuration(),
            self._fetch,
            require_client_authentication=self.client_certificates_required,
        )

    def _fetch(self) -> Any:
        """grpc's callback at each new handshake: a new configuration once after a reload, else None (keep)."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def ssl_context(self) -> ssl.SSLContext:
        """The HTTP port's context: each handshake is handed the context of the files loaded last."""
        listener = self._current.context

        def current(connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext) -> None:
            connection.context = self._current.context

        listener.sni_callback = current
        return listener

    def reload(self) -> bool:
        """Read the files again: new handshakes use them. Files that cannot be used leave the old ones in use."""
        try:
            loaded = _load(self.files)
        except TLSError as error:
            log.warning("TLS certificates not reloaded, the ones loaded before stay in use: %s", error)
            return False
        with self._lock:
            self._current = loaded
            self._pending = loaded.grpc_configuration()
        client = f"; client CA {self.files.client_ca}" if self.files.client_ca else ""
        log.info("TLS certificates reloaded from %s: %s%s", self.files.cert, loaded.summary, client)
        return True


@dataclass(frozen=True)
class ClientTLS:
    """The client side: `ca` (PEM CAs to trust), and `cert` with `key` to present a client certificate.

    The gRPC channel trusts `ca` alone when given, else SSL_CERT_FILE when set (unless grpc's own
    GRPC_DEFAULT_SSL_ROOTS_FILE_PATH is), else grpc's default roots. An https:// card URL is fetched
    trusting the system's store (which honours SSL_CERT_FILE and SSL_CERT_DIR, as OpenSSL does) plus `ca`.
    """

    ca: str | Path | None = None
    cert: str | Path | None = None
    key: str | Path | None = None

    def __post_init__(self) -> None:
        if bool(self.cert) != bool(self.key):
            raise TLSError("a client certificate needs its key: give --tls-cert and --tls-key together")

    def channel_credentials(self) -> grpc.ChannelCredentials:
        roots = _read(self.ca, "CA file") if self.ca else _openssl_roots()
        key = _read(self.key, "TLS key") if self.key else None
        chain = _read(self.cert, "TLS certificate") if self.cert else None
        return grpc.ssl_channel_credentials(roots, key, chain)

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        try:
            if self.ca:
                context.load_verify_locations(cafile=self.ca)
            if self.cert and self.key:
                context.load_cert_chain(self.cert, self.key, password=_no_password)
        except OSError as error:  # ssl.SSLError among them
            files = ", ".join(str(path) for path in (self.ca, self.cert, self.key) if path)
            reason = error.reason if isinstance(error, ssl.SSLError) else error.strerror
            raise TLSError(f"cannot use the TLS files {files}: {reason or error}") from None
        return context


def _openssl_roots() -> bytes | None:
    """The CAs of SSL_CERT_FILE when it is set and grpc's own variable is not; None: grpc's defaults."""
    path = os.environ.get(OPENSSL_CAFILE_ENV)
    if not path or os.environ.get(GRPC_ROOTS_ENV):
        return None
    return _read(path, f"CA file of {OPENSSL_CAFILE_ENV}")
