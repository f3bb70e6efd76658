"""Every A2A method over JSON-RPC and over HTTP+JSON, with a plain HTTP client (aiohttp), on the HTTP port that
serves the card: the answers are the ones gRPC gives, in ProtoJSON; the streams are Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from agents import PacedAgent
from conftest import BASE_CARD, DEAD_HOOK, StartServer, user_message
from http_faces import Callers, Headers, sse_documents

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer

TEST_SECONDS = 20
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extendedAgentCard": True},
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}
ALICE: Headers = (("a2a-version", "1.0"), ("authorization", "Bearer t"))
BINDINGS = ("jsonrpc", "http+json")
IMMEDIATELY = a2a_pb2.SendMessageConfiguration(return_immediately=True)


@pytest.fixture
async def served(start_server: StartServer, tmp_path: Path) -> tuple[A2AServer, PacedAgent]:
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps({**BASE_CARD, "name": "extended agent"}))
    agent = PacedAgent(chunks=1)
    server = await start_server(card=CARD, bearer_tokens={"t": "alice"}, agent=agent, extended_card_path=str(extended))
    return server, agent


@pytest.fixture
async def callers(served: tuple[A2AServer, PacedAgent]) -> AsyncIterator[Callers]:
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(served[0].grpc_target) as channel:
        yield Callers(served[0], session, channel)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_every_method_over_the_binding(
    binding: str, callers: Callers, served: tuple[A2AServer, PacedAgent]
) -> None:
    agent = served[1]

    async def call(method: str, request: Any) -> Any:
        outcome = await callers.call(binding, method, request, ALICE)
        assert not outcome.reason, (method, outcome)
        return outcome.answer

    async with asyncio.timeout(TEST_SECONDS):
        # a task left working (the paced agent waits), subscribed to, configured for pushes, then canceled
        sent = await call(
            "SendMessage", a2a_pb2.SendMessageRequest(message=user_message("a"), configuration=IMMEDIATELY)
        )
        task_id = sent["task"]["id"]
        subscription = asyncio.create_task(call("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest(id=task_id)))
        config = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=DEAD_HOOK, token="secret")
        created = await call("CreateTaskPushNotificationConfig", config)
        assert (created["taskId"], created["url"]) == (task_id, DEAD_HOOK)
        named = {"task_id": task_id, "id": created["id"]}
        got = await call("GetTaskPushNotificationConfig", a2a_pb2.GetTaskPushNotificationConfigRequest(**named))
        assert got == created
        listed = await call(
            "ListTaskPushNotificationConfigs", a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        assert listed["configs"] == [created]
        assert (
            await call("DeleteTaskPushNotificationConfig", a2a_pb2.DeleteTaskPushNotificationConfigRequest(**named))
            == {}
        )
        gone = await callers.call(
            binding, "GetTaskPushNotificationConfig", a2a_pb2.GetTaskPushNotificationConfigRequest(**named), ALICE
        )
        assert gone.reason == "PUSH_NOTIFICATION_CONFIG_NOT_FOUND"
        await agent.started.wait()
        canceled = await call("CancelTask", a2a_pb2.CancelTaskRequest(id=task_id))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        events = await subscription
        assert events[0]["task"]["id"] == task_id, "a stream begins with the task"
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"

        agent.finish()
        done = await call("SendMessage", a2a_pb2.SendMessageRequest(message=user_message("b")))
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        streamed = await call("SendStreamingMessage", a2a_pb2.SendMessageRequest(message=user_message("c")))
        assert "task" in streamed[0] and streamed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        fetched = await call("GetTask", a2a_pb2.GetTaskRequest(id=done["task"]["id"], history_length=1))
        assert fetched["id"] == done["task"]["id"] and len(fetched["history"]) == 1
        page = await call("ListTasks", a2a_pb2.ListTasksRequest(page_size=2, include_artifacts=True))
        assert len(page["tasks"]) == 2 and page["nextPageToken"] and page["totalSize"] == 3
        assert "artifacts" in page["tasks"][0], "includeArtifacts=true reached the request"
        card = await call("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest())
        assert card["name"] == "extended agent"


async def post(callers: Callers, path: str, body: bytes, content_type: str = "application/json") -> Any:
    headers = {**dict(ALICE), "content-type": content_type}
    async with callers.session.post(callers.base + path, data=body, headers=headers) as reply:
        text = await reply.text()
        return reply.status, (sse_documents(text) if reply.content_type == "text/event-stream" else text)


MALFORMED: list[tuple[str, bytes, int]] = [
    ("not JSON", b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700),
    ("not an object", b'"SendMessage"', -32600),
    ("an empty batch", b"[]", -32600),
    ("another JSON-RPC version", b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}', -32600),
    ("no method", b'{"jsonrpc": "2.0", "id": 1}', -32600),
    ("an id that is an object", b'{"jsonrpc": "2.0", "id": {}, "method": "GetTask"}', -32600),
    ("a 0.3 method name", b'{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}', -32601),
    ("params as an array", b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": []}', -32602),
    ("a field the request lacks", b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"bogus": 1}}', -32602),
]


@pytest.mark.parametrize(("case", "body", "code"), MALFORMED, ids=[case[0] for case in MALFORMED])
async def test_a_malformed_jsonrpc_request_gets_jsonrpcs_own_code(
    callers: Callers, case: str, body: bytes, code: int
) -> None:
    status, text = await post(callers, "/", body)
    answer = json.loads(text)
    assert (status, answer["jsonrpc"], answer["error"]["code"]) == (200, "2.0", code), answer
    assert "Traceback" not in text


async def test_a_jsonrpc_batch_answers_each_unary_call_and_refuses_a_stream_in_it(callers: Callers) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "GetTask", "params": {"id": "missing"}},
        {"jsonrpc": "2.0", "id": "b", "method": "ListTasks", "params": {}},
        {"jsonrpc": "2.0", "id": "c", "method": "SendStreamingMessage", "params": {}},
        {"jsonrpc": "2.0", "method": "ListTasks", "params": {}},  # a notification: answered with nothing
    ]
    status, text = await post(callers, "/", json.dumps(batch).encode())
    answers = {answer["id"]: answer for answer in json.loads(text)}
    assert status == 200 and answers.keys() == {"a", "b", "c"}
    assert answers["a"]["error"]["code"] == -32001
    assert answers["b"]["result"].get("tasks", []) == [] and answers["b"]["result"]["pageSize"] == 50
    assert answers["c"]["error"]["code"] == -32600
    status, text = await post(callers, "/", b'{"jsonrpc": "2.0", "method": "ListTasks"}')
    assert (status, text) == (204, ""), "a notification alone is answered with nothing"


async def test_http_json_refuses_bodies_it_cannot_take_with_a_clear_status(callers: Callers) -> None:
    status, text = await post(callers, "/message:send", b"{not json")
    assert status == 400 and json.loads(text)["error"]["status"] == "INVALID_ARGUMENT"
    status, text = await post(callers, "/message:send", b"message=hi", "application/x-www-form-urlencoded")
    assert status == 415 and "application/json" in json.loads(text)["error"]["message"]
    status, text = await post(callers, "/message:send", b'{"message": {"bogus": 1}}')
    error = json.loads(text)["error"]
    assert status == 400 and "bogus" in error["message"] and error["details"][0]["reason"] == "INVALID_PARAMS"
    async with callers.session.get(callers.base + "/tasks?colour=red", headers=dict(ALICE)) as reply:
        error = (await reply.json())["error"]
    assert reply.status == 400 and "colour" in error["message"]


async def test_a_body_larger_than_the_largest_grpc_request_is_refused_as_it_arrives(start_server: StartServer) -> None:
    server = await start_server(max_message_bytes=1024)
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(server.grpc_target) as channel:
        callers = Callers(server, session, channel)
        large = b'{"message": {"parts": [{"text": "' + b"x" * 2048 + b'"}]}}'
        for path in ("/message:send", "/"):
            status, text = await post(callers, path, large)
            assert status == 413 and "1,024 bytes" in text, (path, text)
