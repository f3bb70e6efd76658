"""The A2A error table as the server produces it: code, ErrorInfo reason, domain, metadata;
and the table both ways, each row encoded and decoded again.

Rows the server never produces today: InvalidAgentResponseError (ContentTypeNotSupportedError: tests/test_input_modes.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import (
    REQUIRED_EXTENSION,
    SECRET,
    OutcomeAgent,
    PacedAgent,
    RaisingAgent,
    RequiredExtensionAgent,
    SilentAgent,
)
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, bad_request, rich_status, send_request, user_message
from google.rpc import error_details_pb2, status_pb2
from rpc_helpers import (
    DOMAIN,
    OWN_DOMAIN,
    SPEC_REASONS,
    TEST_SECONDS,
    Stub,
    assert_error,
    bearer,
    kinds,
    make_stub,
    read_all,
    rpc_error,
    states,
    stream_error,
)

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.errors import (
    CODE_ERRORS,
    ERROR_BY_CODE,
    ERROR_DOMAIN,
    ERROR_TABLE,
    A2AError,
    InvalidRequestError,
    RemoteError,
    UnimplementedError,
    UnsupportedOperationError,
    error_from_status,
    status_trailers,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore
from a2a_grpc.store.base import LoadedTask

TaskState = a2a_pb2.TaskState
NOT_FOUND = grpc.StatusCode.NOT_FOUND
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
HOOK = DEAD_HOOK

Connect = Callable[..., Any]


@pytest.fixture
async def connect(start_server: StartServer) -> AsyncIterator[Connect]:
    """Start a server (same keywords as start_server) and return a stub on its own channel."""
    channels: list[grpc.aio.Channel] = []

    async def open_stub(**options: Any) -> Stub:
        server = await start_server(**options)
        channel = grpc.aio.insecure_channel(server.grpc_target)
        channels.append(channel)
        return make_stub(channel)

    yield open_stub
    for channel in channels:
        await channel.close()


async def send(stub: Stub, text: str = "complete", metadata: Any = V1, **message_fields: Any) -> a2a_pb2.Task:
    message = user_message(text, **message_fields)
    task: a2a_pb2.Task = (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=metadata)).task
    return task


def assert_generic(error: grpc.aio.AioRpcError) -> None:
    assert SECRET not in (error.details() or "")
    assert SECRET not in str(rich_status(error))
    assert "Traceback" not in (error.details() or "")


# ---- TaskNotFoundError ---------------------------------------------------------------------------


async def test_task_not_found_on_every_rpc_that_names_a_task(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect()
        missing = "no-such-task"
        unary = [
            stub.GetTask(a2a_pb2.GetTaskRequest(id=missing), metadata=V1),
            stub.CancelTask(a2a_pb2.CancelTaskRequest(id=missing), metadata=V1),
            stub.SendMessage(a2a_pb2.SendMessageRequest(message=user_message("x", task_id=missing)), metadata=V1),
            stub.CreateTaskPushNotificationConfig(
                a2a_pb2.TaskPushNotificationConfig(task_id=missing, url=HOOK), metadata=V1
            ),
            stub.GetTaskPushNotificationConfig(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=missing, id="c"), metadata=V1
            ),
            stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=missing), metadata=V1
            ),
            stub.DeleteTaskPushNotificationConfig(
                a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=missing, id="c"), metadata=V1
            ),
        ]
        for call in unary:
            assert_error(await rpc_error(call), NOT_FOUND, "TASK_NOT_FOUND", taskId=missing)
        streams = [
            stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=missing), metadata=V1),
            stub.SendStreamingMessage(
                a2a_pb2.SendMessageRequest(message=user_message("x", task_id=missing)), metadata=V1
            ),
        ]
        for stream in streams:
            assert_error(await stream_error(stream), NOT_FOUND, "TASK_NOT_FOUND", taskId=missing)


# ---- TaskNotCancelableError ----------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["complete", "fail", "reject"])
async def test_cancel_of_a_terminal_task_is_not_cancelable(connect: Connect, outcome: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=OutcomeAgent())
        task = await send(stub, outcome)
        error = await rpc_error(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1))
        assert_error(error, FAILED_PRECONDITION, "TASK_NOT_CANCELABLE", taskId=task.id)
        after = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert after.status == task.status


async def test_cancel_of_an_already_canceled_task_is_not_cancelable(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=OutcomeAgent())
        task = await send(stub, "input")
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        error = await rpc_error(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1))
        info = assert_error(error, FAILED_PRECONDITION, "TASK_NOT_CANCELABLE", taskId=task.id)
        assert "CANCELED" in error.details()
        assert info.metadata["taskId"] == task.id


# ---- UnsupportedOperationError -------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["complete", "fail", "reject"])
async def test_a_message_to_a_terminal_task_is_unsupported(connect: Connect, outcome: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=OutcomeAgent())
        task = await send(stub, outcome)
        late = a2a_pb2.SendMessageRequest(message=user_message("complete", task_id=task.id, message_id="m-late"))
        error = await rpc_error(stub.SendMessage(late, metadata=V1))
        assert_error(error, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION", taskId=task.id)
        stream_failure = await stream_error(stub.SendStreamingMessage(late, metadata=V1))
        assert_error(stream_failure, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION", taskId=task.id)
        after = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert len(after.history) == len(task.history), "a refused message must not enter the history"


async def test_a_message_to_a_task_that_is_still_working_is_unsupported(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = PacedAgent(chunks=0)
        stub = await connect(agent=agent)
        configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        task = (await stub.SendMessage(send_request("go", configuration=configuration), metadata=V1)).task
        await agent.started.wait()
        more = a2a_pb2.SendMessageRequest(message=user_message("more", task_id=task.id, message_id="m-2"))
        error = await rpc_error(stub.SendMessage(more, metadata=V1))
        assert_error(error, FAILED_PRECONDITION, "UNSUPPORTED_OPERATION", taskId=task.id)
        agent.finish()


# ---- validation of a follow-up message -----------------------------------------------------------


async def test_context_id_that_does_not_match_the_task_is_invalid(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=OutcomeAgent())
        task = await send(stub, "input")
        wrong = user_message("complete", task_id=task.id, context_id="another-context", message_id="m-2")
        error = await rpc_error(stub.SendMessage(a2a_pb2.SendMessageRequest(message=wrong), metadata=V1))
        assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
        assert [v.field for v in bad_request(error).field_violations] == ["message.context_id"]
        right = user_message("complete", task_id=task.id, context_id=task.context_id, message_id="m-3")
        done = (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=right), metadata=V1)).task
        assert done.status.state == TaskState.TASK_STATE_COMPLETED


# ---- failures inside the agent and the server ----------------------------------------------------


async def test_an_agent_that_raises_fails_its_task_without_leaking(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=RaisingAgent())
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert task.status.message.role == a2a_pb2.ROLE_AGENT
        assert SECRET not in str(task)
        items = await read_all(stub.SendStreamingMessage(send_request("y"), metadata=V1))
        assert states(items) == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_FAILED]
        assert SECRET not in str(items)


async def test_an_agent_that_returns_without_a_result_fails_its_task(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=SilentAgent())
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_FAILED
        items = await read_all(stub.SendStreamingMessage(send_request("y"), metadata=V1))
        assert kinds(items)[0] == "task"
        assert states(items) == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_FAILED]


class ExplodingStore(MemoryStore):
    """A store that fails with an internal message on one task id (and works otherwise)."""

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        if task_id == "explode":
            raise RuntimeError(SECRET)
        return await super().get_task(task_id, owner)

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        if task_id == "explode":
            raise RuntimeError(SECRET)
        return await super().load_task(task_id, owner)


@pytest.fixture
async def exploding_stub(tmp_path: Path) -> AsyncIterator[Stub]:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory")
    agent: AgentExecutor = OutcomeAgent()
    server = A2AServer(settings, agent=agent, store=ExplodingStore())
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            yield make_stub(channel)
    finally:
        await server.stop(0)


async def test_an_unexpected_server_error_is_internal_and_generic(exploding_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = exploding_stub
        error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="explode"), metadata=V1))
        assert_error(error, grpc.StatusCode.INTERNAL, "INTERNAL")
        assert_generic(error)
        stream_failure = await stream_error(
            stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="explode"), metadata=V1)
        )
        assert_error(stream_failure, grpc.StatusCode.INTERNAL, "INTERNAL")
        assert_generic(stream_failure)
        task = (await stub.SendMessage(send_request("complete"), metadata=V1)).task
        assert (await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)) == task


# ---- the call-level rows: version, extensions, authentication ------------------------------------


@pytest.mark.parametrize("version", [None, "", "0.3", "2.0", "1", "one.zero"])
async def test_an_unsupported_version_is_refused(connect: Connect, version: str | None) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect()
        metadata = () if version is None else (("a2a-version", version),)
        error = await rpc_error(stub.SendMessage(send_request("x"), metadata=metadata))
        assert_error(error, FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED", supportedVersions="1.0")
        assert "a2a-version: 1.0" in error.details()
        stream_failure = await stream_error(stub.SendStreamingMessage(send_request("x"), metadata=metadata))
        assert_error(stream_failure, FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=(("a2a-version", "1.0.1"),))
        assert listed.total_size == 0, "a refused call must not create a task"


async def test_a_missing_required_extension_is_refused_on_every_rpc(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=RequiredExtensionAgent())
        calls = [
            stub.SendMessage(send_request("x"), metadata=V1),
            stub.GetTask(a2a_pb2.GetTaskRequest(id="any"), metadata=V1),
            stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1),
        ]
        for call in calls:
            error = await rpc_error(call)
            assert_error(error, FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED", missingExtensions=REQUIRED_EXTENSION)
        stream_failure = await stream_error(stub.SendStreamingMessage(send_request("x"), metadata=V1))
        assert_error(stream_failure, FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED")
        with_extension = (*V1, ("a2a-extensions", REQUIRED_EXTENSION))
        task = (await stub.SendMessage(send_request("x"), metadata=with_extension)).task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Basic dA==", "Bearer", "t"],
    ids=["missing", "unknown-token", "other-scheme", "no-token", "no-scheme"],
)
async def test_an_unauthenticated_call_is_refused(connect: Connect, authorization: str | None) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(bearer_tokens={"t": "alice"})
        metadata = V1 if authorization is None else (*V1, ("authorization", authorization))
        error = await rpc_error(stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata))
        assert_error(error, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
        stream_failure = await stream_error(stub.SendStreamingMessage(send_request("x"), metadata=metadata))
        assert_error(stream_failure, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer("t"))
        assert listed.total_size == 0


async def test_a_task_of_another_caller_is_not_found_never_permission_denied(connect: Connect) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = await connect(agent=OutcomeAgent(), bearer_tokens={"ta": "alice", "tb": "bob"})
        task = await send(stub, "input", metadata=bearer("ta"))
        for call in (
            stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=bearer("tb")),
            stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=bearer("tb")),
        ):
            error = await rpc_error(call)
            assert error.code() != grpc.StatusCode.PERMISSION_DENIED
            assert_error(error, NOT_FOUND, "TASK_NOT_FOUND", taskId=task.id)
        subscribe = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=bearer("tb"))
        assert_error(await stream_error(subscribe), NOT_FOUND, "TASK_NOT_FOUND", taskId=task.id)
        mine = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=bearer("ta"))
        assert mine.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


# ---- the table both ways -------------------------------------------------------------------------

EVERY_ERROR: list[type[A2AError]] = sorted({*ERROR_TABLE, *CODE_ERRORS}, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", EVERY_ERROR)
def test_every_row_decodes_to_the_class_it_was_encoded_from(cls: type[A2AError]) -> None:
    sent = cls("went wrong", metadata={"taskId": "t-1"}, violations=[("message.parts", "is empty")])
    received = error_from_status(sent.code, "", status_trailers(sent))
    assert type(received) is cls
    assert (received.code, received.reason, received.message) == (sent.code, sent.reason, "went wrong")
    assert received.metadata == {"taskId": "t-1"}
    assert received.violations == [("message.parts", "is empty")]


def test_every_grpc_error_code_has_a_class_with_that_code() -> None:
    assert set(ERROR_BY_CODE) == set(grpc.StatusCode) - {grpc.StatusCode.OK}
    for code in ERROR_BY_CODE:
        error = error_from_status(code, "plain", None)
        assert error.code == code, error
        assert not isinstance(error, RemoteError)


def test_validation_sends_invalid_params_and_reads_the_old_reason() -> None:
    assert InvalidRequestError.reason == "INVALID_PARAMS"
    for reason in ("INVALID_PARAMS", "INVALID_REQUEST"):
        sent = RemoteError(INVALID_ARGUMENT, "bad", reason=reason)
        assert type(error_from_status(INVALID_ARGUMENT, "", status_trailers(sent))) is InvalidRequestError


def test_a_status_no_row_knows_travels_on_unchanged() -> None:
    sent = RemoteError(
        grpc.StatusCode.ABORTED, "conflict", reason="SOMETHING_NEWER", domain="example.com", metadata={"k": "v"}
    )
    received = error_from_status(grpc.StatusCode.ABORTED, "", status_trailers(sent))
    assert type(received) is RemoteError
    assert received.code == grpc.StatusCode.ABORTED
    assert (received.reason, received.domain, received.metadata) == ("SOMETHING_NEWER", "example.com", {"k": "v"})


def sent_domain(error: A2AError) -> str:
    """The domain of the ErrorInfo that carries `error`."""
    (_, details), *_ = status_trailers(error)
    assert isinstance(details, bytes)
    info = error_details_pb2.ErrorInfo()
    status_pb2.Status.FromString(details).details[0].Unpack(info)
    return str(info.domain)


def test_the_spec_reasons_travel_in_the_spec_domain_and_ours_in_our_own() -> None:
    assert ERROR_DOMAIN == DOMAIN
    assert {cls.reason for cls in ERROR_TABLE} >= SPEC_REASONS
    domains = {cls.reason: sent_domain(cls("x")) for cls in ERROR_TABLE}
    assert {reason for reason, domain in domains.items() if domain == DOMAIN} == SPEC_REASONS
    assert {domain for reason, domain in domains.items() if reason not in SPEC_REASONS} == {OWN_DOMAIN}
    assert domains["UNAUTHENTICATED"] == OWN_DOMAIN
    assert sent_domain(UnimplementedError("x", metadata={"k": "v"})) == OWN_DOMAIN, "no reason, not the spec's"


@pytest.mark.parametrize("cls", ERROR_TABLE, ids=lambda cls: cls.reason)
@pytest.mark.parametrize("domain", [DOMAIN, OWN_DOMAIN, ""], ids=["spec-domain", "own-domain", "no-domain"])
def test_every_reason_decodes_in_either_domain(cls: type[A2AError], domain: str) -> None:
    """Servers before this one sent every reason in the spec's domain; the reason decides, whatever the domain."""
    sent = RemoteError(cls.code, "went wrong", reason=cls.reason, domain=domain)
    assert type(error_from_status(cls.code, "", status_trailers(sent))) is cls


def test_a_plain_unimplemented_is_an_unsupported_operation_with_its_own_code() -> None:
    error = error_from_status(grpc.StatusCode.UNIMPLEMENTED, "Method not found!", None)
    assert type(error) is UnimplementedError
    assert isinstance(error, UnsupportedOperationError)
    assert error.code == grpc.StatusCode.UNIMPLEMENTED
