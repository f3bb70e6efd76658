"""The JSON-RPC 2.0 binding (spec §9): one POST endpoint, methods named as the gRPC service names them.

`params` is the method's request message in ProtoJSON; `result` its response message; the streaming
methods answer SSE whose `data:` lines are JSON-RPC responses (§9.4.2). Every call goes through the chain
(a2a_grpc.faces.invoke), so its refusal is the status of the error table, as a JSON-RPC error object
(a2a_grpc.faces.errors). Malformed input gets JSON-RPC's own codes: -32700 for a body that is not JSON,
-32600 for one that is not a request object, -32601 for a method the service does not have, -32602 for
params that are not the method's request; each once the caller is admitted (authentication, its request
budget), as gRPC admits a call to a method it does not serve, so that an unauthenticated caller learns nothing
and a flood of malformed requests is throttled. A batch (JSON-RPC 2.0 §6) of unary calls answers an array, each
call through the chain on its own; a streaming method in a batch is -32600, a batch of more than
MAX_BATCH calls or none is one -32600 error. A notification (no `id`) is served and answered with nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web
from google.protobuf import json_format

from a2a_grpc.arrival import Arrival
from a2a_grpc.errors import A2AError, InvalidRequestError
from a2a_grpc.faces.body import BodyRefused, read_json
from a2a_grpc.faces.call import HttpCall
from a2a_grpc.faces.errors import (
    INVALID_REQUEST,
    JSONRPC_HTTP_STATUS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Refusal,
)
from a2a_grpc.faces.invoke import FaceMethod, Refused, arrived_call
from a2a_grpc.faces.sse import data_event, send_events
from a2a_grpc.interceptors.server.unknown import AdmitCaller

MAX_BATCH = 20
CONTENT_TYPE = "application/json"
_NO_ID = object()  # a notification's id: it is answered with nothing


class JsonRpcFace:
    """The JSON-RPC endpoint over `methods` (the chain's handlers, by method name)."""

    def __init__(
        self, methods: Mapping[str, FaceMethod], admit_caller: AdmitCaller, *, max_body_bytes: int, io_seconds: float
    ) -> None:
        self._methods = methods
        self._admit_caller = admit_caller
        self._max_body_bytes = max_body_bytes
        self._io_seconds = io_seconds

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrived = arrived_call(request)  # what the chain reads of the caller, read as the request arrives
        try:
            document = await read_json(request, self._max_body_bytes, self._io_seconds)
        except BodyRefused as refused:
            if refused.status == 400:  # not JSON: JSON-RPC's parse error, answered as any JSON-RPC error
                return _response(_error(None, PARSE_ERROR, refused.error.message))
            return _response(_error(None, INVALID_REQUEST, refused.error.message), status=refused.status)
        if isinstance(document, list):
            return await self._batch(arrived, document)
        if not isinstance(document, dict):
            message = "the request must be a JSON-RPC 2.0 request object"
            return await self._malformed(arrived, _error(None, INVALID_REQUEST, message))
        checked = _checked(document, self._methods)
        if isinstance(checked, dict):
            return await self._malformed(arrived, checked)
        request_id, method = checked
        call = arrived.fresh()
        parsed = method.request(document.get("params", {}))
        del document  # its Python objects (~15x the body) are not kept for a stream or a blocking call
        try:
            if method.streaming:
                first, events = await method.stream(parsed, call)
                answer_id = None if request_id is _NO_ID else request_id
                return await send_events(
                    request,
                    call,
                    method,
                    first,
                    events,
                    lambda event: _result(answer_id, json_format.MessageToDict(event)),
                    lambda refusal: data_event(_refusal(answer_id, refusal)),
                    self._io_seconds,
                )
            response = await method.unary(parsed, call)
        except Refused as refused:
            status = JSONRPC_HTTP_STATUS.get(refused.refusal.code, 200)
            answer = _refusal(request_id, refused.refusal) if request_id is not _NO_ID else None
            return _response(answer, call.response_headers(), status, refused.refusal.headers)
        if request_id is _NO_ID:
            return _response(None, call.response_headers())
        return _response(_result(request_id, json_format.MessageToDict(response)), call.response_headers())

    @staticmethod
    def internal_error(refusal: Refusal) -> web.Response:
        """What answers a request that failed unexpectedly (its id unknown by then)."""
        return _response(_refusal(None, refusal))

    async def _malformed(self, call: HttpCall, answer: dict[str, Any]) -> web.Response:
        """`answer` (the error a malformed request gets) once its caller is admitted; else the caller's refusal."""
        refusal = await self._admission(call)
        if refusal is None:
            return _response(answer)
        status = JSONRPC_HTTP_STATUS.get(refusal.code, 200)
        return _response(_refusal(answer["id"], refusal), status=status, extra=refusal.headers)

    async def _admission(self, call: HttpCall) -> Refusal | None:
        """None when the caller passes what every call passes first (authentication, its request budget: the
        chain's `admit_caller`, as gRPC's unknown methods do), else the refusal."""
        try:
            await self._admit_caller(Arrival.of(call), call)
        except A2AError as error:
            return Refusal.of_error(error)
        return None

    async def _batch(self, arrived: HttpCall, entries: list[Any]) -> web.Response:
        if not entries or len(entries) > MAX_BATCH:
            message = f"a batch holds from 1 to {MAX_BATCH} requests"
            return await self._malformed(arrived, _error(None, INVALID_REQUEST, message))
        answers: list[dict[str, Any]] = []
        headers: dict[str, str] = {}
        for entry in entries:
            answer = await self._batched(arrived.fresh(), entry, headers)
            if answer is not None:
                answers.append(answer)
        return _response(answers or None, list(headers.items()))

    async def _batched(self, call: HttpCall, entry: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        if not isinstance(entry, dict):
            message = "each request of a batch must be a JSON-RPC 2.0 request object"
            return await self._malformed_entry(call, _error(None, INVALID_REQUEST, message))
        checked = _checked(entry, self._methods)
        if isinstance(checked, dict):
            return await self._malformed_entry(call, checked)
        request_id, method = checked
        answer_id = None if request_id is _NO_ID else request_id
        if method.streaming:
            message = f"{method.name} streams its answer: call it on its own"
            return await self._malformed_entry(call, _error(answer_id, INVALID_REQUEST, message))
        try:
            response = await method.unary(method.request(entry.get("params", {})), call)
            answer = _result(answer_id, json_format.MessageToDict(response))
        except Refused as refused:
            answer = _refusal(answer_id, refused.refusal)
        headers.update(call.response_headers())
        return None if request_id is _NO_ID else answer

    async def _malformed_entry(self, call: HttpCall, answer: dict[str, Any]) -> dict[str, Any]:
        refusal = await self._admission(call)
        return answer if refusal is None else _refusal(answer["id"], refusal)


def _checked(document: dict[str, Any], methods: Mapping[str, FaceMethod]) -> tuple[Any, FaceMethod] | dict[str, Any]:
    """The request's id and method, or the error object that answers it."""
    request_id = document.get("id", _NO_ID)
    answer_id = None if request_id is _NO_ID else request_id
    if request_id is not _NO_ID and (isinstance(request_id, bool) or not isinstance(request_id, str | int | None)):
        return _error(None, INVALID_REQUEST, "the id must be a string, a number or null")
    if document.get("jsonrpc") != "2.0":
        return _error(answer_id, INVALID_REQUEST, 'the request must carry "jsonrpc": "2.0"')
    name = document.get("method")
    if not isinstance(name, str):
        return _error(answer_id, INVALID_REQUEST, "the request must name its method")
    method = methods.get(name)
    if method is None:
        return _error(answer_id, METHOD_NOT_FOUND, f"no method {name[:100]!r}; the methods are {', '.join(methods)}")
    if "params" in document and not isinstance(document["params"], dict):
        return _refusal(answer_id, Refusal.of_error(InvalidRequestError("params must be a JSON object")))
    return request_id, method


def _result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _refusal(request_id: Any, refusal: Refusal) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": refusal.jsonrpc_error()}


def _response(
    document: Any,
    headers: list[tuple[str, str]] | None = None,
    status: int = 200,
    extra: Mapping[str, str] | None = None,
) -> web.Response:
    if document is None:  # notifications only: nothing to answer
        response = web.Response(status=204)
    else:
        response = web.json_response(document, status=status, content_type=CONTENT_TYPE)
    response.headers.extend(headers or [])
    response.headers.update(extra or {})
    return response
