"""grpc's own services on the server (health, reflection) behind the error guard of the A2A methods.

Their generated handlers have grpc parse the request before any code runs, and grpc.aio answers bytes
that do not parse with UNKNOWN and the exception text. Registered through `GuardedServices`, a handler
gets the raw bytes and parses them inside the guard: malformed input is INVALID_ARGUMENT, a method the
servicer lacks UNIMPLEMENTED, any other failure INTERNAL with a generic message. A server interceptor
could do the same, but grpc.aio would then run it on every A2A call too.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from a2a_grpc.errors import UnimplementedError
from a2a_grpc.interceptors.server.errors import Parse, guard_stream, guard_unary, parse_request

Behavior = Callable[[Any, Any], Any]  # a grpc.aio servicer method: (request or request iterator, context)


class GuardedServices:
    """Stands in for `server` when a generated `add_*Servicer_to_server` helper registers a grpc.aio servicer."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        """Ignored: the helpers hand the same method handlers to `add_registered_method_handlers`."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        guarded = {name: guarded_handler(f"/{service}/{name}", handler) for name, handler in handlers.items()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, guarded),))
        self._server.add_registered_method_handlers(service, guarded)


def guarded_handler(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`handler` taking raw request bytes and parsing them inside the guard."""
    parse: Parse = handler.request_deserializer or bytes
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        served = guard_unary(method, _parsing(parse, handler.unary_unary))
        return grpc.unary_unary_rpc_method_handler(served, response_serializer=serialize)
    if handler.unary_stream is not None:
        streamed = _guard_streaming(method, _parsing(parse, handler.unary_stream), handler.unary_stream)
        return grpc.unary_stream_rpc_method_handler(streamed, response_serializer=serialize)
    if handler.stream_unary is not None:
        served = guard_unary(method, _parsing_each(parse, handler.stream_unary))
        return grpc.stream_unary_rpc_method_handler(served, response_serializer=serialize)
    streamed = _guard_streaming(method, _parsing_each(parse, handler.stream_stream), handler.stream_stream)
    return grpc.stream_stream_rpc_method_handler(streamed, response_serializer=serialize)


def _parsing(parse: Parse, behavior: Behavior) -> Behavior:
    return lambda request, context: _call(behavior, parse_request(parse, request), context)


def _parsing_each(parse: Parse, behavior: Behavior) -> Behavior:
    async def parsed(requests: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for request in requests:
            yield parse_request(parse, request)

    return lambda requests, context: _call(behavior, parsed(requests), context)


def _call(behavior: Behavior, request: Any, context: Any) -> Any:
    try:
        return behavior(request, context)
    except NotImplementedError:  # what a generated servicer base does for a method the servicer lacks
        raise UnimplementedError("this server does not implement the method") from None


def _guard_streaming(method: str, serve: Behavior, behavior: Behavior) -> Any:
    """A response stream is an async generator, or a coroutine that writes to the context (grpc.aio takes both)."""
    if not inspect.isasyncgenfunction(behavior):
        return guard_unary(method, serve)

    async def open_stream(request: Any, context: Any) -> AsyncIterator[Any]:
        events: AsyncIterator[Any] = serve(request, context)
        return events

    return guard_stream(method, open_stream)
