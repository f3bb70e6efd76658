"""Edge cases found in review: durable reads, cancel races, late agents, hostile values, card extensions."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import grpc
from agents import PacedAgent
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, bad_request, error_info, send_request, user_message
from google.protobuf import struct_pb2
from rpc_helpers import make_stub, rpc_error

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore, TaskWrite

FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT


class GatedStore(MemoryStore):
    """A memory store whose writes become durable only while its gate is open."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        stored = super().apply(write)
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def release() -> None:
            await self.gate.wait()
            error = stored.exception()
            if error is None:
                durable.set_result(None)
            else:
                durable.set_exception(error)

        asyncio.get_running_loop().create_task(release())
        return durable


async def test_get_task_shows_only_what_is_durable(tmp_path: Path) -> None:
    agent, store = PacedAgent(chunks=0), GatedStore()
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=None, store_url="memory")
    server = A2AServer(settings, agent=agent, store=store)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
            stub = make_stub(channel)
            configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
            sent = await stub.SendMessage(send_request("slow disk", configuration=configuration), metadata=V1)
            await agent.started.wait()
            store.gate.clear()
            agent.finish()  # the agent completes, but the store does not confirm the write yet
            reading = asyncio.ensure_future(stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=V1))
            await asyncio.sleep(0.2)
            assert not reading.done(), "GetTask answered with a state a crash could still take back"
            store.gate.set()
            assert (await reading).status.state == a2a_pb2.TASK_STATE_COMPLETED
    finally:
        await server.stop(0)


class LingeringAgent:
    """Asks for input, then keeps working a little before it returns; a reply may arrive meanwhile."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.linger = asyncio.Event()
        self.replies: list[str] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if len(context.task.history) == 1:
            await events.input_required("Which one?")
            self.asked.set()
            await self.linger.wait()
            return
        self.replies.append(context.text())
        await events.complete("Done.")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_a_reply_to_input_required_is_taken_while_the_agent_finishes(start_server: StartServer) -> None:
    agent = LingeringAgent()
    server = await start_server(agent=agent)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
        stub = make_stub(channel)
        first = await stub.SendMessage(send_request("pick"), metadata=V1)
        assert first.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        reply = a2a_pb2.SendMessageRequest(message=user_message("the red one", task_id=first.task.id))
        second = await stub.SendMessage(reply, metadata=V1)
        agent.linger.set()
    assert second.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.replies == ["the red one"]


class QuittingAgent:
    """Works until a cancel is requested, then simply returns; its cancel handler publishes nothing."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        await context.wait_cancel_requested()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await asyncio.sleep(0)


class SlowCancelAgent:
    """Its cancel handler takes a while, longer than the client is willing to wait."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        await asyncio.Event().wait()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await asyncio.sleep(0.5)
        await events.canceled("stopped")


async def _running_task(stub: object, text: str) -> str:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    sent = await stub.SendMessage(send_request(text, configuration=configuration), metadata=V1)  # type: ignore[attr-defined]
    return str(sent.task.id)


async def _state_eventually(stub: object, task_id: str, wanted: int) -> int:
    for _ in range(100):
        task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)  # type: ignore[attr-defined]
        if task.status.state == wanted:
            break
        await asyncio.sleep(0.05)
    return int(task.status.state)


async def test_an_agent_that_stops_on_a_cancel_request_leaves_the_task_canceled(start_server: StartServer) -> None:
    server = await start_server(agent=QuittingAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
        stub = make_stub(channel)
        task_id = await _running_task(stub, "work")
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=V1)
        assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
        assert await _state_eventually(stub, task_id, a2a_pb2.TASK_STATE_CANCELED) == a2a_pb2.TASK_STATE_CANCELED


async def test_a_cancel_whose_client_gives_up_still_completes(start_server: StartServer) -> None:
    server = await start_server(agent=SlowCancelAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
        stub = make_stub(channel)
        task_id = await _running_task(stub, "work")
        error = await rpc_error(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=V1, timeout=0.1))
        assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert await _state_eventually(stub, task_id, a2a_pb2.TASK_STATE_CANCELED) == a2a_pb2.TASK_STATE_CANCELED


async def test_hostile_values_are_client_errors(start_server: StartServer, tmp_path: Path) -> None:
    server = await start_server(store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
        stub = make_stub(channel)
        long_version = (("a2a-version", "1" * 5000 + ".0"),)
        error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="x"), metadata=long_version))
        assert (error.code(), error_info(error).reason) == (FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")

        forged = json.dumps(["t1", 10**30, "x"]).encode()
        for token in (base64.urlsafe_b64encode(forged).decode(), "%%%", "e30"):
            request = a2a_pb2.ListTasksRequest(page_token=token)
            error = await rpc_error(stub.ListTasks(request, metadata=V1))
            assert error.code() == INVALID_ARGUMENT, (token, error.details())

        empty_data = a2a_pb2.Part(data=struct_pb2.Value())
        for part, field in ((a2a_pb2.Part(raw=b""), "message.parts[0].raw"), (empty_data, "message.parts[0].data")):
            message = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=[part])
            error = await rpc_error(stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=V1))
            assert error.code() == INVALID_ARGUMENT
            assert [v.field for v in bad_request(error).field_violations] == [field]

        assert (await stub.SendMessage(send_request("still serving"), metadata=V1)).task.status.state == (
            a2a_pb2.TASK_STATE_COMPLETED
        )


async def test_capability_is_checked_before_validation(start_server: StartServer) -> None:
    card = {**BASE_CARD, "capabilities": {"streaming": True, "pushNotifications": False}}
    server = await start_server(card=card)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(20):
        stub = make_stub(channel)
        push = a2a_pb2.TaskPushNotificationConfig(url=DEAD_HOOK)
        configuration = a2a_pb2.SendMessageConfiguration(task_push_notification_config=push)
        no_parts = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER)
        request = a2a_pb2.SendMessageRequest(message=no_parts, configuration=configuration)
        error = await rpc_error(stub.SendMessage(request, metadata=V1))
        assert (error.code(), error_info(error).reason) == (FAILED_PRECONDITION, "PUSH_NOTIFICATION_NOT_SUPPORTED")


async def test_extensions_of_the_extended_card_are_declared_in_the_public_card(
    start_server: StartServer, tmp_path: Path
) -> None:
    required = {"uri": "https://example.com/ext/partner/v1", "required": True}
    extended = {**BASE_CARD, "capabilities": {"extendedAgentCard": True, "extensions": [required]}}
    extended_path = tmp_path / "extended.json"
    extended_path.write_text(json.dumps(extended))
    card = {**BASE_CARD, "capabilities": {"extendedAgentCard": True}}
    # an extended card is for authenticated callers only: the server needs a scheme to start
    server = await start_server(card=card, extended_card_path=str(extended_path), bearer_tokens={"t": "alice"})
    assert [e.uri for e in server.card.capabilities.extensions] == [required["uri"], RESUME_EXTENSION_URI]
    assert [e.uri for e in server.card.capabilities.extensions if e.required] == [required["uri"]]
