"""`A2AServerInterceptor`: A2A's version check, extension negotiation and echo for any grpc.aio server.

    server = grpc.aio.server(interceptors=[A2AServerInterceptor(card="agent-card.json")])

The rules are our server's own (interceptors.server.admission); this module wraps the handlers the asyncio way
(async servicer methods, async generators, and coroutines that write with `context.write`; a sync method, which
grpc.aio runs in its thread pool, the sync way: interceptors.server.standard_sync). A refusal aborts with the
status and its details in one call (grpc.aio drops trailers set before an abort that names its own), through the
chain's own `abort`. The servicer's context is never touched once its call is over (a2a_grpc.arrival).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from a2a_grpc.errors import A2AError, Metadata
from a2a_grpc.interceptors.server.admission import Accept, Echo, Refuse, StandardChecks, activate, with_echo
from a2a_grpc.interceptors.server.errors import abort
from a2a_grpc.interceptors.server.standard_sync import accept_sync

Behaviour = Callable[[Any, Any], Any]


class EchoingContext:
    """An async servicer's context while its call echoes: the response headers it sends carry the echo too (sent
    before the first message, or on return, when it sends none), and trailers it sets or aborts with keep the echo
    unless they name it themselves. Everything else is the servicer context's."""

    __slots__ = ("_context", "_echo", "headers_due")

    def __init__(self, context: Any, echo: Echo, headers_due: bool) -> None:
        self._context = context
        self._echo = echo
        self.headers_due = headers_due

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        if self.headers_due:
            self.headers_due = False
            metadata = (*self._echo, *metadata)
        await self._context.send_initial_metadata(metadata)

    async def send_headers(self) -> None:
        self.headers_due = False
        await self._context.send_initial_metadata(self._echo)

    async def write(self, message: Any) -> None:
        if self.headers_due:
            await self.send_headers()
        await self._context.write(message)

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._context.set_trailing_metadata(with_echo(metadata, self._echo))

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()) -> None:
        # without trailers, grpc.aio keeps the ones set (the echo among them)
        await self._context.abort(code, details, with_echo(trailing_metadata, self._echo) if trailing_metadata else ())


def accept(
    handler: grpc.RpcMethodHandler, activated: tuple[str, ...], echo: Echo, unary_headers: bool
) -> grpc.RpcMethodHandler:
    """`handler` echoing `echo` in the trailers (set before the servicer runs, so an error it raises keeps them) and,
    on streams or with `unary_headers`, in the response headers; its servicer reads `activated` as
    `activated_extensions()` (set in the call's own task)."""
    if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, activated, echo, unary_headers),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    stream = handler.unary_stream
    if stream is not None and (inspect.isasyncgenfunction(stream) or inspect.iscoroutinefunction(stream)):
        wrap = _async_generator if inspect.isasyncgenfunction(stream) else _writer
        return grpc.unary_stream_rpc_method_handler(
            wrap(stream, activated, echo),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return accept_sync(handler, activated, echo, unary_headers)


def _unary(behaviour: Behaviour, activated: tuple[str, ...], echo: Echo, headers: bool) -> Behaviour:
    async def unary(request: Any, context: Any) -> Any:
        activate(activated)
        context.set_trailing_metadata(echo)
        echoing = EchoingContext(context, echo, headers)
        response = await behaviour(request, echoing)
        if echoing.headers_due:
            await echoing.send_headers()
        return response

    return unary


def _async_generator(behaviour: Behaviour, activated: tuple[str, ...], echo: Echo) -> Behaviour:
    async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
        activate(activated)
        context.set_trailing_metadata(echo)
        echoing = EchoingContext(context, echo, True)
        async for item in behaviour(request, echoing):
            if echoing.headers_due:
                await echoing.send_headers()
            yield item
        if echoing.headers_due:
            await echoing.send_headers()

    return stream


def _writer(behaviour: Behaviour, activated: tuple[str, ...], echo: Echo) -> Behaviour:
    """A streaming method that writes its messages with `context.write` (whose first write sends the headers)."""

    async def stream(request: Any, context: Any) -> None:
        activate(activated)
        context.set_trailing_metadata(echo)
        echoing = EchoingContext(context, echo, True)
        await behaviour(request, echoing)
        if echoing.headers_due:
            await echoing.send_headers()

    return stream


def refuse(handler: grpc.RpcMethodHandler, error: A2AError) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind that ends its call with `error` (its request is never parsed)."""

    async def refused(request: bytes, context: Any) -> None:
        await abort(context, error)

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refused)
    return grpc.unary_unary_rpc_method_handler(refused)


class A2AServerInterceptor(StandardChecks, grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Checks every call to an A2A service (`lf.a2a.v1.A2AService`, and the 0.3 `a2a.v1.A2AService`) of a grpc.aio
    server as `a2a-grpc serve` does: its `a2a-version` (VERSION_NOT_SUPPORTED), then its `a2a-extensions` against
    what `card` (a ProtoJSON file's path, a ProtoJSON dict or an AgentCard message) or `extensions` ((uri, required)
    pairs) declares: a call without a required one is FAILED_PRECONDITION with the ErrorInfo
    EXTENSION_SUPPORT_REQUIRED; an accepted call's activated set is echoed in `a2a-extensions` (trailers; response
    headers too on streams, and on unary calls with `echo_unary_headers`) and is what `activated_extensions()`
    returns in its servicer method. Calls to other services (health, reflection, yours) pass untouched.
    See docs/interceptors.md."""

    @staticmethod
    def _handlers() -> tuple[Accept, Refuse]:
        return accept, refuse

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return self._admission.handler(handler_call_details.method, handler_call_details.invocation_metadata, handler)
