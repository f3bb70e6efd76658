"""The next step the command-line client names after an error it recognises: the flag that fixes it.

A refused call missing a required extension names `--extension URI` (the server's message names the header, for
callers on stubs). A transport failure that reads like a TLS mistake names the TLS setting to change: a plaintext
client closed on by a TLS port, a TLS client without a certificate closed on by a port that requires one, a TLS
client on a plaintext port, a server certificate the client does not trust. Each hint is one bounded clause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import grpc

from a2a_grpc.errors import A2AError, ExtensionSupportRequiredError

_MISSING: Final = "missingExtensions"  # the ErrorInfo metadata key that names them
_HEADER_HINT: Final = re.compile(r"; send them in the '[^']*' header$")
_SHOWN_URIS: Final = 4  # --extension flags spelled out; more are counted

_CLOSED: Final = "Socket closed"  # grpc's words for a connection the server closed
_DISCONNECTED: Final = "Server disconnected"  # aiohttp's
_NOT_TLS: Final = "WRONG_VERSION_NUMBER"
_UNTRUSTED: Final = "CERTIFICATE_VERIFY_FAILED"
_CLIENT_CERTIFICATE: Final = (
    "the server closed the TLS connection: if it requires client certificates (mutual TLS), give --tls-cert FILE "
    "and --tls-key FILE"
)


@dataclass(frozen=True)
class ClientSide:
    """How the client connected: over TLS or not, with a client certificate or not."""

    tls: bool
    client_certificate: bool


def extension_refusal(error: A2AError) -> str:
    """The message of a refusal for a missing required extension, its hint naming `--extension URI`; any other
    error's message as it is."""
    if error.reason != ExtensionSupportRequiredError.reason:
        return error.message
    uris = [uri for uri in error.metadata.get(_MISSING, "").split(",") if uri]
    flags = " ".join(f"--extension {uri}" for uri in uris[:_SHOWN_URIS]) or "--extension URI"
    if len(uris) > _SHOWN_URIS:
        flags += f" (and {len(uris) - _SHOWN_URIS} more)"
    return f"{_HEADER_HINT.sub('', error.message)}; add {flags}"


def grpc_hint(error: A2AError, side: ClientSide) -> str | None:
    """What to change when the gRPC call failed with `error`: a transport failure (UNAVAILABLE without a reason)
    it recognises; else None."""
    if error.code != grpc.StatusCode.UNAVAILABLE or error.reason:
        return None
    message = error.message
    if _CLOSED in message:
        if not side.tls:
            return (
                "the server closed the connection: if it serves TLS, call grpcs://HOST:PORT, with --tls-ca FILE to trust "
                "its CA, or give its https:// card URL"
            )
        if not side.client_certificate:
            return _CLIENT_CERTIFICATE
    return _tls_hint(message, "leave out grpcs:// and the --tls-* flags")


def card_hint(message: str, url: str, side: ClientSide) -> str | None:
    """What to change when fetching the card at `url` failed with `message`; None when it is not recognised."""
    if _DISCONNECTED in message:
        if url.startswith("http://"):
            return (
                "the server closed the connection: if it serves TLS, use its https:// URL, with --tls-ca FILE to trust "
                "its CA"
            )
        if not side.client_certificate:
            return _CLIENT_CERTIFICATE
    return _tls_hint(message, "use its http:// URL")


def _tls_hint(message: str, plaintext_fix: str) -> str | None:
    if _NOT_TLS in message:
        return f"the server does not speak TLS there: {plaintext_fix}"
    if _UNTRUSTED in message:
        return "the server's certificate is not signed by a CA this client trusts: give that CA with --tls-ca FILE"
    return None
