"""One chain for the three bindings: every check the interceptor chain makes (authentication, the version,
the extensions, the tenant, the limits, and their order) gives the same outcome over gRPC, JSON-RPC and
HTTP+JSON, since the HTTP faces hand each call to the chain's own handlers (a2a_grpc.faces)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from agents import PacedAgent
from conftest import BASE_CARD, StartServer, user_message
from http_faces import BINDINGS, Callers, Headers

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.auth import AuthSettings
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.telemetry import ACCESS_LOGGER

REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
TEST_SECONDS = 20


def interface(tenant: str) -> dict[str, str]:
    return {"url": "127.0.0.1:0", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": tenant}


CARD: dict[str, Any] = {
    **BASE_CARD,
    "supportedInterfaces": [interface("acme")],
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [{"uri": REQUIRED, "required": True}, {"uri": OPTIONAL}],
    },
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}
TOKENS = {"t": "alice", **{f"t-{binding}": f"caller-{binding}" for binding in BINDINGS}}
GOOD: Headers = (("a2a-version", "1.0"), ("authorization", "Bearer t"), ("a2a-extensions", REQUIRED))


def without(headers: Headers, name: str) -> Headers:
    return tuple((key, value) for key, value in headers if key != name)


def replaced(headers: Headers, name: str, value: str) -> Headers:
    return (*without(headers, name), (name, value))


def send(tenant: str = "acme", **message: Any) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(tenant=tenant, message=user_message("hi", **message))


# (case, headers, request) -> the ErrorInfo reason every binding refuses it with ("" accepted)
CASES: list[tuple[str, Headers, a2a_pb2.SendMessageRequest, str]] = [
    ("accepted", GOOD, send(), ""),
    ("no credential", without(GOOD, "authorization"), send(), "UNAUTHENTICATED"),
    ("a wrong token", replaced(GOOD, "authorization", "Bearer nope"), send(), "UNAUTHENTICATED"),
    ("no version", without(GOOD, "a2a-version"), send(), "VERSION_NOT_SUPPORTED"),
    ("another version", replaced(GOOD, "a2a-version", "2.0"), send(), "VERSION_NOT_SUPPORTED"),
    ("no required extension", without(GOOD, "a2a-extensions"), send(), "EXTENSION_SUPPORT_REQUIRED"),
    ("only the optional one", replaced(GOOD, "a2a-extensions", OPTIONAL), send(), "EXTENSION_SUPPORT_REQUIRED"),
    ("too many extensions", replaced(GOOD, "a2a-extensions", "a,b,c,d"), send(), "INVALID_PARAMS"),
    ("a tenant the card lacks", GOOD, send(tenant="initech"), "INVALID_PARAMS"),
    ("no tenant", GOOD, send(tenant=""), "INVALID_PARAMS"),
    (
        "authentication before the version",
        without(without(GOOD, "authorization"), "a2a-version"),
        send(),
        "UNAUTHENTICATED",
    ),
    (
        "the version before the extensions",
        without(without(GOOD, "a2a-version"), "a2a-extensions"),
        send(),
        "VERSION_NOT_SUPPORTED",
    ),
    (
        "the extensions before the tenant",
        without(GOOD, "a2a-extensions"),
        send(tenant="initech"),
        "EXTENSION_SUPPORT_REQUIRED",
    ),
    ("a validation error", GOOD, a2a_pb2.SendMessageRequest(tenant="acme"), "INVALID_PARAMS"),
    ("an unknown task", GOOD, send(task_id="no-such-task"), "TASK_NOT_FOUND"),
]
SPEC_CODES = {"VERSION_NOT_SUPPORTED": -32009, "EXTENSION_SUPPORT_REQUIRED": -32008, "TASK_NOT_FOUND": -32001}


@pytest.fixture
async def callers(start_server: StartServer) -> AsyncIterator[Callers]:
    server = await start_server(card=CARD, bearer_tokens=TOKENS, max_extensions_per_call=3, max_streams_per_caller=1)
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield Callers(server, session, channel)


@pytest.mark.parametrize(("case", "headers", "request_", "reason"), CASES, ids=[case[0] for case in CASES])
async def test_each_check_gives_the_same_outcome_on_the_three_bindings(
    callers: Callers, case: str, headers: Headers, request_: a2a_pb2.SendMessageRequest, reason: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        outcomes = {binding: await callers.call(binding, "SendMessage", request_, headers) for binding in BINDINGS}
    assert {binding: outcome.reason for binding, outcome in outcomes.items()} == dict.fromkeys(BINDINGS, reason)
    assert outcomes["http+json"].status == outcomes["grpc"].status, "HTTP+JSON names the gRPC code"
    if reason in SPEC_CODES:
        assert outcomes["jsonrpc"].jsonrpc_code == SPEC_CODES[reason]
    if reason == "INVALID_PARAMS":
        assert outcomes["jsonrpc"].jsonrpc_code == -32602
    if reason == "UNAUTHENTICATED":
        assert (outcomes["jsonrpc"].http_status, outcomes["http+json"].http_status) == (401, 401)
    if not reason:
        for outcome in outcomes.values():
            assert outcome.answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert outcome.headers["a2a-extensions"] == REQUIRED, "the activated extensions are echoed"


async def test_an_sse_stream_holds_a_stream_slot_counted_with_the_grpc_streams(start_server: StartServer) -> None:
    """With one stream per caller, a caller's open gRPC stream refuses its SSE stream and the other way round."""
    agent = PacedAgent()
    server = await start_server(card=CARD, bearer_tokens=TOKENS, agent=agent, max_streams_per_caller=1)
    async with (
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
    ):
        callers = Callers(server, session, channel)
        working = a2a_pb2.SendMessageRequest(
            tenant="acme",
            message=user_message("work"),
            configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True),
        )
        created = await callers.stub.SendMessage(working, metadata=GOOD)
        subscribe = a2a_pb2.SubscribeToTaskRequest(tenant="acme", id=created.task.id)
        held = callers.stub.SubscribeToTask(subscribe, metadata=GOOD)
        await held.read()  # the task's snapshot: the stream is open and holds alice's slot
        for binding in ("jsonrpc", "http+json"):
            refused = await callers.call(binding, "SubscribeToTask", subscribe, GOOD)
            assert refused.reason == "TOO_MANY_STREAMS", binding
        # another caller over HTTP+JSON: its SSE stream holds its slot, and refuses its gRPC stream
        bob = replaced(GOOD, "authorization", "Bearer t-http+json")
        bobs = await callers.stub.SendMessage(working, metadata=bob)
        async with session.get(f"{callers.base}/acme/tasks/{bobs.task.id}:subscribe", headers=bob) as sse:
            assert sse.content_type == "text/event-stream"
            assert (await sse.content.readline()).startswith(b"data: ")
            bobs_subscribe = a2a_pb2.SubscribeToTaskRequest(tenant="acme", id=bobs.task.id)
            refused = await callers.call("grpc", "SubscribeToTask", bobs_subscribe, bob)
            assert refused.reason == "TOO_MANY_STREAMS"
        held.cancel()
        agent.finish()


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        while True:
            if condition():
                return
            await asyncio.sleep(0.005)


async def test_an_sse_client_that_goes_away_gives_back_its_stream_slot_and_leaves_the_task_running(
    start_server: StartServer,
) -> None:
    agent = PacedAgent()
    server = await start_server(card=CARD, bearer_tokens=TOKENS, agent=agent)
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        callers = Callers(server, session, channel)
        working = a2a_pb2.SendMessageRequest(
            tenant="acme",
            message=user_message("work"),
            configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True),
        )
        created = await callers.stub.SendMessage(working, metadata=GOOD)
        for path in (f"/acme/tasks/{created.task.id}:subscribe", "/acme/message:stream"):
            verb = "GET" if path.endswith(":subscribe") else "POST"
            body = (
                None
                if verb == "GET"
                else {"message": {"messageId": "s", "role": "ROLE_USER", "parts": [{"text": "s"}]}}
            )
            reply = await session.request(verb, callers.base + path, json=body, headers=GOOD)
            assert (await reply.content.readline()).startswith(b"data: ")
            assert server.limits.open_streams == 1
            reply.close()  # the client goes away mid-stream
            await until(lambda: server.limits.open_streams == 0)
        task = await callers.stub.GetTask(a2a_pb2.GetTaskRequest(tenant="acme", id=created.task.id), metadata=GOOD)
        assert task.status.state == a2a_pb2.TASK_STATE_WORKING, "a client going away never cancels the task"
        agent.finish()


async def test_the_access_log_names_the_binding_and_the_caller_as_grpc_does(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    server = await start_server(card=CARD, bearer_tokens=TOKENS, access_log=True)
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        callers = Callers(server, session, channel)
        for binding in BINDINGS:
            assert not (await callers.call(binding, "SendMessage", send(), GOOD)).reason
    lines = [record.getMessage() for record in caplog.records if record.name == ACCESS_LOGGER]
    assert len(lines) == 3, lines
    for line, name in zip(lines, ("SendMessage", "jsonrpc/SendMessage", "http+json/SendMessage"), strict=True):
        assert f"method={name} " in line and "principal=alice" in line and "peer=ipv4:127.0.0.1:" in line, line


API_KEY_CARD: dict[str, Any] = {
    **BASE_CARD,
    "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key"}}},
    "securityRequirements": [{"schemes": {"key": {}}}],
}


@pytest.mark.parametrize(
    ("case", "key", "reason"),
    [("the key", "k-123", ""), ("another key", "k-999", "UNAUTHENTICATED"), ("no key", None, "UNAUTHENTICATED")],
)
async def test_an_api_key_admits_or_refuses_alike_on_the_three_bindings(
    start_server: StartServer, tmp_path: Path, case: str, key: str | None, reason: str
) -> None:
    keys = tmp_path / "api-keys"
    keys.write_text("k-123=key-holder\n")
    server = await start_server(card=API_KEY_CARD, auth=AuthSettings(api_keys=str(keys)))
    headers: Headers = (("a2a-version", "1.0"), *((("x-api-key", key),) if key is not None else ()))
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        callers = Callers(server, session, channel)
        outcomes = {
            binding: await callers.call(binding, "SendMessage", send(tenant=""), headers) for binding in BINDINGS
        }
    assert {binding: outcome.reason for binding, outcome in outcomes.items()} == dict.fromkeys(BINDINGS, reason), case


class Refuser(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A user's interceptor: refuses a unary call that carries `x-refuse: yes`, as a grpc.aio interceptor does."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if ("x-refuse", "yes") not in tuple(details.invocation_metadata or ()) or handler.unary_unary is None:
            return handler

        async def refuse(request: Any, context: Any) -> Any:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "refused by the user's interceptor")

        return grpc.unary_unary_rpc_method_handler(refuse, handler.request_deserializer, handler.response_serializer)


@pytest.mark.parametrize(("refuse", "reason"), [("yes", "PERMISSION_DENIED"), ("no", "")])
async def test_a_users_interceptor_sees_and_refuses_http_calls_as_grpc_ones(
    tmp_path: Path, refuse: str, reason: str
) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", card_path=str(card), store_url="memory")
    server = A2AServer(settings, interceptors=[Refuser()])
    await server.start()
    try:
        headers: Headers = (("a2a-version", "1.0"), ("x-refuse", refuse))
        async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
            callers = Callers(server, session, channel)
            outcomes = {b: await callers.call(b, "SendMessage", send(tenant=""), headers) for b in BINDINGS}
    finally:
        await server.stop(0)
    assert {binding: outcome.reason for binding, outcome in outcomes.items()} == dict.fromkeys(BINDINGS, reason)


class FloodAgent:
    """WORKING, then CHUNKS artifacts of 64 KiB each (more than loopback's socket buffers hold), then COMPLETED."""

    CHUNKS = 160

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working("flooding")
        for index in range(self.CHUNKS):
            await events.artifact(text="x" * 65536, artifact_id=f"{context.task_id}-{index}", last_chunk=True)
        await events.complete("done")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled("stopped")


async def test_an_sse_client_that_stops_reading_is_cut_off_and_gives_back_its_stream_slot_and_connection(
    start_server: StartServer,
) -> None:
    """The connection is aborted, not closed: asyncio keeps a socket whose send buffer is full open for ever."""
    server = await start_server(agent=FloodAgent(), http_head_seconds=0.5)
    guard = server._parts.http_port.guard if server._parts.http_port is not None else None
    assert guard is not None
    request = json.dumps({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "go"}]}}).encode()
    head = (
        f"POST /message:stream HTTP/1.1\r\nHost: {server.http_target}\r\nA2A-Version: 1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(request)}\r\n\r\n"
    ).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    host, port = server.http_target.rsplit(":", 1)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, int(port)))
    try:
        await loop.sock_sendall(sock, head + request)
        await until(lambda: server.limits.open_streams == 1)
        assert guard.open == 1
        await until(lambda: server.limits.open_streams == 0)  # cut off, never having read a byte
        await until(lambda: guard.open == 0)  # and its connection with it
    finally:
        sock.close()


async def test_a_callers_request_rate_is_one_budget_over_the_three_bindings(start_server: StartServer) -> None:
    server = await start_server(card=CARD, bearer_tokens=TOKENS, max_requests_per_second=0.01)  # one, then none
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        callers = Callers(server, session, channel)
        assert not (await callers.call("grpc", "SendMessage", send(), GOOD)).reason, "alice's one request"
        rest = await callers.call("http+json", "SendMessage", send(), GOOD)
        jsonrpc = await callers.call("jsonrpc", "SendMessage", send(), GOOD)
        bob = replaced(GOOD, "authorization", "Bearer t-jsonrpc")
        assert not (await callers.call("http+json", "SendMessage", send(), bob)).reason, "another caller's budget"
        assert (await callers.call("grpc", "SendMessage", send(), bob)).reason == "RATE_LIMITED"
    assert (rest.reason, rest.http_status, rest.headers["retry-after"]) == ("RATE_LIMITED", 429, "100")
    assert (jsonrpc.reason, jsonrpc.jsonrpc_code) == ("RATE_LIMITED", -32000)
