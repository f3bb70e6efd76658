"""The outermost layer of every HTTP face route: whatever escapes a face is logged and answered as INTERNAL
with a generic message, in the binding's own error form; never a stack trace in a body."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from a2a_grpc.errors import InternalError
from a2a_grpc.faces.errors import Refusal

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = Callable[[Refusal], web.StreamResponse]  # a refusal in the binding's form


def guarded(name: str, handle: Handler, answer: Answer) -> Handler:
    async def guarded_handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handle(request)
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as error:
            log.error("unexpected error in %s", name, exc_info=error)
            return answer(Refusal.of_error(InternalError("internal error")))

    return guarded_handle
