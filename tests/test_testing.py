"""a2a_grpc.testing, used as docs/testing.md says an agent author uses it: only its documented API, the agent
API, the client's errors and the generated stubs (no helper of this test suite)."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.errors import ExtensionSupportRequiredError, UnsupportedOperationError
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.testing import AgentTestServer

PRIORITY = Extension("https://example.com/ext/priority/v1", description="Orders the work.", required=True)
V1 = ("a2a-version", "1.0")
CHUNKS = 3


class PriorityAgent:
    """Requires the priority extension; echoes the priority it was sent in the request metadata."""

    extensions = [PRIORITY]

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        priority = context.extension_payload(PRIORITY) if context.extension_active(PRIORITY) else None
        await events.artifact(text=f"{context.text()} at priority {priority}", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class ChunkAgent:
    """Streams CHUNKS artifact chunks, appended to one artifact, then completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        for index in range(CHUNKS):
            await events.artifact(text=f"chunk {index};", artifact_id="chunks", append=index > 0)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class GreeterAgent:
    """Turn one asks for a name (INPUT_REQUIRED); turn two, on the same task, greets it and completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if len(context.task.history) <= 1:  # the first message of the task
            await events.input_required("What is your name?")
            return
        await events.complete(f"Hello, {context.text()}!")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def reply_text(message: a2a_pb2.Message) -> str:
    return "".join(part.text for part in message.parts)


def artifact_text(task: a2a_pb2.Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


async def test_a_required_extension_is_refused_to_a_client_that_does_not_request_it() -> None:
    async with AgentTestServer(PriorityAgent()) as served:
        with pytest.raises(ExtensionSupportRequiredError) as refused:
            await served.client.send_message("hello")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert PRIORITY.uri in str(refused.value)


async def test_a_required_extension_is_served_and_echoed_to_a_client_that_requests_it() -> None:
    async with AgentTestServer(PriorityAgent(), extensions=[PRIORITY.uri]) as served:
        result = await served.client.send_message("hello", metadata={PRIORITY.uri: "high"})
    assert result.activated_extensions == (PRIORITY.uri,)
    assert result.value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert artifact_text(result.value.task) == "hello at priority high"


async def test_one_call_can_drop_the_servers_client_extensions() -> None:
    async with AgentTestServer(PriorityAgent(), extensions=[PRIORITY.uri]) as served:
        with pytest.raises(ExtensionSupportRequiredError):
            await served.client.send_message("hello", extensions=[])


async def test_generated_stubs_reach_the_agent_at_target() -> None:
    async with (
        AgentTestServer(PriorityAgent()) as served,
        grpc.aio.insecure_channel(served.target) as channel,
    ):
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        message = a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")])
        request = a2a_pb2.SendMessageRequest(message=message)
        call = stub.SendMessage(request, metadata=(V1, ("a2a-extensions", PRIORITY.uri)))
        response = await call
        echoed = dict(await call.trailing_metadata())["a2a-extensions"]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request, metadata=(V1,))
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert echoed == PRIORITY.uri
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_a_streaming_agent_sends_its_chunks_in_order_then_completes() -> None:
    async with AgentTestServer(ChunkAgent()) as served:
        events = await served.client.send_streaming_message("go").collect()
    chunks = [event.artifact_update.artifact.parts[0].text for event in events if event.HasField("artifact_update")]
    assert events[0].HasField("task")
    assert chunks == [f"chunk {index};" for index in range(CHUNKS)]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_an_input_required_task_continues_with_the_second_turn() -> None:
    async with AgentTestServer(GreeterAgent()) as served:
        first = (await served.client.send_message("hi")).value.task
        answer = a2a_pb2.Message(
            message_id="m-2",
            role=a2a_pb2.ROLE_USER,
            parts=[a2a_pb2.Part(text="Ada")],
            task_id=first.id,
            context_id=first.context_id,
        )
        second = (await served.client.send_message(answer)).value.task
    assert first.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert reply_text(first.status.message) == "What is your name?"
    assert second.id == first.id
    assert second.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert reply_text(second.status.message) == "Hello, Ada!"


async def test_the_given_card_is_served() -> None:
    card = {
        "name": "greeter",
        "description": "Greets by name.",
        "version": "1.2.3",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "greet", "name": "Greet", "description": "Greets.", "tags": ["greeting"]}],
    }
    async with AgentTestServer(GreeterAgent(), card=card) as served:
        assert served.card.name == "greeter"
        assert served.card.supported_interfaces[0].url == served.target
        with pytest.raises(UnsupportedOperationError, match="streaming"):
            await served.client.send_streaming_message("hi").collect()


class Counting(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        self.methods.append(handler_call_details.method)
        return await continuation(handler_call_details)


async def test_user_interceptors_see_the_calls() -> None:
    counting = Counting()
    async with AgentTestServer(ChunkAgent(), interceptors=[counting]) as served:
        await served.client.send_message("go")
    assert counting.methods == ["/lf.a2a.v1.A2AService/SendMessage"]


async def test_leaving_the_block_on_an_exception_stops_the_server_and_closes_the_client() -> None:
    served = AgentTestServer(ChunkAgent())
    with pytest.raises(ZeroDivisionError):
        async with served as running:
            client, target = running.client, running.target
            await client.send_message("go")
            raise ZeroDivisionError
    with pytest.raises(grpc.aio.UsageError, match="closed"):
        await client.send_message("go")
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="any"), metadata=(V1,), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(RuntimeError, match="not running"):
        served.client  # noqa: B018
