"""Helpers to wrap or replace a grpc.aio method handler while keeping its kind (unary or stream)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from a2a_grpc.generated import a2a_pb2

A2A_METHOD_PREFIX = "/lf.a2a.v1.A2AService/"

UnaryBehavior = Callable[[Any, Any], Awaitable[Any]]
StreamBehavior = Callable[[Any, Any], Any]  # an async generator function, or a coroutine using context.write


def is_a2a_method(method: str) -> bool:
    return method.startswith(A2A_METHOD_PREFIX)


def first_value(details: grpc.HandlerCallDetails, key: str) -> str:
    """The value of the call's first `key` metadata entry ("" when there is none)."""
    for name, value in details.invocation_metadata or ():
        if name == key:
            return str(value)
    return ""


async def stream_items(behavior: StreamBehavior, request: Any, context: Any) -> AsyncIterator[Any]:
    """The messages of a server-streaming behavior, whichever of the two forms it takes."""
    result = behavior(request, context)
    if inspect.isasyncgen(result):
        async for item in result:
            yield item
    else:
        await result


class WrappedHandlers:
    """Memoised wrappers of method handlers.

    grpc.aio resolves a method to the same handler object on every call, so an interceptor can wrap
    it once per (handler, variant) instead of building closures and a new handler per call.
    """

    def __init__(self, wrap: Callable[[grpc.RpcMethodHandler, str], grpc.RpcMethodHandler], limit: int = 1024):
        self._wrap = wrap
        self._limit = limit
        self._cache: dict[tuple[int, str], tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def get(self, handler: grpc.RpcMethodHandler, variant: str = "") -> grpc.RpcMethodHandler:
        key = (id(handler), variant)
        cached = self._cache.get(key)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(handler, variant)
        if len(self._cache) >= self._limit:
            self._cache.clear()
        self._cache[key] = (handler, wrapped)  # holding `handler` keeps its id from being reused
        return wrapped


def _streaming_methods() -> frozenset[str]:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    return frozenset(A2A_METHOD_PREFIX + m.name for m in service.methods if m.server_streaming)


STREAMING_METHODS = _streaming_methods()


def rejecting_handler(method: str, error: BaseException) -> grpc.RpcMethodHandler:
    """A handler for `method` that refuses the call with `error` (turned into a status by the error
    interceptor) without running the interceptors further in, the servicer, or even parsing the request.

    `error` may be shared by many calls: each raise starts a fresh traceback, or every raise would chain
    one more (holding that call's frames) onto the last.
    """
    if method in STREAMING_METHODS:

        async def reject_stream(request: Any, context: Any) -> AsyncIterator[Any]:
            raise error.with_traceback(None)
            yield  # pragma: no cover - makes this an async generator

        return grpc.unary_stream_rpc_method_handler(reject_stream)

    async def reject_unary(request: Any, context: Any) -> Any:
        raise error.with_traceback(None)

    return grpc.unary_unary_rpc_method_handler(reject_unary)
