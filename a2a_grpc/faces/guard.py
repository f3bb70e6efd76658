"""The outermost layer of every HTTP face route: whatever escapes a face is logged and answered as INTERNAL
with a generic message, in the binding's own error form; never a stack trace in a body. Before the face, the
request's headers are held to the gRPC port's bound on request metadata, measured as grpc measures it
(a2a_grpc.faces.call.header_list_size): larger ones are refused with 431 and RESOURCE_EXHAUSTED, as grpc core
refuses them before any interceptor runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from a2a_grpc.errors import InternalError, ResourceExhaustedError
from a2a_grpc.faces.call import header_list_size
from a2a_grpc.faces.errors import Refusal

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = Callable[[Refusal], web.StreamResponse]  # a refusal in the binding's form
MAX_HEADER_BYTES = web.AppKey("max_header_bytes", int)  # set by the HTTP port: its bound on a request's headers
HEADERS_TOO_LARGE = 431


def guarded(name: str, handle: Handler, answer: Answer) -> Handler:
    async def guarded_handle(request: web.Request) -> web.StreamResponse:
        max_bytes = request.app[MAX_HEADER_BYTES]
        if header_list_size(request) > max_bytes:
            error = ResourceExhaustedError(f"the request headers are larger than {max_bytes:,} bytes")
            response = answer(Refusal.of_error(error, HEADERS_TOO_LARGE))
            response.set_status(HEADERS_TOO_LARGE)  # JSON-RPC's answer too: a transport's refusal, as a body's 413
            return response
        try:
            return await handle(request)
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as error:
            log.error("unexpected error in %s", name, exc_info=error)
            return answer(Refusal.of_error(InternalError("internal error")))

    return guarded_handle
