"""Negotiates the `a2a-extensions` of every A2A call and echoes the activated set.

Every metadata entry is read and split on commas, so each real client form works. A call that lacks
a declared required extension is refused with ExtensionSupportRequiredError before the servicer
looks anything up. An accepted call gets `a2a-extensions: <activated, comma-joined>` in its response
headers (before the first stream message) and again in its trailers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from a2a_grpc.call import begin_call
from a2a_grpc.errors import ExtensionSupportRequiredError
from a2a_grpc.extensions import EXTENSIONS_HEADER, ExtensionRegistry
from a2a_grpc.interceptors.server.handlers import (
    StreamBehavior,
    UnaryBehavior,
    WrappedHandlers,
    is_a2a_method,
    rejecting_handler,
    stream_items,
)

Metadata = Sequence[tuple[str, str | bytes]]


class ExtensionInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """`unary_headers=False` echoes in the trailers alone on unary calls, where a unary client reads
    headers and trailers together anyway: grpc.aio cannot send headers with a unary response, so
    they cost a separate transport operation per call. Streams always get both."""

    def __init__(self, registry: ExtensionRegistry, *, unary_headers: bool = False) -> None:
        self._registry = registry
        self._unary_headers = unary_headers
        self._echoing = WrappedHandlers(self._echo)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if not is_a2a_method(method):
            return await continuation(handler_call_details)
        metadata = handler_call_details.invocation_metadata or ()
        values = tuple([v for k, v in metadata if k == EXTENSIONS_HEADER])
        negotiation = self._registry.negotiate(values)
        if negotiation.missing_required:
            missing = ",".join(negotiation.missing_required)
            error = ExtensionSupportRequiredError(
                f"this agent requires extensions the call did not activate: {missing}; "
                f"send them in the '{EXTENSIONS_HEADER}' header",
                metadata={"missingExtensions": missing},
            )
            return rejecting_handler(method, error)
        call = begin_call()
        call.requested_extensions = negotiation.requested
        call.activated_extensions = negotiation.activated
        call.metadata = metadata
        handler = await continuation(handler_call_details)
        if handler is None or not negotiation.activated:
            return handler  # nothing to echo: no header is sent for an empty set
        call.echo = negotiation.echo
        return self._echoing.get(handler, negotiation.echo)

    def _echo(self, handler: grpc.RpcMethodHandler, echo_value: str) -> grpc.RpcMethodHandler:
        echo = ((EXTENSIONS_HEADER, echo_value),)
        if handler.response_streaming:
            return handler._replace(unary_stream=_echo_stream(handler.unary_stream, echo))
        if not self._unary_headers:
            return handler._replace(unary_unary=_echo_unary_trailers(handler.unary_unary, echo))
        return handler._replace(unary_unary=_echo_unary(handler.unary_unary, echo))


class HeaderMergingContext:
    """A servicer context whose response headers start with the echo and merge the handler's own.

    Headers can be sent only once per call, so they go out on the handler's own
    `send_initial_metadata`, before its first message, or when it returns, whichever comes first.
    """

    __slots__ = ("_context", "_echo", "_headers_sent", "_trailers")

    def __init__(self, context: grpc.aio.ServicerContext, echo: Metadata) -> None:
        self._context = context
        self._echo = echo
        self._headers_sent = False
        self._trailers: Metadata = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        if self._headers_sent:
            raise RuntimeError("response headers were already sent")
        self._headers_sent = True
        await self._context.send_initial_metadata((*self._echo, *metadata))

    async def flush_headers(self) -> None:
        if not self._headers_sent:
            self._headers_sent = True
            await self._context.send_initial_metadata(self._echo)

    async def write(self, message: Any) -> None:
        await self.flush_headers()
        await self._context.write(message)

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._trailers = tuple(metadata)
        self._context.set_trailing_metadata((*self._echo, *self._trailers))

    def finish(self) -> None:
        self._context.set_trailing_metadata((*self._echo, *self._trailers))


def _echo_unary(behavior: UnaryBehavior, echo: Metadata) -> UnaryBehavior:
    async def echoing(request: Any, context: grpc.aio.ServicerContext) -> Any:
        proxy = HeaderMergingContext(context, echo)
        response = await behavior(request, proxy)
        await proxy.flush_headers()
        proxy.finish()
        return response

    return echoing


def _echo_unary_trailers(behavior: UnaryBehavior, echo: Metadata) -> UnaryBehavior:
    echo = tuple(echo)

    async def echoing(request: Any, context: grpc.aio.ServicerContext) -> Any:
        # No proxy needed: the echo is set first, and trailers the handler set itself are merged after.
        context.set_trailing_metadata(echo)
        response = await behavior(request, context)
        trailers = context.trailing_metadata()
        if trailers is not echo:
            context.set_trailing_metadata((*echo, *trailers))
        return response

    return echoing


def _echo_stream(behavior: StreamBehavior, echo: Metadata) -> StreamBehavior:
    async def echoing(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        proxy = HeaderMergingContext(context, echo)
        async for item in stream_items(behavior, request, proxy):
            await proxy.flush_headers()
            yield item
        await proxy.flush_headers()
        proxy.finish()

    return echoing
