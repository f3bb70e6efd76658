"""Tenants: when the card's interfaces name tenants, a request's `tenant` must be one of them, and tasks, push
configs and ListTasks are partitioned by (tenant, caller). Tenant X never sees, lists, continues, cancels,
subscribes to or configures pushes for tenant Y's tasks, even for the same caller; without tenants in the card
a non-empty tenant is refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import PacedAgent
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, bad_request, user_message
from rpc_helpers import Stub, make_stub, read_all

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.card import CardError
from a2a_grpc.client import A2AClient
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings

TaskState = a2a_pb2.TaskState
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT


def interface(tenant: str) -> dict[str, str]:
    return {"url": "127.0.0.1:0", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": tenant}


TENANT_CARD: dict[str, Any] = {**BASE_CARD, "supportedInterfaces": [interface("acme"), interface("globex")]}


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Stub]:
    server = await start_server(card=TENANT_CARD, agent=PacedAgent())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


async def started_task(stub: Stub, tenant: str) -> a2a_pb2.Task:
    """A task of `tenant` left WORKING (the paced agent waits for permits that never come)."""
    request = a2a_pb2.SendMessageRequest(tenant=tenant, message=user_message("work"))
    events = stub.SendStreamingMessage(request, metadata=V1)
    async for event in events:
        if event.WhichOneof("payload") == "status_update" and event.status_update.status.state == TaskState.Value(
            "TASK_STATE_WORKING"
        ):
            events.cancel()
            break
    tasks: a2a_pb2.ListTasksResponse = await stub.ListTasks(a2a_pb2.ListTasksRequest(tenant=tenant), metadata=V1)
    return tasks.tasks[0]


async def error_of(call: Any, *, stream: bool = False) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await (read_all(call) if stream else call)
    return caught.value


async def test_a_tenant_never_sees_another_tenants_tasks(stub: Stub) -> None:
    task = await started_task(stub, "acme")
    other = "globex"
    refused = [
        await error_of(stub.GetTask(a2a_pb2.GetTaskRequest(tenant=other, id=task.id), metadata=V1)),
        await error_of(stub.CancelTask(a2a_pb2.CancelTaskRequest(tenant=other, id=task.id), metadata=V1)),
        await error_of(
            stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(tenant=other, id=task.id), metadata=V1), stream=True
        ),
        await error_of(
            stub.SendMessage(
                a2a_pb2.SendMessageRequest(tenant=other, message=user_message("more", task_id=task.id)), metadata=V1
            )
        ),
        await error_of(
            stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(tenant=other, task_id=task.id, url=DEAD_HOOK), metadata=V1
            )
        ),
        await error_of(
            stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(tenant=other, task_id=task.id), metadata=V1
            )
        ),
    ]
    assert [error.code() for error in refused] == [NOT_FOUND] * len(refused)
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(tenant=other), metadata=V1)
    assert (list(listed.tasks), listed.total_size) == ([], 0)
    own = await stub.GetTask(a2a_pb2.GetTaskRequest(tenant="acme", id=task.id), metadata=V1)
    assert own.status.state == TaskState.Value("TASK_STATE_WORKING")


async def test_push_configs_belong_to_their_tenant(stub: Stub) -> None:
    task = await started_task(stub, "acme")
    config = a2a_pb2.TaskPushNotificationConfig(tenant="acme", task_id=task.id, id="hook", url=DEAD_HOOK)
    await stub.CreateTaskPushNotificationConfig(config, metadata=V1)
    mine = a2a_pb2.GetTaskPushNotificationConfigRequest(tenant="acme", task_id=task.id, id="hook")
    assert (await stub.GetTaskPushNotificationConfig(mine, metadata=V1)).url == DEAD_HOOK
    theirs = a2a_pb2.GetTaskPushNotificationConfigRequest(tenant="globex", task_id=task.id, id="hook")
    assert (await error_of(stub.GetTaskPushNotificationConfig(theirs, metadata=V1))).code() == NOT_FOUND
    delete = a2a_pb2.DeleteTaskPushNotificationConfigRequest(tenant="globex", task_id=task.id, id="hook")
    assert (await error_of(stub.DeleteTaskPushNotificationConfig(delete, metadata=V1))).code() == NOT_FOUND
    assert (await stub.GetTaskPushNotificationConfig(mine, metadata=V1)).url == DEAD_HOOK


def every_rpc(tenant: str) -> list[tuple[str, Any, bool]]:
    """(method, request, streams) for each of the 11 RPCs, naming `tenant`."""
    task = "a-task-id"
    return [
        ("SendMessage", a2a_pb2.SendMessageRequest(tenant=tenant, message=user_message()), False),
        ("SendStreamingMessage", a2a_pb2.SendMessageRequest(tenant=tenant, message=user_message()), True),
        ("GetTask", a2a_pb2.GetTaskRequest(tenant=tenant, id=task), False),
        ("ListTasks", a2a_pb2.ListTasksRequest(tenant=tenant), False),
        ("CancelTask", a2a_pb2.CancelTaskRequest(tenant=tenant, id=task), False),
        ("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest(tenant=tenant, id=task), True),
        (
            "CreateTaskPushNotificationConfig",
            a2a_pb2.TaskPushNotificationConfig(tenant=tenant, task_id=task, url=DEAD_HOOK),
            False,
        ),
        (
            "GetTaskPushNotificationConfig",
            a2a_pb2.GetTaskPushNotificationConfigRequest(tenant=tenant, task_id=task, id="c"),
            False,
        ),
        (
            "ListTaskPushNotificationConfigs",
            a2a_pb2.ListTaskPushNotificationConfigsRequest(tenant=tenant, task_id=task),
            False,
        ),
        (
            "DeleteTaskPushNotificationConfig",
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(tenant=tenant, task_id=task, id="c"),
            False,
        ),
        ("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest(tenant=tenant), False),
    ]


async def assert_tenant_refused(stub: Stub, tenant: str) -> None:
    for method, request, streams in every_rpc(tenant):
        error = await error_of(getattr(stub, method)(request, metadata=V1), stream=streams)
        assert error.code() == INVALID_ARGUMENT, (method, error.details())
        assert [violation.field for violation in bad_request(error).field_violations] == ["tenant"], method
        assert not tenant or tenant not in (error.details() or ""), method


async def test_a_tenant_the_card_does_not_name_is_invalid_on_every_rpc(stub: Stub) -> None:
    await assert_tenant_refused(stub, "initech")
    await assert_tenant_refused(stub, "")  # every interface of this card names a tenant


async def test_without_tenants_in_the_card_a_tenant_is_refused(start_server: StartServer) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        await assert_tenant_refused(make_stub(channel), "acme")


class TenantProbe:
    """Completes every task, saying which tenant it was asked in."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.complete(f"tenant={context.tenant}")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_the_client_from_the_card_speaks_for_its_interfaces_tenant(start_server: StartServer) -> None:
    card = {**BASE_CARD, "supportedInterfaces": [interface("acme"), interface("")]}
    server = await start_server(card=card, agent=TenantProbe())
    async with await A2AClient.connect(f"http://127.0.0.1:{server.http_port}") as client:
        assert client.tenant == "acme"
        task = (await client.send_message("hi")).value.task
    assert task.status.message.parts[0].text == "tenant=acme"
    async with A2AClient(server.grpc_target) as untenanted:  # the card's second interface names no tenant
        listed = (await untenanted.list_tasks()).value
        assert listed.total_size == 0
        answer = (await untenanted.send_message("hi")).value.task
    assert answer.status.message.parts[0].text == "tenant="


async def test_tenants_stay_apart_in_a_durable_store_across_restarts(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(TENANT_CARD))
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url=f"sqlite:///{tmp_path / 'tasks.db'}"
    )
    first = A2AServer(settings, agent=TenantProbe())
    await first.start()
    try:
        async with A2AClient(first.grpc_target, tenant="acme") as client:
            task_id = (await client.send_message("hi")).value.task.id
    finally:
        await first.stop(0)
    second = A2AServer(settings, agent=TenantProbe())
    await second.start()
    try:
        async with grpc.aio.insecure_channel(second.grpc_target) as channel:
            stub = make_stub(channel)
            own = await stub.GetTask(a2a_pb2.GetTaskRequest(tenant="acme", id=task_id), metadata=V1)
            assert own.status.message.parts[0].text == "tenant=acme"
            theirs = stub.GetTask(a2a_pb2.GetTaskRequest(tenant="globex", id=task_id), metadata=V1)
            assert (await error_of(theirs)).code() == NOT_FOUND
    finally:
        await second.stop(0)


async def test_a_card_tenant_with_a_control_character_is_refused_at_start(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({**BASE_CARD, "supportedInterfaces": [interface("acme\u001fglobex")]}))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory")
    with pytest.raises(CardError, match=r"supportedInterfaces\[0\]\.tenant"):
        A2AServer(settings)


async def test_on_a_server_with_tenants_a_principal_holding_the_separator_is_refused(
    start_server: StartServer,
) -> None:
    card = {**TENANT_CARD, "supportedInterfaces": [interface("acme"), interface("")]}
    server = await start_server(card=card, bearer_tokens={"odd-token": "acme\u001falice", "plain-token": "alice"})
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        request = a2a_pb2.ListTasksRequest(tenant="")
        odd = (*V1, ("authorization", "Bearer odd-token"))
        refused = await error_of(stub.ListTasks(request, metadata=odd))
        listed = await stub.ListTasks(request, metadata=(*V1, ("authorization", "Bearer plain-token")))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED, "it could otherwise stand for alice in acme"
    assert listed.total_size == 0
