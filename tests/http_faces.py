"""Calling one A2A method over each binding the server serves, with a plain client of each (grpc.aio stubs,
aiohttp), and reading every outcome in one form: the ErrorInfo reason it was refused with ("" when accepted),
the gRPC code name (HTTP+JSON's `status`; JSON-RPC's answer carries none), the answer as ProtoJSON data, and
the response headers. The REST paths are written out here from the spec's list (§11.3), not read from the
server's route table, so a route the server lacks fails the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.errors import STATUS_DETAILS_KEY
from a2a_grpc.generated import a2a_pb2_grpc
from a2a_grpc.server import A2AServer

Headers = tuple[tuple[str, str], ...]
STREAMS = {"SendStreamingMessage", "SubscribeToTask"}
BINDINGS = ("grpc", "jsonrpc", "http+json")


@dataclass
class Outcome:
    reason: str  # the ErrorInfo reason of a refusal; "" when the call was accepted
    status: str = "OK"  # the gRPC code name (None-like "" where the binding does not carry it)
    answer: Any = None  # ProtoJSON: the response, or a stream's events
    headers: dict[str, str] = field(default_factory=dict)
    jsonrpc_code: int | None = None
    http_status: int = 200


def _path(method: str, request: Message) -> tuple[str, str]:
    """(HTTP verb, path) of `method` per the spec's HTTP+JSON binding (§11.3), under /{tenant} when it has one."""
    fields: dict[str, Any] = json_format.MessageToDict(request, preserving_proto_field_name=True)
    task_id = quote(str(fields.get("task_id", "")), safe="")
    ident = quote(str(fields.get("id", "")), safe="")
    verb, path = {
        "SendMessage": ("POST", "/message:send"),
        "SendStreamingMessage": ("POST", "/message:stream"),
        "GetTask": ("GET", f"/tasks/{ident}"),
        "ListTasks": ("GET", "/tasks"),
        "CancelTask": ("POST", f"/tasks/{ident}:cancel"),
        "SubscribeToTask": ("GET", f"/tasks/{ident}:subscribe"),
        "CreateTaskPushNotificationConfig": ("POST", f"/tasks/{task_id}/pushNotificationConfigs"),
        "GetTaskPushNotificationConfig": ("GET", f"/tasks/{task_id}/pushNotificationConfigs/{ident}"),
        "ListTaskPushNotificationConfigs": ("GET", f"/tasks/{task_id}/pushNotificationConfigs"),
        "DeleteTaskPushNotificationConfig": ("DELETE", f"/tasks/{task_id}/pushNotificationConfigs/{ident}"),
        "GetExtendedAgentCard": ("GET", "/extendedAgentCard"),
    }[method]
    tenant = fields.get("tenant")
    return verb, (f"/{quote(tenant, safe='')}{path}" if tenant else path)


def _query(method: str, request: Message) -> dict[str, str]:
    """A GET's or DELETE's other fields as query parameters (camelCase, §11.5)."""
    document = json_format.MessageToDict(request)
    for in_path in ("id", "taskId", "tenant"):
        document.pop(in_path, None)
    return {name: json.dumps(value) if isinstance(value, bool) else str(value) for name, value in document.items()}


class Callers:
    """One server's three bindings, each with its own client."""

    def __init__(self, server: A2AServer, session: aiohttp.ClientSession, channel: grpc.aio.Channel) -> None:
        self.base = f"http://{server.http_target}"
        self.session = session
        self.stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]

    async def call(self, binding: str, method: str, request: Message, headers: Headers) -> Outcome:
        if binding == "grpc":
            return await self.grpc(method, request, headers)
        if binding == "jsonrpc":
            return await self.jsonrpc(method, request, headers)
        return await self.rest(method, request, headers)

    async def grpc(self, method: str, request: Message, headers: Headers) -> Outcome:
        call = getattr(self.stub, method)(request, metadata=headers)
        try:
            if method in STREAMS:
                answer: Any = [json_format.MessageToDict(event) async for event in call]
            else:
                answer = json_format.MessageToDict(await call)
            sent = [*(await call.initial_metadata() or ()), *(await call.trailing_metadata() or ())]
        except grpc.aio.AioRpcError as error:
            return Outcome(_grpc_reason(error), error.code().name, headers=_grpc_headers(error))
        return Outcome("", answer=answer, headers={key: value for key, value in sent if isinstance(value, str)})

    async def rest(self, method: str, request: Message, headers: Headers) -> Outcome:
        verb, path = _path(method, request)
        body = json_format.MessageToDict(request) if verb == "POST" else None
        query = _query(method, request) if verb != "POST" else None
        async with self.session.request(verb, self.base + path, json=body, params=query, headers=headers) as reply:
            text = await reply.text()
            sent = {key.lower(): value for key, value in reply.headers.items()}
            if reply.content_type == "text/event-stream":
                events = sse_events(text)
                if events and events[-1][0] == "error":  # the stream began, then ended with this error
                    error = events[-1][1]["error"]
                    answer = [document for _, document in events[:-1]]
                    return Outcome(_reason(error["details"]), error["status"], answer, sent, http_status=error["code"])
                return Outcome("", answer=[document for _, document in events], headers=sent)
            document = json.loads(text)
            if reply.status != 200:
                error = document["error"]
                assert error["code"] == reply.status, document
                return Outcome(_reason(error["details"]), error["status"], headers=sent, http_status=reply.status)
            return Outcome("", answer=document, headers=sent)

    async def jsonrpc(self, method: str, request: Message, headers: Headers, request_id: Any = 1) -> Outcome:
        envelope = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": json_format.MessageToDict(request)}
        async with self.session.post(self.base + "/", json=envelope, headers=headers) as reply:
            text = await reply.text()
            sent = {key.lower(): value for key, value in reply.headers.items()}
            answers = sse_documents(text) if reply.content_type == "text/event-stream" else [json.loads(text)]
        for answer in answers:
            assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id, answer
        if "error" in answers[-1]:
            error = answers[-1]["error"]
            reason = _reason(error.get("data", []))
            return Outcome(reason, "", headers=sent, jsonrpc_code=error["code"], http_status=reply.status)
        results = [answer["result"] for answer in answers]
        return Outcome("", answer=results if method in STREAMS else results[0], headers=sent)


def sse_events(text: str) -> list[tuple[str, Any]]:
    """Each SSE event of a body: its `event:` name ("message" when it has none) and the JSON of its `data:`."""
    events: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        lines = block.splitlines()
        name = next((line[len("event:") :].strip() for line in lines if line.startswith("event:")), "message")
        data = [line[len("data:") :] for line in lines if line.startswith("data:")]
        if data:
            events.append((name, json.loads("\n".join(data))))
    return events


def sse_documents(text: str) -> list[Any]:
    """The JSON of each `data:` line of an SSE body (an `event: error` one as it is)."""
    return [json.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")]


def _reason(details: list[dict[str, Any]]) -> str:
    return next((str(d["reason"]) for d in details if d["@type"].endswith("google.rpc.ErrorInfo")), "?")


def _grpc_reason(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            for detail in status_pb2.Status.FromString(value).details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return str(info.reason)
    return "?"


def _grpc_headers(error: grpc.aio.AioRpcError) -> dict[str, str]:
    return {key: value for key, value in error.trailing_metadata() or () if isinstance(value, str)}
