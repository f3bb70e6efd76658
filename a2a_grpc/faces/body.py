"""Reading an HTTP request's body for a face: bounded in size and in time, JSON only.

A body larger than the gRPC port's largest message is refused (413) as it arrives, and one that is not all
there within `read_seconds` (a client trickling it) ends the request, as the card port bounds a request's
head (a2a_grpc.http_guard). Refused here, before the chain: the transport's own limits, as grpc core
refuses an oversized message before any interceptor runs.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from a2a_grpc.errors import A2AError, InvalidRequestError, ResourceExhaustedError


class BodyRefused(Exception):
    """The body cannot be read as a request: `error` says why, `status` is the HTTP status to answer with."""

    def __init__(self, error: A2AError, status: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.status = status


async def read_json(request: web.Request, max_bytes: int, read_seconds: float) -> Any:
    """The body's JSON (None for an empty body); BodyRefused when it is too large, too slow, not JSON, or not
    sent as JSON."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise BodyRefused(_too_large(max_bytes), 413)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(read_seconds):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > max_bytes:
                    raise BodyRefused(_too_large(max_bytes), 413)
                chunks.append(chunk)
    except TimeoutError:
        raise BodyRefused(
            InvalidRequestError(f"the request body did not arrive within {read_seconds:g}s"), 408
        ) from None
    if not chunks:
        return None
    content_type = request.content_type
    if "json" not in content_type and content_type != "application/octet-stream":
        refusal = InvalidRequestError(f"send the request body as application/json, not {content_type[:60]}")
        raise BodyRefused(refusal, 415)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        raise BodyRefused(InvalidRequestError("the request body is not valid JSON"), 400) from None


def _too_large(max_bytes: int) -> ResourceExhaustedError:
    return ResourceExhaustedError(f"the request body is larger than {max_bytes:,} bytes")
