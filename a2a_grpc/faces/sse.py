"""Server-Sent Events: how both HTTP faces send a stream's events (spec §9.4.2, §11.7).

Each event is one `data:` line of JSON and a blank line. The response starts once the chain has admitted the
call and the stream has its first event, so a refusal is still an ordinary error response; an error after
that ends the stream with one more event that carries it (HTTP+JSON: `event: error` and the error body, as
the reference SDK's client reads it; JSON-RPC: a JSON-RPC error response). A client that stops reading is
given `write_seconds` for each event, then its connection is aborted, giving back its stream slot and the
connection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

from aiohttp import web

from a2a_grpc.faces.call import HttpAbort, HttpCall
from a2a_grpc.faces.errors import Refusal
from a2a_grpc.faces.invoke import FaceMethod

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}

Frame = Callable[[Any], Any]  # an event (a StreamResponse message) -> the JSON document its `data:` line carries
ErrorFrame = Callable[[Refusal], bytes]  # a refusal after the stream began -> its whole SSE event


def data_event(document: Any) -> bytes:
    return b"data: " + json.dumps(document, separators=(",", ":")).encode() + b"\n\n"


async def send_events(
    request: web.Request,
    call: HttpCall,
    method: FaceMethod,
    first: Any,
    events: AsyncGenerator[Any, None],
    frame: Frame,
    error_frame: ErrorFrame,
    write_seconds: float,
) -> web.StreamResponse:
    """Send `first` and the rest of `events` as SSE, with the headers the chain sent (the extension echo)."""
    response = web.StreamResponse(headers={**SSE_HEADERS, **dict(call.response_headers())})
    try:
        await response.prepare(request)
        if first is not None:
            await _write(response, data_event(frame(method.event(first))), write_seconds)
            async for event in events:
                await _write(response, data_event(frame(method.event(event))), write_seconds)
    except HttpAbort as abort:
        try:
            await _write(response, error_frame(Refusal.of_abort(abort)), write_seconds)
        except TimeoutError:
            _cut_off(request)
        except ConnectionError:
            pass
    except ConnectionError:  # the client went away
        return response
    except TimeoutError:  # the client stopped reading
        _cut_off(request)
    finally:
        await events.aclose()  # gives back the stream slot, whatever ended the stream
    return response


def _cut_off(request: web.Request) -> None:
    """End a connection whose client stopped reading. Aborted, not closed: asyncio closes a socket only once its
    send buffer has drained, which a client that reads nothing never lets happen, so the connection would stay
    open (and counted by the port's guard) for ever."""
    if request.transport is not None:
        request.transport.abort()


async def _write(response: web.StreamResponse, data: bytes, seconds: float) -> None:
    async with asyncio.timeout(seconds):
        await response.write(data)
