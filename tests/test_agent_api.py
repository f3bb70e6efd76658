"""The agent API over a real server: answering with a Message instead of a task, and publisher misuse."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, send_request
from rpc_helpers import Stub, make_stub, read_all

from a2a_grpc.agent import AgentContractError, AgentExecutor, EventPublisher, PublisherError, RequestContext
from a2a_grpc.errors import A2AError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings

TaskState = a2a_pb2.TaskState


class ReplyingAgent:
    """Answers every message with a Message, after an await that really suspends (as a model call would)."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await asyncio.sleep(0.01)
        await events.reply(f"you said: {context.text()}")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class MisusingAgent:
    """Misuses its publisher in the way the message names, and records what the misuse raised."""

    def __init__(self) -> None:
        self.raised: list[BaseException] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        try:
            if context.text() == "reply after working":
                await events.working()
                await events.reply("too late")
            elif context.text() == "publish after completing":
                await events.complete()
                await events.artifact(text="after the end")
        except PublisherError as error:
            self.raised.append(error)
            raise
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/tasks.db"


@pytest.fixture
async def replying_stub(start_server: StartServer, store_url: str) -> AsyncIterator[Stub]:
    server = await start_server(agent=ReplyingAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


async def assert_no_task_stored(stub: Stub) -> None:
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
    assert (listed.total_size, list(listed.tasks)) == (0, [])


async def test_an_agent_replying_with_a_message_makes_send_message_return_it(replying_stub: Stub) -> None:
    request = send_request("hi")
    request.message.context_id = "c1"
    response = await replying_stub.SendMessage(request, metadata=V1)
    assert response.WhichOneof("payload") == "message"
    reply = response.message
    assert [part.text for part in reply.parts] == ["you said: hi"]
    assert (reply.role, reply.task_id, reply.context_id) == (a2a_pb2.ROLE_AGENT, "", "c1")
    await assert_no_task_stored(replying_stub)


async def test_a_stream_carries_the_reply_as_its_single_event(replying_stub: Stub) -> None:
    events = await read_all(replying_stub.SendStreamingMessage(send_request("streamed"), metadata=V1))
    assert [event.WhichOneof("payload") for event in events] == ["message"]
    assert [part.text for part in events[0].message.parts] == ["you said: streamed"]
    await assert_no_task_stored(replying_stub)


async def test_the_echo_agent_still_answers_with_a_task(start_server: StartServer) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        response = await make_stub(channel).SendMessage(send_request("echo"), metadata=V1)
    assert response.WhichOneof("payload") == "task"
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("misuse", ["reply after working", "publish after completing"])
async def test_misusing_the_publisher_is_a_programming_error_not_a_wire_error(
    misuse: str, start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    agent = MisusingAgent()
    server = await start_server(agent=agent)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        with caplog.at_level(logging.ERROR):
            response = await stub.SendMessage(send_request(misuse), metadata=V1)
    assert [type(error) for error in agent.raised] == [PublisherError]
    assert isinstance(agent.raised[0], RuntimeError) and not isinstance(agent.raised[0], A2AError)
    expected = TaskState.TASK_STATE_FAILED if misuse == "reply after working" else TaskState.TASK_STATE_COMPLETED
    assert response.task.status.state == expected
    if misuse == "reply after working":
        assert any(record.exc_info and record.exc_info[0] is PublisherError for record in caplog.records)


async def test_a_reply_cannot_follow_return_immediately(start_server: StartServer) -> None:
    server = await start_server(agent=ReplyingAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        response = await stub.SendMessage(send_request("now", configuration=configuration), metadata=V1)
        assert response.WhichOneof("payload") == "task"  # the caller asked for the task at once
        task_id = response.task.id
        for _ in range(200):
            task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
            if task.status.state == TaskState.TASK_STATE_FAILED:
                break
            await asyncio.sleep(0.01)
        assert task.status.state == TaskState.TASK_STATE_FAILED


class ChunkReusingAgent:
    """Publishes two chunks of one artifact from the same object, changed in between, in one loop turn."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        await asyncio.sleep(0)  # the task is stored: what follows goes out as a delta
        chunk = a2a_pb2.Artifact(artifact_id="reused", parts=[a2a_pb2.Part(text="one")])
        await events.artifact(chunk)
        chunk.parts[0].text = "two"
        await events.artifact(chunk, append=True)
        await asyncio.sleep(0)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_the_store_keeps_each_chunk_as_it_was_published(start_server: StartServer, store_url: str) -> None:
    server = await start_server(agent=ChunkReusingAgent(), store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        sent = await stub.SendMessage(send_request("reuse"), metadata=V1)
        assert [part.text for part in sent.task.artifacts[0].parts] == ["one", "two"]
        stored = await server.store.get_task(sent.task.id, "")
    assert stored is not None
    assert [part.text for part in stored.artifacts[0].parts] == ["one", "two"]


# ---- finding 10: the agent contract, checked at start ---------------------------------------------


async def _async_function(context: RequestContext, events: EventPublisher) -> None:
    await events.complete()


def _plain_function(context: RequestContext, events: EventPublisher) -> None:
    return None


class SyncExecuteAgent:
    def execute(self, context: RequestContext, events: EventPublisher) -> None:
        return None

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class SyncCancelAgent:
    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.complete()

    def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        return None


class AsyncGeneratorAgent:
    async def execute(self, context: RequestContext, events: EventPublisher) -> AsyncIterator[None]:
        yield None


class SyncCallable:
    def __call__(self, context: RequestContext, events: EventPublisher) -> None:
        return None


class AsyncCallable:
    async def __call__(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class AttributeAgent:
    """An agent whose methods are attributes: functions, partials or callable objects."""

    def __init__(self, execute: object, cancel: object) -> None:
        self.execute = execute
        self.cancel = cancel


NOT_COROUTINES: dict[str, tuple[object, str]] = {
    "a def execute": (SyncExecuteAgent(), "its execute is a synchronous callable"),
    "a def cancel": (SyncCancelAgent(), "its cancel is a synchronous callable"),
    "an async generator execute": (AsyncGeneratorAgent(), "its execute is an async generator function"),
    "a partial of a def": (
        AttributeAgent(functools.partial(_plain_function), AsyncCallable()),
        "its execute is a synchronous callable",
    ),
    "a callable object with a def __call__": (
        AttributeAgent(_async_function, SyncCallable()),
        "its cancel is a synchronous callable",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_COROUTINES))
def test_an_agent_whose_execute_or_cancel_is_not_a_coroutine_function_is_refused_at_start(
    case: str, tmp_path: Path
) -> None:
    agent, says = NOT_COROUTINES[case]
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", card_path=str(card), store_url="memory")
    with pytest.raises(TypeError) as refused:
        A2AServer(settings, cast(AgentExecutor, agent))
    assert isinstance(refused.value, AgentContractError)
    text = str(refused.value)
    assert says in text and f":{type(agent).__qualname__}" in text and "\n" not in text, text


async def test_partials_and_callable_objects_of_coroutine_functions_are_agents(start_server: StartServer) -> None:
    agent = AttributeAgent(functools.partial(_async_function), AsyncCallable())
    server = await start_server(agent=cast(AgentExecutor, agent))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        response = await make_stub(channel).SendMessage(send_request("hi"), metadata=V1)
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
