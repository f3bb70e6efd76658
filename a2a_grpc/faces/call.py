"""One HTTP request as the interceptor chain reads a grpc.aio servicer context.

The HTTP faces hand each request to the very method handlers the gRPC port serves
(`ServerChain.method_handlers`), so a request is admitted by the same code, in the same order, as a gRPC
call. `HttpCall` is what those handlers get for a context: the request headers (lower-cased, as gRPC
metadata arrives), the peer in gRPC's form (`ipv4:ADDRESS:PORT`, so per-address limits count both ports
alike), the verified client certificate in grpc's auth-context form (mutual TLS on an HTTPS port), and no
deadline. What the chain sends (the extension echo in headers and trailers) is kept for the HTTP response;
an abort raises `HttpAbort`, carrying the status the chain built from the one error table.

The headers are what grpc would hand the chain for the same bytes: a value that is not UTF-8 (aiohttp keeps its
bytes as surrogates) is read as Latin-1, as grpc reads it. The rest of grpc.aio's servicer context is there for
a user's interceptor (a2a_grpc.interceptors.server.user), as grpc.aio has it: a code set without an abort
(`set_code`, `set_details`) ends the call with that status and no response (`raise_status`); the peer's
identity is the client certificate's, named as grpc names it; done callbacks run when the response has
ended; compression is HTTP's business, so its calls change nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import grpc
from aiohttp import web

from a2a_grpc.auth.mtls import ALTERNATIVE_NAMES, COMMON_NAME, SUBJECT
from a2a_grpc.auth.principal import AuthContext
from a2a_grpc.connection_front import grpc_peer as address_peer
from a2a_grpc.errors import Metadata

log = logging.getLogger(__name__)

NO_AUTH_CONTEXT: AuthContext = {}
HEADER_OVERHEAD = 32  # bytes each header counts for besides its name and value (HTTP/2's, which grpc applies)


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

    __slots__ = (
        "_aborted",
        "_auth_context",
        "_callbacks",
        "_code",
        "_details",
        "_metadata",
        "_peer",
        "_task",
        "_trailers",
        "headers",
    )

    def __init__(self, metadata: Metadata, peer: str, auth_context: AuthContext = NO_AUTH_CONTEXT) -> None:
        self._metadata = metadata
        self._peer = peer
        self._auth_context = auth_context
        self._task = _serving_task()  # done once the response has ended
        self._trailers: Metadata = ()
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._aborted = False
        self._callbacks: list[Callable[[Any], None]] = []
        self.headers: list[tuple[str, str | bytes]] = []  # the response headers the chain sent

    @classmethod
    def of(cls, request: web.Request) -> HttpCall:
        transport = request.transport
        peername = transport.get_extra_info("peername") if transport is not None else None
        certificate = transport.get_extra_info("peercert") if transport is not None else None
        metadata = tuple((name.lower(), as_grpc_reads(value)) for name, value in request.headers.items())
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

    def peer_identity_key(self) -> str | None:
        """As grpc names a certificate's identity: its alternative names if it has any, else its common name."""
        for key in (ALTERNATIVE_NAMES, COMMON_NAME):
            if self._auth_context.get(key):
                return key
        return None

    def peer_identities(self) -> list[bytes] | None:
        key = self.peer_identity_key()
        return None if key is None else list(self._auth_context[key])

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        self.headers.extend(metadata)

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._trailers = tuple(metadata)

    def trailing_metadata(self) -> Metadata:
        return self._trailers

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def set_details(self, details: str) -> None:
        self._details = details

    def details(self) -> str:
        return self._details

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()) -> None:
        """As grpc.aio's: without details or trailers of its own, the ones set before are sent."""
        self._code, self._aborted = code, True
        self._details = details or self._details
        raise HttpAbort(code, self._details, tuple(trailing_metadata) or self._trailers)

    async def abort_with_status(self, status: grpc.Status) -> None:
        await self.abort(status.code, status.details, status.trailing_metadata)

    def raise_status(self) -> None:
        """HttpAbort when the call set a code other than OK without aborting: grpc ends such a call with that status
        (its details and trailers), and sends no response."""
        if self._code is not None and self._code is not grpc.StatusCode.OK:
            raise HttpAbort(self._code, self._details, self._trailers)

    async def events_then_status(self, events: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
        """`events`, then `raise_status`: a stream that set a code ends with that status after its events."""
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()
        self.raise_status()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """`callback(self)` once the response has ended (sent, or the client gone)."""
        if not self._callbacks and self._task is not None:
            self._task.add_done_callback(self._run_callbacks)
        self._callbacks.append(callback)

    def _run_callbacks(self, _: asyncio.Task[Any]) -> None:
        for callback in self._callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a done callback of an HTTP call failed")

    def cancelled(self) -> bool:
        return False  # as grpc.aio's: a servicer's call is never cancelled by the server itself

    def done(self) -> bool:
        """True once the status was sent: aborted, or the response ended (not when the client went away)."""
        task = self._task
        return self._aborted or (task is not None and task.done() and not task.cancelled())

    def set_compression(self, compression: grpc.Compression) -> None:
        """No effect: HTTP's content encoding is not the chain's to choose."""

    def disable_next_message_compression(self) -> None:
        """No effect (see set_compression)."""

    def response_headers(self) -> list[tuple[str, str]]:
        """What the chain sent in headers and trailers (the extension echo, a worker's pid), as HTTP headers."""
        sent: dict[str, str] = {}
        for name, value in (*self.headers, *self._trailers):
            if isinstance(value, str) and not name.endswith("-bin"):
                sent[name] = value
        return list(sent.items())


def _serving_task() -> asyncio.Task[Any] | None:
    """The task serving the request (aiohttp's, one a request); None outside a running loop."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def as_grpc_reads(value: str) -> str:
    """A header value as grpc hands it over: UTF-8 when its bytes are, else Latin-1 (aiohttp keeps bytes that are
    not UTF-8 as surrogates)."""
    if value.isascii():
        return value
    try:
        value.encode()
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("latin-1")
    return value


def header_list_size(request: web.Request) -> int:
    """The request's headers as grpc measures metadata against its limit: each name and value, plus 32 bytes."""
    return sum(len(name) + len(value) + HEADER_OVERHEAD for name, value in request.raw_headers)


def grpc_peer(peername: Any) -> str:
    """An asyncio `peername` as grpc names a peer: `ipv4:127.0.0.1:5000`, `ipv6:%5B::1%5D:5000`; "" when unknown."""
    if not isinstance(peername, tuple) or len(peername) < 2:
        return ""
    return address_peer((str(peername[0]), peername[1]))


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
