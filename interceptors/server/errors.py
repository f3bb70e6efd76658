"""The outermost server interceptor: every exception a call raises leaves as a proper gRPC status.

An `A2AError` becomes its row of the error table (code, ErrorInfo, BadRequest). Anything else is
logged and becomes INTERNAL with a generic message: grpc.aio's default (UNKNOWN carrying the
exception text) would leak internals to the client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from a2a_grpc.call import current_call
from a2a_grpc.errors import A2AError, InternalError, InvalidRequestError, status_trailers
from a2a_grpc.extensions import EXTENSIONS_HEADER
from a2a_grpc.interceptors.server.handlers import (
    StreamBehavior,
    UnaryBehavior,
    WrappedHandlers,
    is_a2a_method,
    rejecting_handler,
    stream_items,
)

log = logging.getLogger(__name__)

_INTERNAL = InternalError("internal error")


class ErrorInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self._guarded = WrappedHandlers(_guard)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if not is_a2a_method(method):
            return await continuation(handler_call_details)
        try:
            handler = await continuation(handler_call_details)
        except Exception:  # an interceptor further in failed: still a status, never grpc.aio's UNKNOWN
            log.exception("interceptor failed on %s", method)
            return _guard(rejecting_handler(method, _INTERNAL), "")
        return None if handler is None else self._guarded.get(handler)


def _guard(handler: grpc.RpcMethodHandler, _: str) -> grpc.RpcMethodHandler:
    # Requests are parsed inside the guard: grpc.aio answers a parse failure itself, with
    # UNKNOWN and the exception text.
    parse = handler.request_deserializer
    if handler.response_streaming:
        return handler._replace(unary_stream=_guard_stream(handler.unary_stream, parse), request_deserializer=None)
    return handler._replace(unary_unary=_guard_unary(handler.unary_unary, parse), request_deserializer=None)


def _parse(parse: Callable[[bytes], Any] | None, request: Any) -> Any:
    if parse is None:
        return request
    try:
        return parse(request)
    except Exception:
        raise InvalidRequestError("the request is not a valid message of this method's request type") from None


def _guard_unary(behavior: UnaryBehavior, parse: Callable[[bytes], Any] | None) -> UnaryBehavior:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(_parse(parse, request), context)
        except A2AError as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("unexpected error in %s", type(behavior).__qualname__)
            await abort(context, _INTERNAL)

    return guarded


def _guard_stream(behavior: StreamBehavior, parse: Callable[[bytes], Any] | None) -> StreamBehavior:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in stream_items(behavior, _parse(parse, request), context):
                yield item
        except A2AError as error:
            await abort(context, error)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("unexpected error in a stream")
            await abort(context, _INTERNAL)

    return guarded


async def abort(context: grpc.aio.ServicerContext, error: A2AError) -> None:
    """End the call with `error`; an accepted call (one whose extensions were negotiated) keeps its echo."""
    echo = current_call().echo
    extra = ((EXTENSIONS_HEADER, echo),) if echo is not None else ()
    await context.abort(error.code, error.message, status_trailers(error, extra))
