"""SendMessage over the HTTP bindings for the load generator: JSON-RPC and HTTP+JSON senders with a stub's shape.

A send job's server whose face is JSONRPC or HTTP_JSON is driven over HTTP/1.1 with aiohttp, on keep-alive
connections, one per caller. A sender is
called as a stub's SendMessage is (`request, metadata=, timeout=`) and answers an object whose
`task.status.state` is the task's state, so one closed loop (loadgen.send_job) drives every kind of server. The
request's JSON is made once per caller; each call sets its message id in it. A call that fails is an
HttpCallError, a grpc.RpcError as the loop expects.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import grpc
from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2

JSONRPC = "jsonrpc"
HTTP_JSON = "http+json"
HTTP_FACES = (JSONRPC, HTTP_JSON)
_ID = "a2a-grpc-bench-message-id"  # replaced by each call's message id


class HttpCallError(grpc.RpcError):  # type: ignore[misc]
    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self.description


class HttpSender:
    """`SendMessage` of one binding at `base_url`, over `session`."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, face: str) -> None:
        self._session = session
        self._url = base_url + ("/" if face == JSONRPC else "/message:send")
        self._face = face
        self._bodies: dict[int, tuple[str, str]] = {}  # id(request) -> the JSON around its message id

    def _body(self, request: a2a_pb2.SendMessageRequest) -> tuple[str, str]:
        known = self._bodies.get(id(request))
        if known is None:
            request.message.message_id = _ID
            document: Any = json_format.MessageToDict(request)
            if self._face == JSONRPC:
                document = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": document}
            head, _, tail = json.dumps(document).partition(_ID)
            known = self._bodies[id(request)] = (head, tail)
        return known

    async def SendMessage(  # a stub's signature: the loop passes its timeout
        self,
        request: a2a_pb2.SendMessageRequest,
        *,
        metadata: Any,
        timeout: float,  # noqa: ASYNC109
    ) -> Any:
        message_id = request.message.message_id
        head, tail = self._body(request)
        body = head + message_id + tail
        headers = {"Content-Type": "application/json", **dict(metadata)}
        try:
            async with self._session.post(
                self._url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as reply:
                answer = await reply.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise HttpCallError(f"{type(error).__name__}: {error}") from None
        request.message.message_id = message_id
        if self._face == JSONRPC:
            if "error" in answer:
                raise HttpCallError(f"JSON-RPC {answer['error'].get('code')}: {answer['error'].get('message')}")
            answer = answer["result"]
        elif reply.status != 200:
            raise HttpCallError(f"HTTP {reply.status}: {answer.get('error', {}).get('message')}")
        state = answer.get("task", {}).get("status", {}).get("state", "TASK_STATE_UNSPECIFIED")
        return SimpleNamespace(task=SimpleNamespace(status=SimpleNamespace(state=a2a_pb2.TaskState.Value(state))))


@contextlib.asynccontextmanager
async def http_senders(target: str, callers: int, face: str) -> AsyncIterator[list[HttpSender]]:
    """A sender to `target` (HOST:PORT) for `callers`: HTTP/1.1 carries one call at a time on a connection, so it
    keeps up to one connection per caller open (where a gRPC channel multiplexes them all)."""
    connector = aiohttp.TCPConnector(limit=callers, limit_per_host=callers)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield [HttpSender(session, f"http://{target}", face)]
