"""One HTTP request as the interceptor chain reads a grpc.aio servicer context.

The HTTP faces hand each request to the very method handlers the gRPC port serves
(`ServerChain.method_handlers`), so a request is admitted by the same code, in the same order, as a gRPC
call. `HttpCall` is what those handlers get for a context: the request headers (lower-cased, as gRPC
metadata arrives), the peer in gRPC's form (`ipv4:ADDRESS:PORT`, so per-address limits count both ports
alike), the verified client certificate in grpc's auth-context form (mutual TLS on an HTTPS port), and no
deadline. What the chain sends (the extension echo in headers and trailers) is kept for the HTTP response;
an abort raises `HttpAbort`, carrying the status the chain built from the one error table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from aiohttp import web

from a2a_grpc.auth.mtls import ALTERNATIVE_NAMES, COMMON_NAME, SUBJECT
from a2a_grpc.auth.principal import AuthContext
from a2a_grpc.errors import Metadata

NO_AUTH_CONTEXT: AuthContext = {}


class HttpAbort(grpc.aio.AbortError):  # type: ignore[misc]
    """The chain ended the request with a status: `code`, `details` and the trailers (the rich status's
    `grpc-status-details-bin` among them)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: Metadata) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailers = trailers


class HttpCall:
    """The servicer context of one HTTP request: read at arrival, written only by the chain."""

    __slots__ = ("_auth_context", "_metadata", "_peer", "_trailers", "headers")

    def __init__(self, metadata: Metadata, peer: str, auth_context: AuthContext = NO_AUTH_CONTEXT) -> None:
        self._metadata = metadata
        self._peer = peer
        self._auth_context = auth_context
        self._trailers: Metadata = ()
        self.headers: list[tuple[str, str | bytes]] = []  # the response headers the chain sent

    @classmethod
    def of(cls, request: web.Request) -> HttpCall:
        transport = request.transport
        peername = transport.get_extra_info("peername") if transport is not None else None
        certificate = transport.get_extra_info("peercert") if transport is not None else None
        metadata = tuple((name.lower(), value) for name, value in request.headers.items())
        return cls(metadata, grpc_peer(peername), certificate_auth_context(certificate))

    def fresh(self) -> HttpCall:
        """A context for another call of the same request (a JSON-RPC batch's next one): nothing sent yet."""
        return HttpCall(self._metadata, self._peer, self._auth_context)

    def invocation_metadata(self) -> Metadata:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None

    def auth_context(self) -> AuthContext:
        return self._auth_context

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        self.headers.extend(metadata)

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._trailers = tuple(metadata)

    def trailing_metadata(self) -> Metadata:
        return self._trailers

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()) -> None:
        raise HttpAbort(code, details, tuple(trailing_metadata))

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return False

    def response_headers(self) -> list[tuple[str, str]]:
        """What the chain sent in headers and trailers (the extension echo, a worker's pid), as HTTP headers."""
        sent: dict[str, str] = {}
        for name, value in (*self.headers, *self._trailers):
            if isinstance(value, str) and not name.endswith("-bin"):
                sent[name] = value
        return list(sent.items())


def grpc_peer(peername: Any) -> str:
    """An asyncio `peername` as grpc names a peer: `ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`; "" when unknown."""
    if not isinstance(peername, tuple) or len(peername) < 2:
        return ""
    host, port = str(peername[0]), peername[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def certificate_auth_context(certificate: Mapping[str, Any] | None) -> AuthContext:
    """A verified client certificate (`ssl.SSLSocket.getpeercert()`) as grpc's auth context names it, which the
    mutual-TLS scheme reads; none without a certificate."""
    if not certificate:
        return NO_AUTH_CONTEXT
    subject = [(key, value) for rdn in certificate.get("subject", ()) for key, value in rdn]
    common_names = [value.encode() for key, value in subject if key == "commonName"]
    alternative = [value.encode() for _, value in certificate.get("subjectAltName", ())]
    distinguished = ",".join(f"{_SHORT.get(key, key)}={value}" for key, value in reversed(subject))
    return {COMMON_NAME: common_names, ALTERNATIVE_NAMES: alternative, SUBJECT: [distinguished.encode()]}


_SHORT = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C"}
