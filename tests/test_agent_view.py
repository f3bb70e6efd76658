"""What an agent sees of its caller's request headers: everything but the credentials, unless it asks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, send_request
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.auth import AuthSettings
from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2

TEST_SECONDS = 30
PARTNER_KEY = "partner-key-5c1d"
CARD = {
    **BASE_CARD,
    "securitySchemes": {"partner": {"apiKeySecurityScheme": {"location": "header", "name": "X-Partner-Key"}}},
    "securityRequirements": [{"schemes": {"partner": {}}}],
}
SENT = (
    *V1,
    ("x-partner-key", PARTNER_KEY),
    ("authorization", "Bearer not-for-agents"),
    ("x-api-key", "not-for-agents"),
    ("cookie", "session=not-for-agents"),
    ("x-request-origin", "billing"),
)


class HeaderAgent:
    def __init__(self, *, sees_credentials: bool = False) -> None:
        if sees_credentials:
            self.sees_credentials = True
        self.seen: list[dict[str, str]] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.seen.append({key: str(value) for key, value in context.call.metadata})
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def api_keys_file(tmp_path: Path) -> str:
    path = tmp_path / "keys.txt"
    path.write_text(f"{PARTNER_KEY}=partner\n")
    return str(path)


@pytest.mark.parametrize("sees_credentials", [False, True])
async def test_an_agent_sees_the_headers_but_not_the_credentials_unless_it_asks(
    start_server: StartServer, tmp_path: Path, sees_credentials: bool
) -> None:
    agent = HeaderAgent(sees_credentials=sees_credentials)
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=CARD, agent=agent, auth=AuthSettings(api_keys=api_keys_file(tmp_path)))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            await make_stub(channel).SendMessage(send_request(), metadata=SENT)
    [seen] = agent.seen
    assert seen["x-request-origin"] == "billing" and seen["a2a-version"] == "1.0"
    credentials = {"x-partner-key", "authorization", "x-api-key", "cookie"}
    if sees_credentials:
        assert credentials <= seen.keys() and seen["x-partner-key"] == PARTNER_KEY, seen
    else:
        assert credentials.isdisjoint(seen), seen


class ClockAgent:
    """Reads time_remaining() while its call waits for the answer, asks for input (which answers the call),
    then reads it again once told to go on."""

    def __init__(self) -> None:
        self.go_on = asyncio.Event()
        self.done = asyncio.Event()
        self.readings: list[float | None] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.readings.append(context.call.time_remaining())
        await events.input_required("and then?")
        await self.go_on.wait()
        self.readings.append(context.call.time_remaining())
        self.done.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_time_remaining_is_none_once_the_call_that_started_the_run_is_over(start_server: StartServer) -> None:
    agent = ClockAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            task = (await make_stub(channel).SendMessage(send_request(), metadata=V1, timeout=20)).task
        assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, "the call has its answer"
        agent.go_on.set()
        await agent.done.wait()
    during, after = agent.readings
    assert during is not None and during > 0, "the call's deadline, while the call waits"
    assert after is None, "the call is over: its deadline is no longer the agent's"


class TamperingAgent:
    """Writes into the task it reads (an artifact, a history message, the state COMPLETED), then, once told to
    go on, publishes one artifact and completes; records the artifacts its last read of the task shows."""

    def __init__(self) -> None:
        self.tampered = asyncio.Event()
        self.go_on = asyncio.Event()
        self.done = asyncio.Event()
        self.seen_last: list[str] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        task = context.task
        task.artifacts.add(artifact_id="forged", parts=[a2a_pb2.Part(text="never published")])
        task.history.add(message_id="forged-message", role=a2a_pb2.ROLE_AGENT)
        task.status.state = a2a_pb2.TASK_STATE_COMPLETED
        self.tampered.set()
        await self.go_on.wait()
        await events.artifact(text="published", artifact_id="real")
        self.seen_last = [artifact.artifact_id for artifact in context.task.artifacts]
        await events.complete()
        self.done.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def shown(task: a2a_pb2.Task) -> tuple[str, list[str], list[str]]:
    """A task's state, artifact ids and history message ids."""
    return (
        a2a_pb2.TaskState.Name(task.status.state),
        [artifact.artifact_id for artifact in task.artifacts],
        [message.message_id for message in task.history],
    )


async def test_an_agent_cannot_change_its_task_without_the_state_machine(start_server: StartServer) -> None:
    """Finding 2: what an agent writes into `context.task` is its own copy; GetTask, the store and the task's
    end show only what it published."""
    agent = TamperingAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
            request = send_request("hi", configuration=configuration)
            asked = request.message.message_id
            task_id = (await stub.SendMessage(request, metadata=V1)).task.id
            await agent.tampered.wait()
            during = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
            assert shown(during) == ("TASK_STATE_WORKING", [], [asked])
            agent.go_on.set()
            await agent.done.wait()
            final = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        stored = await server.store.get_task(task_id, "")
    assert stored is not None
    assert shown(final) == shown(stored) == ("TASK_STATE_COMPLETED", ["real"], [asked])
    assert agent.seen_last == ["real"], "a read after a publish copies the task as it now stands"


class KeyAgent:
    """Records each message's context id and conversation key."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.keys.append((context.context_id, context.conversation_key))
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_two_callers_in_one_context_id_get_different_conversation_keys(
    start_server: StartServer, tmp_path: Path
) -> None:
    """Finding 18: a caller may send into another caller's context id; the key an agent keeps memory under
    tells the callers apart, and stays the same across one caller's messages."""
    keys = tmp_path / "keys.txt"
    keys.write_text("alice-key-7f1e=alice\nbob-key-2c9a=bob\n")
    agent = KeyAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=CARD, agent=agent, auth=AuthSettings(api_keys=str(keys)))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            for key in ("alice-key-7f1e", "bob-key-2c9a", "alice-key-7f1e"):
                request = send_request()
                request.message.context_id = "shared"
                await stub.SendMessage(request, metadata=(*V1, ("x-partner-key", key)))
    (alice_context, alice), (bob_context, bob), (_, alice_again) = agent.keys
    assert alice_context == bob_context == "shared"
    assert alice != bob
    assert alice == alice_again


UNAMBIGUOUS = [
    ("a/b", "c", "d"),
    ("a", "b/c", "d"),
    ("a", "b", "c/d"),
    ("a%2Fb", "c", "d"),
    ("", "", "a/b/c"),
    ("a/b/c", "", ""),
    ("", "a", "b"),
    ("a", "", "b"),
]


def test_no_two_callers_tenants_and_context_ids_share_a_conversation_key() -> None:
    """Finding 18: the key's parts are escaped, so that no separator in one part makes it another triple's."""
    made = {
        RequestContext(
            a2a_pb2.Message(), a2a_pb2.Task(context_id=context_id), CallContext(principal=principal, tenant=tenant)
        ).conversation_key
        for principal, tenant, context_id in UNAMBIGUOUS
    }
    assert len(made) == len(UNAMBIGUOUS), made


class CancelTamperingAgent:
    """Asks for input; asked to cancel, writes into the message its context holds (the task's status message),
    then, once told to go on, publishes CANCELED."""

    def __init__(self) -> None:
        self.tampered = asyncio.Event()
        self.go_on = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.input_required("which one?")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        context.message.parts[0].text = "forged"
        self.tampered.set()
        await self.go_on.wait()
        await events.canceled()


async def test_the_message_a_cancel_handler_is_given_is_not_part_of_its_task(start_server: StartServer) -> None:
    """Finding 2, for `cancel` on a task waiting for input: its context's message is a copy of the status
    message, so what the agent writes into it changes nothing of the task."""
    agent = CancelTamperingAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            task_id = (await stub.SendMessage(send_request(), metadata=V1)).task.id
            canceling = asyncio.ensure_future(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=V1))
            await agent.tampered.wait()
            during = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
            agent.go_on.set()
            canceled = await canceling
    assert [part.text for part in during.status.message.parts] == ["which one?"]
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
