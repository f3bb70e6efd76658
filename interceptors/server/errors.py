"""The outermost layer of every A2A handler: whatever a call raises leaves as a proper gRPC status.

An `A2AError` becomes its row of the error table (code, ErrorInfo, BadRequest), keeping the trailers
the call had already set (the extension echo); on a face whose callers read errors otherwise (A2A 0.3), as
its `translate` renders it. Anything else is logged and becomes INTERNAL with a
generic message: grpc.aio's default (UNKNOWN carrying the exception text) would leak internals.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from a2a_grpc.arrival import seen_call_over
from a2a_grpc.errors import A2AError, InternalError, InvalidRequestError
from a2a_grpc.status_details import status_message, status_trailers

log = logging.getLogger(__name__)

UnaryHandler = Callable[[Any, Any], Awaitable[Any]]
StreamOpener = Callable[[Any, Any], Awaitable[AsyncIterator[Any]]]  # the events of a call, once it is admitted
StreamHandler = Callable[[Any, Any], AsyncIterator[Any]]
Parse = Callable[[bytes], Any]
Translate = Callable[[A2AError], A2AError]


def guard_unary(method: str, handle: UnaryHandler, translate: Translate | None = None) -> UnaryHandler:
    async def guarded(request: Any, context: Any) -> Any:
        try:
            return await handle(request, context)
        except Exception as error:
            await fail(context, method, error, translate)

    return guarded


def guard_stream(method: str, open_stream: StreamOpener, translate: Translate | None = None) -> StreamHandler:
    async def guarded(request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            async for item in await open_stream(request, context):
                yield item
        except Exception as error:
            await fail(context, method, error, translate)

    return guarded


def parse_request(parse: Parse, request: bytes) -> Any:
    """The request `parse` makes of the bytes received; InvalidRequestError when they do not parse."""
    # grpc.aio would answer a request that fails to parse itself, with UNKNOWN and the exception text.
    try:
        return parse(request)
    except Exception:
        raise InvalidRequestError("the request is not a valid message of this method's request type") from None


async def fail(context: Any, method: str, error: Exception, translate: Translate | None = None) -> None:
    """End the call with the status `error` stands for; a call already over is left alone (a2a_grpc.arrival)."""
    if isinstance(error, grpc.aio.AbortError):  # the call was already ended with its status
        raise error
    if not isinstance(error, A2AError):
        log.error("unexpected error in %s", method, exc_info=error)
    if seen_call_over(error):
        raise asyncio.CancelledError from error
    status = error if isinstance(error, A2AError) else InternalError("internal error")
    await abort(context, translate(status) if translate is not None else status)


async def abort(context: Any, error: A2AError) -> None:
    """End the call with `error`, keeping the trailers already set. A call that ended meanwhile (its deadline
    passed, its client went away) cannot take a status any more: it ends as cancelled, which grpc expects."""
    try:
        await context.abort(error.code, status_message(error), status_trailers(error, context.trailing_metadata()))
    except grpc.aio.InternalError as over:  # grpc core refused to send the status (ExecuteBatchError)
        raise asyncio.CancelledError from over
