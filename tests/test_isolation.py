"""Isolation between callers: whatever scheme authenticates them, caller A never sees, lists, cancels,
subscribes to, continues or configures pushes for caller B's tasks. Each attempt is NOT_FOUND, exactly as for
a task that does not exist (no existence leaks), and ListTasks counts only the caller's own tasks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import PacedAgent
from conftest import DEAD_HOOK, V1, StartServer, error_info, send_request, user_message
from credentials import AUDIENCE, ISSUER, pem_public, rsa_key, standard_claims
from rpc_helpers import TEST_SECONDS, Metadata, Stub, make_stub, read_all, wait_for_state

from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer

TaskState = a2a_pb2.TaskState
NOT_FOUND = grpc.StatusCode.NOT_FOUND
SIGNING = rsa_key("isolation")
STATIC_TOKEN, API_KEY = "isolation-static-token-5d1e", "isolation-api-key-9c2a"
RETURN_AT_ONCE = a2a_pb2.SendMessageConfiguration(return_immediately=True)
TOKEN_SECONDS = 86_400


def by_jwt(subject: str) -> Metadata:
    """A token made when the tests are collected: valid for a day, however long the suite takes to get here."""
    claims = standard_claims(subject, exp=int(time.time()) + TOKEN_SECONDS)
    return (*V1, ("authorization", f"Bearer {SIGNING.sign(claims)}"))


CALLERS: dict[str, Metadata] = {
    "alice (JWT)": by_jwt("alice"),
    "bob (API key)": (*V1, ("x-api-key", API_KEY)),
    "carol (static token)": (*V1, ("authorization", f"Bearer {STATIC_TOKEN}")),
}
PAIRS = [(a, b) for a in CALLERS for b in CALLERS if a != b]


async def start_isolated(start_server: StartServer, tmp_path: Path, **options: Any) -> A2AServer:
    key = tmp_path / "issuer.pem"
    key.write_bytes(pem_public(SIGNING.key))
    keys = tmp_path / "api-keys"
    keys.write_text(f"{API_KEY}=bob\n")
    jwt = JwtSettings(key_path=str(key), issuers=(ISSUER,), audiences=(AUDIENCE,))
    return await start_server(
        bearer_tokens={STATIC_TOKEN: "carol"}, auth=AuthSettings(jwt=jwt, api_keys=str(keys)), **options
    )


@pytest.fixture
async def channel() -> AsyncIterator[list[grpc.aio.Channel]]:
    opened: list[grpc.aio.Channel] = []
    yield opened
    for each in opened:
        await each.close()


def stub_for(server: A2AServer, opened: list[grpc.aio.Channel]) -> Stub:
    opened.append(grpc.aio.insecure_channel(server.grpc_target))
    return make_stub(opened[-1])


async def refusal(call: Awaitable[Any] | Any, *, stream: bool = False) -> tuple[grpc.StatusCode, str, str]:
    """How a call that must fail failed: its code, its details with the task id masked, and ErrorInfo's reason."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if stream:
            await read_all(call)
        else:
            await call
    error = caught.value
    return error.code(), error.details() or "", _reason(error)


def _reason(error: grpc.aio.AioRpcError) -> str:
    return str(error_info(error).reason)


def attempts(stub: Stub, task: a2a_pb2.Task, metadata: Metadata) -> dict[str, Callable[[], Any]]:
    """Every RPC that names a task, aimed at `task` by the caller `metadata`."""
    task_id, context_id = task.id, task.context_id
    push = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, id="cfg-b", url=DEAD_HOOK)
    continued = a2a_pb2.SendMessageRequest(message=user_message("mine now", task_id=task_id, context_id=context_id))
    return {
        "GetTask": lambda: stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=metadata),
        "CancelTask": lambda: stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=metadata),
        "SendMessage": lambda: stub.SendMessage(continued, metadata=metadata),
        "CreateTaskPushNotificationConfig": lambda: stub.CreateTaskPushNotificationConfig(push, metadata=metadata),
        "GetTaskPushNotificationConfig": lambda: stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-a"), metadata=metadata
        ),
        "ListTaskPushNotificationConfigs": lambda: stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=metadata
        ),
        "DeleteTaskPushNotificationConfig": lambda: stub.DeleteTaskPushNotificationConfig(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="cfg-a"), metadata=metadata
        ),
    }


def stream_attempts(stub: Stub, task: a2a_pb2.Task, metadata: Metadata) -> dict[str, Callable[[], Any]]:
    continued = a2a_pb2.SendMessageRequest(
        message=user_message("mine now", task_id=task.id, context_id=task.context_id)
    )
    return {
        "SubscribeToTask": lambda: stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=metadata),
        "SendStreamingMessage": lambda: stub.SendStreamingMessage(continued, metadata=metadata),
    }


@pytest.mark.parametrize(("owner", "other"), PAIRS)
async def test_a_caller_never_reaches_another_callers_task(
    start_server: StartServer, tmp_path: Path, channel: list[grpc.aio.Channel], owner: str, other: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=1)
        server = await start_isolated(start_server, tmp_path, agent=agent)
        stub = stub_for(server, channel)
        mine, theirs = CALLERS[owner], CALLERS[other]
        task = (await stub.SendMessage(send_request("a", configuration=RETURN_AT_ONCE), metadata=mine)).task
        await agent.started.wait()
        config = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, id="cfg-a", url=DEAD_HOOK, token="owner-only")
        await stub.CreateTaskPushNotificationConfig(config, metadata=mine)
        absent = a2a_pb2.Task(id="no-such-task", context_id=task.context_id)

        unary, streams = attempts(stub, task, theirs), stream_attempts(stub, task, theirs)
        unary_absent, streams_absent = attempts(stub, absent, theirs), stream_attempts(stub, absent, theirs)
        for name, attempt in unary.items():
            code, details, reason = await refusal(attempt())
            assert (code, reason) == (NOT_FOUND, "TASK_NOT_FOUND"), name
            absent_code, absent_details, _ = await refusal(unary_absent[name]())
            assert (code, details.replace(task.id, "no-such-task")) == (absent_code, absent_details), name
        for name, attempt in streams.items():
            code, details, reason = await refusal(attempt(), stream=True)
            assert (code, reason) == (NOT_FOUND, "TASK_NOT_FOUND"), name
            absent_code, absent_details, _ = await refusal(streams_absent[name](), stream=True)
            assert (code, details.replace(task.id, "no-such-task")) == (absent_code, absent_details), name

        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=theirs)
        assert (list(listed.tasks), listed.total_size) == ([], 0)
        same_context = await stub.ListTasks(a2a_pb2.ListTasksRequest(context_id=task.context_id), metadata=theirs)
        assert (list(same_context.tasks), same_context.total_size) == ([], 0)

        still = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=mine)
        assert still.status.state == TaskState.TASK_STATE_WORKING, "nothing the other caller did reached the task"
        texts = [part.text for message in still.history for part in message.parts]
        assert "mine now" not in texts, "no message of the other caller joined it"
        assert agent.cancel_calls == []
        configs = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=mine
        )
        assert [(c.id, c.token) for c in configs.configs] == [("cfg-a", "owner-only")]
        agent.finish()
        await wait_for_state(stub, task.id, [TaskState.TASK_STATE_COMPLETED], metadata=mine)


async def test_list_tasks_counts_only_the_callers_own_tasks(
    start_server: StartServer, tmp_path: Path, channel: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_isolated(start_server, tmp_path)
        stub = stub_for(server, channel)
        made: dict[str, set[str]] = {}
        for count, (name, metadata) in enumerate(CALLERS.items(), 1):
            made[name] = set()
            for n in range(count * 2):
                response = await stub.SendMessage(send_request(f"{name} {n}"), metadata=metadata)
                made[name].add(response.task.id)
        for name, metadata in CALLERS.items():
            seen: set[str] = set()
            token = ""
            while True:
                page = await stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=1, page_token=token), metadata=metadata)
                assert page.total_size == len(made[name]), name
                seen.update(task.id for task in page.tasks)
                token = page.next_page_token
                if not token:
                    break
            assert seen == made[name], name


async def test_ownership_outlives_the_server_process(
    start_server: StartServer, tmp_path: Path, channel: list[grpc.aio.Channel]
) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with asyncio.timeout(TEST_SECONDS):
        first = await start_isolated(start_server, tmp_path, store_url=store)
        alice, bob = CALLERS["alice (JWT)"], CALLERS["bob (API key)"]
        task = (await stub_for(first, channel).SendMessage(send_request("kept"), metadata=alice)).task
        await first.stop(0)
        again = stub_for(await start_isolated(start_server, tmp_path, store_url=store), channel)
        assert (await again.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=by_jwt("alice"))).id == task.id
        code, _, reason = await refusal(again.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=bob))
        assert (code, reason) == (NOT_FOUND, "TASK_NOT_FOUND")
        assert (await again.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bob)).total_size == 0
