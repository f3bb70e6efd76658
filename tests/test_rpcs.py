"""The unary RPCs against a real server through the generated stubs: sends, tasks, cancel, push configs,
the extended card, capability checks and task ownership."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import CancelProbeAgent, PacedAgent
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, send_request, user_message
from google.protobuf import empty_pb2
from rpc_helpers import (
    TEST_SECONDS,
    Clients,
    Stub,
    artifact_texts,
    assert_error,
    bearer,
    rpc_error,
    stream_error,
    wait_for_state,
)

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.agents.writer import CHUNKS, WriterAgent
from a2a_grpc.card import CardError
from a2a_grpc.generated import a2a_pb2

TaskState = a2a_pb2.TaskState
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
HOOK = DEAD_HOOK


async def serve(start_server: StartServer, clients: Clients, **options: Any) -> Stub:
    return clients.stub(await start_server(**options))


# ---- SendMessage ---------------------------------------------------------------------------------


async def test_send_message_blocks_until_the_task_is_terminal(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=1)
        stub = await serve(start_server, clients, agent=agent)
        call = asyncio.ensure_future(stub.SendMessage(send_request("hi"), metadata=V1))
        await agent.started.wait()
        agent.step()
        await asyncio.sleep(0.2)
        assert not call.done(), "SendMessage returned before the task was terminal"
        agent.step()
        response = await call
        assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(response.task) == ["chunk 0;"]


async def test_send_message_returns_immediately_when_asked(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=2)
        stub = await serve(start_server, clients, agent=agent)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        response = await stub.SendMessage(send_request("hi", configuration=configuration), metadata=V1)
        task = response.task
        assert task.id
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        assert task.status.HasField("timestamp")
        working = await wait_for_state(stub, task.id, [TaskState.TASK_STATE_WORKING])
        assert working.id == task.id
        agent.finish()
        done = await wait_for_state(stub, task.id, [TaskState.TASK_STATE_COMPLETED])
        assert artifact_texts(done) == ["chunk 0;", "chunk 1;"]


async def test_send_message_accepts_a_client_context_id_and_generates_one_otherwise(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients)
        given = a2a_pb2.SendMessageRequest(message=user_message("a", context_id="ctx-given"))
        with_context = (await stub.SendMessage(given, metadata=V1)).task
        generated = (await stub.SendMessage(send_request("b"), metadata=V1)).task
        assert with_context.context_id == "ctx-given"
        assert generated.context_id
        assert generated.context_id != with_context.context_id
        assert with_context.id != generated.id
        assert with_context.history[0].task_id == with_context.id


# history: the user's message, the agent's "started" (WORKING) and its "done" (COMPLETED).
FULL_HISTORY = ["hello", "started", "done"]


@pytest.mark.parametrize(
    ("history_length", "expected"),
    [(None, FULL_HISTORY), (0, []), (1, ["done"]), (2, ["started", "done"]), (10, FULL_HISTORY)],
)
async def test_history_length_on_send_message_and_get_task(
    start_server: StartServer, clients: Clients, history_length: int | None, expected: list[str]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, agent=PacedAgent(chunks=1, paced=False))
        configuration = a2a_pb2.SendMessageConfiguration(history_length=history_length)
        sent = (await stub.SendMessage(send_request("hello", configuration=configuration), metadata=V1)).task
        got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.id, history_length=history_length), metadata=V1)
        for task in (sent, got):
            assert [m.parts[0].text for m in task.history] == expected
            assert artifact_texts(task) == ["chunk 0;"], "history_length must not touch artifacts"
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        untrimmed = await stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.id), metadata=V1)
        assert [m.parts[0].text for m in untrimmed.history] == FULL_HISTORY, "a view must not trim the stored task"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_multi_turn_with_the_writer_agent(
    start_server: StartServer, clients: Clients, tmp_path: Path, store: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        store_url = "memory" if store == "memory" else f"sqlite:///{tmp_path}/tasks.db"
        stub = await serve(start_server, clients, agent=WriterAgent(chunk_delay=0.01), store_url=store_url)
        first = (await stub.SendMessage(send_request("the sea"), metadata=V1)).task
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "tone" in first.status.message.parts[0].text
        assert first.status.message.role == a2a_pb2.ROLE_AGENT
        reply = user_message("cheerful", task_id=first.id, message_id="m-reply")
        second = (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=reply), metadata=V1)).task
        assert second.id == first.id
        assert second.context_id == first.context_id
        assert second.status.state == TaskState.TASK_STATE_COMPLETED
        [piece] = second.artifacts
        assert piece.name == "piece"
        assert [part.text for part in piece.parts] == [
            f"[cheerful] part {index} of {CHUNKS} about the sea. " for index in range(1, CHUNKS + 1)
        ]
        user_turns = [m.parts[0].text for m in second.history if m.role == a2a_pb2.ROLE_USER]
        assert user_turns == ["the sea", "cheerful"]
        assert all(m.context_id == first.context_id and m.task_id == first.id for m in second.history)


async def test_get_task_returns_the_stored_task(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients)
        sent = (await stub.SendMessage(send_request("echo me"), metadata=V1)).task
        got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.id), metadata=V1)
        assert got == sent
        assert artifact_texts(got) == ["echo me"]
        assert got.status.timestamp.seconds > 0


# ---- CancelTask ----------------------------------------------------------------------------------


@pytest.mark.parametrize("publish_canceled", [True, False], ids=["agent-publishes", "server-cancels"])
async def test_cancel_of_a_running_task_reaches_the_executor(
    start_server: StartServer, clients: Clients, publish_canceled: bool
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = CancelProbeAgent(publish_canceled=publish_canceled)
        stub = await serve(start_server, clients, agent=agent)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        task = (await stub.SendMessage(send_request("work", configuration=configuration), metadata=V1)).task
        await agent.started.wait()
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
        assert canceled.id == task.id
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert agent.cancel_calls == [task.id]
        await agent.execute_saw_cancel.wait()
        got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        if publish_canceled:
            assert got.status.message.parts[0].text == "canceled on request"


async def test_cancel_of_a_blocked_send_message_returns_canceled_to_the_sender(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = CancelProbeAgent()
        stub = await serve(start_server, clients, agent=agent)
        call = asyncio.ensure_future(stub.SendMessage(send_request("work"), metadata=V1))
        await agent.started.wait()
        [listed] = (await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)).tasks
        await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=listed.id), metadata=V1)
        response = await call
        assert response.task.status.state == TaskState.TASK_STATE_CANCELED


async def test_cancel_of_an_input_required_task(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, agent=WriterAgent(chunk_delay=0.01))
        task = (await stub.SendMessage(send_request("a topic"), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        reply = user_message("cheerful", task_id=task.id, message_id="m-late")
        error = await rpc_error(stub.SendMessage(a2a_pb2.SendMessageRequest(message=reply), metadata=V1))
        assert_error(error, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION", taskId=task.id)


class AskingAgent:
    """Asks for input at once; its cancel records the task, and publishes CANCELED unless told not to."""

    def __init__(self, *, publish_canceled: bool = True) -> None:
        self.publish_canceled = publish_canceled
        self.cancel_calls: list[tuple[str, str]] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.input_required("which colour?")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        self.cancel_calls.append((context.task_id, context.text()))
        if self.publish_canceled:
            await events.canceled("conversation closed")


@pytest.mark.parametrize("publish_canceled", [True, False])
async def test_cancel_of_an_input_required_task_calls_the_agents_cancel(
    start_server: StartServer, clients: Clients, publish_canceled: bool
) -> None:
    agent = AskingAgent(publish_canceled=publish_canceled)
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, agent=agent)
        task = (await stub.SendMessage(send_request("paint it"), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        request = a2a_pb2.CancelTaskRequest(id=task.id)
        results = await asyncio.gather(
            stub.CancelTask(request, metadata=V1), stub.CancelTask(request, metadata=V1), return_exceptions=True
        )
    canceled: Any = results[0]
    again: Any = results[1]
    assert agent.cancel_calls == [(task.id, "which colour?")], "the agent hears of it once, with its question"
    assert isinstance(canceled, a2a_pb2.Task), canceled
    if isinstance(again, grpc.aio.AioRpcError):  # it came once the first had canceled the task
        assert_error(again, FAILED_PRECONDITION, "TASK_NOT_CANCELABLE", taskId=task.id)
    else:
        assert again == canceled, again
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    said = [part.text for part in canceled.status.message.parts]
    assert said == (["conversation closed"] if publish_canceled else []), "the agent's word, or the server's"


# ---- push notification configs -------------------------------------------------------------------


async def test_push_config_create_get_list_delete(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        named = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="cfg-1", url=HOOK, token="secret-1")
        named.authentication.scheme = "Bearer"
        named.authentication.credentials = "creds"
        created = await stub.CreateTaskPushNotificationConfig(named, metadata=V1)
        assert created == named
        unnamed = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=HOOK + "/2")
        generated = await stub.CreateTaskPushNotificationConfig(unnamed, metadata=V1)
        assert generated.id, "the server gives a config without an id one"
        assert generated.task_id == task.id
        assert generated.url == HOOK + "/2"

        got = await stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1"), metadata=V1
        )
        assert got == named

        seen: list[str] = []
        token = ""
        for _ in range(5):
            page = await stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1, page_token=token),
                metadata=V1,
            )
            assert len(page.configs) == 1
            seen.extend(config.id for config in page.configs)
            token = page.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted(["cfg-1", generated.id])
        everything = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
        )
        assert {config.id for config in everything.configs} == {"cfg-1", generated.id}
        assert everything.next_page_token == ""

        delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1")
        assert await stub.DeleteTaskPushNotificationConfig(delete, metadata=V1) == empty_pb2.Empty()
        error = await rpc_error(
            stub.GetTaskPushNotificationConfig(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1"), metadata=V1
            )
        )
        assert_error(error, grpc.StatusCode.NOT_FOUND, "PUSH_NOTIFICATION_CONFIG_NOT_FOUND", taskId=task.id)
        assert await stub.DeleteTaskPushNotificationConfig(delete, metadata=V1) == empty_pb2.Empty(), "idempotent"
        left = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
        )
        assert [config.id for config in left.configs] == [generated.id]


async def test_deleting_a_push_config_again_is_ok_on_the_callers_own_task(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, bearer_tokens=TWO_PRINCIPALS)
        task = (await stub.SendMessage(send_request("x"), metadata=ALICE)).task
        config = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="cfg", url=HOOK)
        await stub.CreateTaskPushNotificationConfig(config, metadata=ALICE)
        delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="cfg")
        for _ in range(3):
            assert await stub.DeleteTaskPushNotificationConfig(delete, metadata=ALICE) == empty_pb2.Empty()
        listed = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=ALICE
        )
        assert list(listed.configs) == []

        unknown = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id="no-such-task", id="cfg")
        for request, caller in ((delete, BOB), (unknown, ALICE)):
            error = await rpc_error(stub.DeleteTaskPushNotificationConfig(request, metadata=caller))
            assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=request.task_id)


async def test_push_config_replaced_by_create_with_the_same_id(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        for url in (HOOK, HOOK + "/new"):
            config = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="same", url=url)
            await stub.CreateTaskPushNotificationConfig(config, metadata=V1)
        listed = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
        )
        assert [(c.id, c.url) for c in listed.configs] == [("same", HOOK + "/new")]


async def test_send_message_with_a_push_config_stores_it(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients)
        configuration = a2a_pb2.SendMessageConfiguration(
            task_push_notification_config=a2a_pb2.TaskPushNotificationConfig(url=HOOK, token="tok")
        )
        task = (await stub.SendMessage(send_request("x", configuration=configuration), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        listed = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
        )
        [config] = listed.configs
        assert (config.task_id, config.url, config.token) == (task.id, HOOK, "tok")
        assert config.id


# ---- GetExtendedAgentCard ------------------------------------------------------------------------

EXTENDED_SKILL = {"id": "secret", "name": "Secret", "description": "Only for callers we know.", "tags": ["x"]}


def card_with(**capabilities: bool) -> dict[str, Any]:
    return {**BASE_CARD, "capabilities": {**BASE_CARD["capabilities"], **capabilities}}


def write_extended_card(tmp_path: Path) -> str:
    card = card_with(extendedAgentCard=True)
    card = {**card, "name": "test agent (extended)", "skills": [*card["skills"], EXTENDED_SKILL]}
    path = tmp_path / "extended-card.json"
    path.write_text(json.dumps(card))
    return str(path)


async def test_extended_card_not_declared(start_server: StartServer, clients: Clients, tmp_path: Path) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, extended_card_path=write_extended_card(tmp_path))
        error = await rpc_error(stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=V1))
        assert_error(error, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")


async def test_extended_card_declared_but_not_configured(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, card=card_with(extendedAgentCard=True), bearer_tokens={"t": "alice"})
        error = await rpc_error(stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=bearer("t")))
        assert_error(error, FAILED_PRECONDITION, "EXTENDED_AGENT_CARD_NOT_CONFIGURED")


async def test_extended_card_for_an_authenticated_caller(
    start_server: StartServer, clients: Clients, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(
            card=card_with(extendedAgentCard=True),
            extended_card_path=write_extended_card(tmp_path),
            bearer_tokens={"t": "alice"},
        )
        stub = clients.stub(server)
        card = await stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=bearer("t"))
        assert card.name == "test agent (extended)"
        assert [skill.id for skill in card.skills] == ["echo", "secret"]
        interfaces = [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]
        http = f"http://{server.http_target}"
        assert interfaces == [
            (server.grpc_target, "GRPC", "1.0"),
            (server.grpc_target, "GRPC", "0.3"),
            (http + "/", "JSONRPC", "1.0"),
            (http, "HTTP+JSON", "1.0"),
        ]

        for metadata in (V1, bearer("wrong")):
            error = await rpc_error(stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata))
            assert_error(error, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")


async def test_extended_card_without_any_authentication_is_refused_at_start_up(
    start_server: StartServer, tmp_path: Path
) -> None:
    """The extended card is only for authenticated callers: a card that declares one and requires no
    authentication would serve it to no one, and the server does not start."""
    with pytest.raises(CardError, match="extendedAgentCard needs a security requirement"):
        await start_server(card=card_with(extendedAgentCard=True), extended_card_path=write_extended_card(tmp_path))


# ---- capability checks ---------------------------------------------------------------------------

PLAIN_CARD = card_with(streaming=False, pushNotifications=False)


async def test_streaming_rpcs_without_the_streaming_capability(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, card=PLAIN_CARD)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        for call in (
            stub.SendStreamingMessage(send_request("y"), metadata=V1),
            stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=V1),
        ):
            error = await stream_error(call)
            assert_error(error, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
        assert listed.total_size == 1, "a refused streaming send must not create a task"


async def test_push_rpcs_without_the_push_capability(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await serve(start_server, clients, card=PLAIN_CARD)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        calls = [
            stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=HOOK), metadata=V1
            ),
            stub.GetTaskPushNotificationConfig(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="c"), metadata=V1
            ),
            stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
            ),
            stub.DeleteTaskPushNotificationConfig(
                a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="c"), metadata=V1
            ),
            stub.SendMessage(
                send_request(
                    "y",
                    configuration=a2a_pb2.SendMessageConfiguration(
                        task_push_notification_config=a2a_pb2.TaskPushNotificationConfig(url=HOOK)
                    ),
                ),
                metadata=V1,
            ),
        ]
        for call in calls:
            error = await rpc_error(call)
            assert error.code() != grpc.StatusCode.UNIMPLEMENTED
            assert_error(error, FAILED_PRECONDITION, "PUSH_NOTIFICATION_NOT_SUPPORTED")
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
        assert listed.total_size == 1, "a refused send must not create a task"


# ---- ownership -----------------------------------------------------------------------------------

ALICE, BOB = bearer("alice-token"), bearer("bob-token")
TWO_PRINCIPALS = {"alice-token": "alice", "bob-token": "bob"}


async def test_a_caller_never_sees_another_callers_tasks(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=1)
        stub = await serve(start_server, clients, agent=agent, bearer_tokens=TWO_PRINCIPALS)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        running = (await stub.SendMessage(send_request("a", configuration=configuration), metadata=ALICE)).task
        await agent.started.wait()

        refused = [
            stub.GetTask(a2a_pb2.GetTaskRequest(id=running.id), metadata=BOB),
            stub.CancelTask(a2a_pb2.CancelTaskRequest(id=running.id), metadata=BOB),
            stub.SendMessage(a2a_pb2.SendMessageRequest(message=user_message("b", task_id=running.id)), metadata=BOB),
            stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(task_id=running.id, url=HOOK), metadata=BOB
            ),
            stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=running.id), metadata=BOB
            ),
        ]
        for call in refused:
            error = await rpc_error(call)
            assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=running.id)
        subscribe = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=running.id), metadata=BOB)
        assert_error(await stream_error(subscribe), grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=running.id)

        bobs = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=BOB)
        assert (list(bobs.tasks), bobs.total_size, bobs.next_page_token) == ([], 0, "")
        bob_task = (await stub.SendMessage(send_request("b", configuration=configuration), metadata=BOB)).task
        alices = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=ALICE)
        assert [task.id for task in alices.tasks] == [running.id]
        assert bob_task.id != running.id

        still = await stub.GetTask(a2a_pb2.GetTaskRequest(id=running.id), metadata=ALICE)
        assert still.status.state == TaskState.TASK_STATE_WORKING, "bob's calls must not touch alice's task"
        agent.finish()
        await wait_for_state(stub, running.id, [TaskState.TASK_STATE_COMPLETED], metadata=ALICE)
        error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=running.id), metadata=BOB))
        assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=running.id)
