"""The HTTP faces at their edges: what they keep while a stream is open, the settings a library user passes,
the spec's query form of the service parameters, refusals before the chain, and a graceful stop."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from agents import PacedAgent
from conftest import BASE_CARD, StartServer, user_message
from http_faces import BINDINGS, Callers

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings

TEST_SECONDS = 20
V1 = {"A2A-Version": "1.0"}
PADDING = 54_321  # a length no other list in the process has


def message(text: str = "hi") -> dict[str, Any]:
    return {"message": {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}}


async def test_a_jsonrpc_stream_does_not_keep_the_parsed_request_body(start_server: StartServer) -> None:
    agent = PacedAgent()
    server = await start_server(agent=agent)
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message()}
    # a member JSON-RPC ignores, written as text here: as a list it lives only in the server's parsed document
    body = json.dumps(envelope)[:-1] + ', "padding": [' + ",".join("0" * PADDING) + "]}"
    async with asyncio.timeout(TEST_SECONDS), aiohttp.ClientSession() as session:
        headers = {**V1, "Content-Type": "application/json"}
        async with session.post(f"http://{server.http_target}/", data=body, headers=headers) as reply:
            assert (await reply.content.readline()).startswith(b"data: ")  # the stream is open
            gc.collect()
            kept = [o for o in gc.get_objects() if type(o) is list and len(o) == PADDING]
            assert not kept, "the parsed body is kept for the whole stream"
            agent.finish()


def settings_with(tmp_path: Path, bindings: str) -> ServerSettings:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    return ServerSettings(
        listen="127.0.0.1:0", http_listen="127.0.0.1:0", card_path=str(card), store_url="memory", bindings=bindings
    )


async def test_a_library_users_bindings_are_read_as_the_cli_reads_them(tmp_path: Path) -> None:
    server = A2AServer(settings_with(tmp_path, "grpc, JSONRPC"))
    await server.start()
    try:
        bindings = {interface.protocol_binding for interface in server.card.supported_interfaces}
        assert bindings == {"GRPC", "JSONRPC"}
        envelope = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://{server.http_target}/", json=envelope, headers=V1) as reply,
        ):
            assert (await reply.json())["error"]["code"] == -32001  # served: TaskNotFound
    finally:
        await server.stop(0)


def test_a_library_users_unknown_binding_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^bindings: expected a comma list of grpc, jsonrpc, http\+json, got 'soap'$"):
        A2AServer(settings_with(tmp_path, "grpc,soap"))


async def test_the_version_may_come_as_the_spec_s_query_parameter(start_server: StartServer) -> None:
    """Spec §3.6.1: `GET /tasks/task-123?A2A-Version=1.0`; the parameter is the version, not a request field."""
    server = await start_server()
    base = f"http://{server.http_target}"
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
    async with asyncio.timeout(TEST_SECONDS), aiohttp.ClientSession() as session:
        async with session.get(f"{base}/tasks?A2A-Version=1.0") as listed:
            assert listed.status == 200, await listed.text()
            assert "error" not in await listed.json()
        async with session.get(f"{base}/tasks/none?A2A-Version=1.0") as got:
            assert (got.status, (await got.json())["error"]["status"]) == (404, "NOT_FOUND")
        async with session.post(f"{base}/?A2A-Version=1.0", json=envelope) as rpc:
            assert (await rpc.json())["error"]["code"] == -32001  # TaskNotFound, not VersionNotSupported
        async with session.get(f"{base}/tasks?A2A-Version=2.0") as refused:
            body = await refused.json()
            assert body["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED", body


class BreaksStreams(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A user's interceptor that ends every stream with PERMISSION_DENIED after its first event."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler.unary_stream is None:
            return handler
        opened = handler.unary_stream

        async def broken(request: Any, context: Any) -> AsyncIterator[Any]:
            async for event in opened(request, context):
                yield event
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, "broken after the first event")

        return grpc.unary_stream_rpc_method_handler(broken, handler.request_deserializer, handler.response_serializer)


async def test_a_stream_that_ends_in_an_error_is_an_error_on_the_three_bindings(tmp_path: Path) -> None:
    """The test helper reads HTTP+JSON's closing `event: error` as the refusal it is, not as an accepted call."""
    server = A2AServer(settings_with(tmp_path, "grpc,jsonrpc,http+json"), interceptors=[BreaksStreams()])
    await server.start()
    try:
        request = a2a_pb2.SendMessageRequest(message=user_message("go"))
        async with (
            asyncio.timeout(TEST_SECONDS),
            aiohttp.ClientSession() as session,
            grpc.aio.insecure_channel(server.grpc_target) as channel,
        ):
            callers = Callers(server, session, channel)
            outcomes = {
                b: await callers.call(b, "SendStreamingMessage", request, (("a2a-version", "1.0"),)) for b in BINDINGS
            }
    finally:
        await server.stop(0)
    assert {binding: outcome.reason for binding, outcome in outcomes.items()} == dict.fromkeys(
        BINDINGS, "PERMISSION_DENIED"
    )
    assert outcomes["http+json"].status == "PERMISSION_DENIED"


BEARER_CARD: dict[str, Any] = {
    **BASE_CARD,
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}
MALFORMED: list[Any] = [
    {"jsonrpc": "2.0", "id": 7, "method": "NoSuchMethod"},
    {"jsonrpc": "1.0", "id": 7, "method": "GetTask"},
    {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": 5},
    "not a request",
    [],
    [{"jsonrpc": "2.0", "id": 7, "method": "NoSuchMethod"}],
]


def error_of(document: Any) -> dict[str, Any]:
    answer = document[0] if isinstance(document, list) else document
    return dict(answer["error"])


def reason_of(error: dict[str, Any]) -> str:
    return next((str(d["reason"]) for d in error.get("data", []) if d["@type"].endswith("ErrorInfo")), "")


@pytest.mark.parametrize("envelope", MALFORMED, ids=[json.dumps(e)[:40] for e in MALFORMED])
async def test_a_malformed_jsonrpc_request_is_answered_only_once_its_caller_is_admitted(
    start_server: StartServer, envelope: Any
) -> None:
    """As gRPC admits a call to a method it does not serve: without a credential the answer is UNAUTHENTICATED, and
    a caller's malformed requests spend its request budget."""
    server = await start_server(card=BEARER_CARD, bearer_tokens={"t": "alice"}, max_requests_per_second=0.01)
    url = f"http://{server.http_target}/"
    alice = {**V1, "Authorization": "Bearer t"}
    async with asyncio.timeout(TEST_SECONDS), aiohttp.ClientSession() as session:
        async with session.post(url, json=envelope, headers=V1) as anonymous:
            error = error_of(await anonymous.json())
            status = 200 if isinstance(envelope, list) and envelope else 401  # a batch's answers are one array
            assert (anonymous.status, reason_of(error)) == (status, "UNAUTHENTICATED"), error
        async with session.post(url, json=envelope, headers=alice) as admitted:  # alice's one request
            assert error_of(await admitted.json())["code"] in (-32600, -32601, -32602)
        async with session.post(url, json=envelope, headers=alice) as throttled:
            error = error_of(await throttled.json())
            assert (error["code"], reason_of(error)) == (-32000, "RATE_LIMITED"), error


async def test_an_unknown_http_json_route_gets_the_bindings_json_error(start_server: StartServer) -> None:
    server = await start_server()
    base = f"http://{server.http_target}"
    async with asyncio.timeout(TEST_SECONDS), aiohttp.ClientSession() as session:
        for verb, path, status in (("GET", "/no/such/route", 404), ("PUT", "/message:send", 405), ("GET", "/", 405)):
            async with session.request(verb, base + path, headers=V1) as reply:
                body = await reply.json(content_type=None)
                assert (reply.status, reply.content_type) == (status, "application/a2a+json"), body
                error = body["error"]
                assert error["code"] == status
                assert [d["reason"] for d in error["details"] if d["@type"].endswith("ErrorInfo")] == [
                    "METHOD_NOT_FOUND"
                ]
        async with session.post(base + "/.well-known/agent-card.json") as card_route:
            assert (card_route.status, card_route.content_type) == (405, "text/plain"), "the card route is aiohttp's"
        async with session.get(base + "/.well-known/agent-card.json") as card:
            assert card.status == 200


async def test_a_stopping_server_refuses_new_calls_on_every_binding_and_creates_no_task(tmp_path: Path) -> None:
    """While a graceful stop drains a call in flight, a new HTTP call is refused UNAVAILABLE before the chain (503;
    JSON-RPC -32000), as gRPC refuses a new call; the card is still served; no task is created."""
    agent = PacedAgent()
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", card_path=str(card), store_url="memory")
    server = A2AServer(settings, agent=agent)
    await server.start()
    base = f"http://{server.http_target}"
    request = a2a_pb2.SendMessageRequest(message=user_message("go"))
    v1 = (("a2a-version", "1.0"),)
    async with (
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
    ):
        callers = Callers(server, session, channel)
        in_flight = asyncio.ensure_future(callers.grpc("SendMessage", request, v1))  # blocks until the task ends
        await agent.started.wait()
        stopping = asyncio.ensure_future(server.stop(TEST_SECONDS))
        await until(lambda: not server.ready)
        try:
            rest = await callers.rest("SendMessage", request, v1)
            rpc = await callers.jsonrpc("SendMessage", request, v1)
            async with session.get(base + "/.well-known/agent-card.json") as served_card:
                assert served_card.status == 200, "the card is served until the port closes"
            while True:  # gRPC refuses new calls once grpc core's stop has begun
                grpc_outcome = await callers.grpc("GetTask", a2a_pb2.GetTaskRequest(id="none"), v1)
                if grpc_outcome.status != "NOT_FOUND":
                    break
                await asyncio.sleep(0.005)
            assert sum(server.manager.task_counts().values()) == 1, "only the task in flight"
        finally:
            agent.finish()
            await stopping
    assert (rest.status, rest.http_status) == ("UNAVAILABLE", 503)
    assert rpc.jsonrpc_code == -32000 and rpc.http_status == 200
    assert grpc_outcome.status == "UNAVAILABLE"
    assert not (await in_flight).reason, "the call in flight ends as it would have"


async def until(condition: Any) -> None:
    while not condition():  # noqa: ASYNC110 (a state of the server, which sets no event)
        await asyncio.sleep(0.005)
