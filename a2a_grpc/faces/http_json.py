"""The HTTP+JSON binding (spec §11): the A2A service's `google.api.http` routes, ProtoJSON in and out.

Each route (a2a_grpc.faces.routes) parses its request from the body (`body: "*"`) or the query, fills the
path's fields (the task id, the tenant), and calls the method through the chain (a2a_grpc.faces.invoke).
A unary answer is the response message in ProtoJSON; a stream is SSE of StreamResponse messages. A refusal
is the HTTP status of its gRPC code with the `google.rpc.Status`-shaped body of §11.6; the extension echo
and the chain's other response headers travel as HTTP response headers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from a2a_grpc.errors import InvalidRequestError
from a2a_grpc.faces.body import BodyRefused, read_json
from a2a_grpc.faces.errors import Refusal
from a2a_grpc.faces.guard import guarded
from a2a_grpc.faces.invoke import FaceMethod, Refused, arrived_call, query_document
from a2a_grpc.faces.routes import Route
from a2a_grpc.faces.sse import data_event, send_events

CONTENT_TYPE = "application/a2a+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpJsonFace:
    """The routes of HTTP+JSON over `methods` (the chain's handlers, by method name)."""

    def __init__(self, methods: Mapping[str, FaceMethod], *, max_body_bytes: int, io_seconds: float) -> None:
        self._methods = methods
        self._max_body_bytes = max_body_bytes
        self._io_seconds = io_seconds

    def add_routes(self, app: web.Application, routes: list[Route]) -> None:
        for route in routes:
            name = f"http+json/{route.method.name}"
            app.router.add_route(route.verb, route.path, guarded(name, self.handler(route), refusal_response))

    def handler(self, route: Route) -> Handler:
        method = self._methods[route.method.name]
        fields = route.fields

        async def handle(request: web.Request) -> web.StreamResponse:
            call = arrived_call(request)  # what the chain reads of the caller, read as the request arrives
            try:
                parsed = await self._request(request, route, method)
            except BodyRefused as refused:
                return refusal_response(Refusal.of_error(refused.error, refused.status))
            if isinstance(parsed, Message):
                match = request.match_info
                for field in fields:
                    setattr(parsed, field, match[field])
            try:
                if method.streaming:
                    first, events = await method.stream(parsed, call)
                    return await send_events(
                        request, call, method, first, events, _document, _error_event, self._io_seconds
                    )
                response = await method.unary(parsed, call)
            except Refused as refused:
                return refusal_response(refused.refusal, call.response_headers())
            return json_response(json_format.MessageToDict(response), call.response_headers())

        return handle

    async def _request(self, request: web.Request, route: Route, method: FaceMethod) -> Message | InvalidRequestError:
        if route.body:
            document = await read_json(request, self._max_body_bytes, self._io_seconds)
            return method.request({} if document is None else document)
        values: dict[str, list[str]] = {}
        for name, value in request.query.items():
            values.setdefault(name, []).append(value)
        document = query_document(method.request_class, values)
        return document if isinstance(document, InvalidRequestError) else method.request(document)


def _document(event: Message) -> Any:
    return json_format.MessageToDict(event)


def _error_event(refusal: Refusal) -> bytes:
    return b"event: error\n" + data_event(refusal.rest_body())


def json_response(document: Any, headers: list[tuple[str, str]], status: int = 200) -> web.Response:
    response = web.json_response(document, status=status, content_type=CONTENT_TYPE)
    response.headers.extend(headers)
    return response


def refusal_response(refusal: Refusal, headers: list[tuple[str, str]] | None = None) -> web.Response:
    response = json_response(refusal.rest_body(), headers or [], refusal.http_status)
    response.headers.update(refusal.headers)
    return response
