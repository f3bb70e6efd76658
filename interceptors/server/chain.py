"""The server's interceptor chain for A2A calls, composed in one place.

Each method handler of a face's service (a2a_grpc.interceptors.server.faces: A2A 1.0, and 0.3 beside it) is
wrapped once, at start-up, in this order:
  errors          every failure leaves as a proper status (outermost)
  telemetry       with an access log, metrics or tracing: times the call and records how it ended (its
                  status code and A2A reason, a stream's events, the tenant once bound), around
                  admission, the preparation (echo, parse, tenant) and the servicer; with tracing, the
                  call's server span, which its CallContext carries
  authentication  the card's security requirements (a2a_grpc.auth): the caller's principal and claims,
                  or UNAUTHENTICATED (PERMISSION_DENIED for a missing scope)
  limits          the caller's requests per second (RATE_LIMITED); a stream also holds one of its
                  caller's and the server's stream slots until it ends (TOO_MANY_STREAMS): both
                  RESOURCE_EXHAUSTED with a RetryInfo (a2a_grpc.interceptors.server.limits); a failed
                  authentication from an address that failed too often is RATE_LIMITED, not UNAUTHENTICATED
  version         the `a2a-version` the call speaks, or VERSION_NOT_SUPPORTED
  extensions      the activated `a2a-extensions`, or EXTENSION_SUPPORT_REQUIRED (but on the methods a caller learns
                  the required ones from: 0.3's GetAgentCard); then the echo
  tenants         once the request is parsed: its `tenant`, one the card names, scopes the call's tasks
                  (INVALID_ARGUMENT otherwise)
  yours           the user's grpc.aio.ServerInterceptors (A2AServer(interceptors=...), serve --interceptor),
                  if any, around the servicer alone (a2a_grpc.interceptors.server.user says why there)
  the servicer    called with the parsed request and the call's CallContext
In worker mode (`a2a-grpc serve --workers N`) every call's trailers also name the process that served it.
The checks follow the order the spec gives and, but for the tenant, run before the request is parsed. Together they
build one immutable CallContext per call, which is then passed explicitly, never looked up.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from google.protobuf import message_factory

from a2a_grpc.arrival import Arrival, seen_call_over
from a2a_grpc.auth import ANONYMOUS, CardAuthenticator, Principal
from a2a_grpc.call import CallContext
from a2a_grpc.encoding import encode_response
from a2a_grpc.errors import AuthenticationError
from a2a_grpc.extensions import ExtensionRegistry, Negotiation
from a2a_grpc.interceptors.server.auth import Authenticate, authentication
from a2a_grpc.interceptors.server.errors import Parse, guard_stream, guard_unary, parse_request
from a2a_grpc.interceptors.server.extensions import (
    MAX_EXTENSIONS_PER_CALL,
    NO_NEGOTIATION,
    ExtensionNegotiator,
    send_echo,
)
from a2a_grpc.interceptors.server.faces import V10_FACE, Face, Translate
from a2a_grpc.interceptors.server.limits import Limits, caller_of, released_when_done
from a2a_grpc.interceptors.server.tenants import TenantCheck
from a2a_grpc.interceptors.server.user import UserInterceptors
from a2a_grpc.interceptors.server.version import VersionCheck
from a2a_grpc.settings.defaults import ECHO_UNARY_HEADERS, MISSING_VERSION_MEANS, NEGOTIATE_EXTENSIONS
from a2a_grpc.telemetry import AccessLog, CallObserver, Metrics
from a2a_grpc.telemetry.calls import Admit, Behave, Prepare

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import Tracing

__all__ = ["WORKER_TRAILER", "ExtensionNegotiator", "Limits", "ServerChain", "VersionCheck", "authentication"]

WORKER_TRAILER = "a2a-grpc-worker"  # the pid of the worker process that served the call

# A streaming servicer method: (request, call) -> an async iterator of events.
StreamBehavior = Callable[[Any, CallContext], AsyncIterator[Any]]
Served = TypeVar("Served")


class ServerChain:
    """`echo_unary_headers=False` echoes in the trailers alone on unary calls, where a unary client reads
    headers and trailers together anyway: grpc.aio cannot send headers with a unary response, so they
    cost a transport operation of their own. Streams always echo in both. With `worker_pid`, every call's
    trailers carry `a2a-grpc-worker: <worker_pid>`. With `access_log`, `metrics` or `tracing`, every call
    ends in them (a2a_grpc.telemetry). With `interceptors`, the user's grpc.aio.ServerInterceptors run around
    the servicer (a2a_grpc.interceptors.server.user)."""

    def __init__(
        self,
        registry: ExtensionRegistry,
        *,
        missing_version_means: str = MISSING_VERSION_MEANS,
        authenticator: CardAuthenticator | None = None,
        negotiate_extensions: bool = NEGOTIATE_EXTENSIONS,
        echo_unary_headers: bool = ECHO_UNARY_HEADERS,
        worker_pid: int | None = None,
        access_log: AccessLog | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        limits: Limits | None = None,
        max_extensions_per_call: int = MAX_EXTENSIONS_PER_CALL,
        tenants: TenantCheck | None = None,
        face: Face = V10_FACE,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.face = face
        self._yours = UserInterceptors(interceptors) if interceptors else None
        self.tenants = tenants if tenants is not None else TenantCheck(())
        self._authenticate: Authenticate | None = authentication(authenticator) if authenticator is not None else None
        self.limits = limits if limits is not None else Limits()
        self._check_version = face.version_check(missing_version_means)
        negotiator = functools.partial(
            ExtensionNegotiator, registry, max_extensions=max_extensions_per_call, headers=face.extension_headers
        )
        self.admit = self._admission(negotiator() if negotiate_extensions else None)
        # the methods a caller learns the required extensions from: admitted without them (echoing what it asks)
        self._admit_without_required = self._admission(
            negotiator(enforce_required=False) if negotiate_extensions else None
        )
        self._echo_unary_headers = echo_unary_headers
        self._worker_trailer = ((WORKER_TRAILER, str(worker_pid)),) if worker_pid is not None else ()
        observed = access_log is not None or metrics is not None or tracing is not None
        self._observer = CallObserver(access_log, metrics, tracing) if observed else None

    def _admission(self, negotiate: ExtensionNegotiator | None) -> Admit:
        """`admit(method, arrival, context)`: the call's context, once every check accepted it (each refusal raises
        its A2AError), with `negotiate` deciding its extensions (None: none are negotiated)."""

        async def admit(method: str, arrival: Arrival, context: Any) -> CallContext:
            metadata = arrival.metadata
            principal = await self.admit_caller(arrival, context)
            version = self._check_version(metadata)
            negotiation: Negotiation = negotiate(metadata) if negotiate is not None else NO_NEGOTIATION
            return CallContext(
                method,
                metadata,
                arrival.time_remaining,
                principal.name,
                version,
                negotiation.requested,
                negotiation.activated,
                negotiation.echo,
                claims=principal.claims,
                peer=arrival.peer,
            )

        return admit

    async def admit_caller(self, arrival: Arrival, context: Any) -> Principal:
        """The caller's principal, once authentication and its request rate let the call in (each refusal raises
        its A2AError): what every call goes through, a call to a method no service serves included."""
        principal = await self._authenticated(arrival, context) if self._authenticate is not None else ANONYMOUS
        if self.limits.rate_limited:
            self.limits.take_request(caller_of(principal.name, arrival.peer))
        return principal

    async def _authenticated(self, arrival: Arrival, context: Any) -> Principal:
        """The caller's principal: a valid credential always passes, whatever its address did. A refused one
        counts against its address's budget of failures, and past it is answered RATE_LIMITED in place of
        UNAUTHENTICATED (a2a_grpc.interceptors.server.limits)."""
        assert self._authenticate is not None
        try:
            return await self._authenticate(arrival.metadata, context)
        except AuthenticationError:
            if self.limits.auth_throttled:
                self.limits.auth_failed(arrival.peer)
            raise

    def method_handlers(self, servicer: Any) -> dict[str, grpc.RpcMethodHandler]:
        """A handler for every method of the face's service on `servicer`, behind the chain."""
        face = self.face
        handlers: dict[str, grpc.RpcMethodHandler] = {}
        for method in face.service.methods:
            parse = message_factory.GetMessageClass(method.input_type).FromString
            behavior = getattr(servicer, method.name)
            name = face.log_name(method.name)
            translate = face.errors(method.name) if face.errors is not None else None
            admit = self._admit_without_required if method.name in face.extensions_not_required else self.admit
            path = f"/{face.service.full_name}/{method.name}"
            if method.server_streaming:
                prepare, open_stream = self._stream(parse, behavior)
                if self._yours is not None:
                    prepare, open_stream = self._yours.stream(path, prepare, open_stream)
                opener = self._stamped(self._admitted(name, admit, prepare, open_stream, translate, stream=True))
                handler = grpc.unary_stream_rpc_method_handler(
                    guard_stream(name, opener, translate), response_serializer=encode_response
                )
            else:
                prepare, behave = self._unary(parse), behavior
                if self._yours is not None:
                    prepare, behave = self._yours.unary(path, prepare, behave)
                served = self._stamped(self._admitted(name, admit, prepare, behave, translate, stream=False))
                handler = grpc.unary_unary_rpc_method_handler(
                    guard_unary(name, served, translate), response_serializer=encode_response
                )
            handlers[method.name] = handler
        return handlers

    def _unary(self, parse: Parse) -> Prepare:
        """The echo, the parsed request and its tenant, once a unary call is admitted."""
        echo_headers = self._echo_unary_headers
        tenants = self.tenants
        tenant_of = self.face.tenant_of
        echo_names = self.face.extension_headers

        async def prepare(request: bytes, call: CallContext, context: Any) -> tuple[Any, CallContext]:
            if call.echo:
                await send_echo(context, call.echo, headers=echo_headers, names=echo_names)
            parsed = parse_request(parse, request)
            tenant = tenant_of(parsed)
            if tenant or tenants.enabled:
                call = tenants(call, tenant)
            return parsed, call

        return prepare

    def _stream(self, parse: Parse, behavior: StreamBehavior) -> tuple[Prepare, Behave[AsyncIterator[Any]]]:
        """A stream slot, the echo, the parsed request and its tenant once a stream is admitted; then the
        stream, which gives its slot back when it ends."""
        limits = self.limits
        tenants = self.tenants
        tenant_of = self.face.tenant_of
        echo_names = self.face.extension_headers

        async def prepare(request: bytes, call: CallContext, context: Any) -> tuple[Any, CallContext]:
            release = limits.open_stream(caller_of(call.principal, call.peer))
            try:
                if call.echo:
                    await send_echo(context, call.echo, headers=True, names=echo_names)
                parsed = parse_request(parse, request)
                tenant = tenant_of(parsed)
                if tenant or tenants.enabled:
                    call = tenants(call, tenant)
            except BaseException:
                release()
                raise
            return (parsed, release), call

        async def open_stream(prepared: Any, call: CallContext) -> AsyncIterator[Any]:
            parsed, release = prepared
            try:
                events = behavior(parsed, call)
            except BaseException:
                release()
                raise
            return released_when_done(events, release)

        return prepare, open_stream

    def _admitted(
        self,
        name: str,
        admit: Admit,
        prepare: Prepare,
        behave: Behave[Any],
        translate: Translate | None,
        *,
        stream: bool,
    ) -> Callable[[bytes, Any], Awaitable[Any]]:
        """`prepare` and `behave` (a unary call's servicer, a stream's opener) behind `admit`; with telemetry,
        through the observer's admission path (a2a_grpc.telemetry.calls), with errors as the face's callers
        read them (`translate`)."""
        if self._observer is not None:
            observe = self._observer.stream if stream else self._observer.unary
            return observe(name, admit, prepare, behave, translate)

        async def admitted(request: bytes, context: Any) -> Any:
            prepared, call = await prepare(request, await admit(name, Arrival.of(context), context), context)
            return await behave(prepared, call)

        return admitted

    def _stamped(self, handle: Callable[[bytes, Any], Awaitable[Served]]) -> Callable[[bytes, Any], Awaitable[Served]]:
        """`handle` adding the worker trailer to the trailers the call set (the echo), or that an error
        status keeps; `handle` itself outside worker mode."""
        trailer = self._worker_trailer
        if not trailer:
            return handle

        def stamp(context: Any) -> None:
            context.set_trailing_metadata((*context.trailing_metadata(), *trailer))

        async def stamped(request: bytes, context: Any) -> Served:
            try:
                served = await handle(request, context)
            except BaseException as error:
                if not seen_call_over(error):
                    stamp(context)
                raise
            stamp(context)
            return served

        return stamped
