"""Bad input answers with the right code and detail, and the server keeps serving afterwards."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import V1, StartServer, bad_request, send_request, user_message
from google.protobuf import timestamp_pb2
from rpc_helpers import TEST_SECONDS, Stub, assert_error, make_stub, rpc_error, stream_error

from a2a_grpc.generated import a2a_pb2

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
MAX_MESSAGE_BYTES = 64 * 1024

Call = Callable[[Stub], Any]


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Stub]:
    server = await start_server(max_message_bytes=MAX_MESSAGE_BYTES)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


async def assert_still_serving(stub: Stub) -> None:
    task = (await stub.SendMessage(send_request("still here"), metadata=V1)).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
    assert got.artifacts[0].parts[0].text == "still here"


def send_with(message: a2a_pb2.Message | None, **configuration: Any) -> Call:
    request = a2a_pb2.SendMessageRequest(configuration=a2a_pb2.SendMessageConfiguration(**configuration))
    if message is not None:
        request.message.CopyFrom(message)
    return lambda stub: stub.SendMessage(request, metadata=V1)


def message_with(**changes: Any) -> a2a_pb2.Message:
    message = user_message("x", message_id="m-1")
    for name, value in changes.items():
        if name == "parts":
            del message.parts[:]
            message.parts.extend(value)
        else:
            setattr(message, name, value)
    return message


def get_task(**fields: Any) -> Call:
    return lambda stub: stub.GetTask(a2a_pb2.GetTaskRequest(**fields), metadata=V1)


def list_tasks(**fields: Any) -> Call:
    return lambda stub: stub.ListTasks(a2a_pb2.ListTasksRequest(**fields), metadata=V1)


INVALID_REQUESTS: dict[str, tuple[Call, str]] = {
    "missing message": (send_with(None), "message"),
    "no parts": (send_with(message_with(parts=[])), "message.parts"),
    "part without content": (send_with(message_with(parts=[a2a_pb2.Part()])), "message.parts[0]"),
    "part with only metadata": (
        send_with(message_with(parts=[a2a_pb2.Part(text="ok"), a2a_pb2.Part(media_type="text/plain")])),
        "message.parts[1]",
    ),
    "empty text part": (send_with(message_with(parts=[a2a_pb2.Part(text="")])), "message.parts[0].text"),
    "empty url part": (send_with(message_with(parts=[a2a_pb2.Part(url="")])), "message.parts[0].url"),
    "ROLE_UNSPECIFIED": (send_with(message_with(role=a2a_pb2.ROLE_UNSPECIFIED)), "message.role"),
    "role out of range": (send_with(message_with(role=9)), "message.role"),
    "missing message_id": (send_with(message_with(message_id="")), "message.message_id"),
    "negative history_length on send": (send_with(message_with(), history_length=-1), "configuration.history_length"),
    "push config without url": (
        send_with(message_with(), task_push_notification_config=a2a_pb2.TaskPushNotificationConfig(token="t")),
        "configuration.task_push_notification_config.url",
    ),
    "NUL in context_id": (send_with(message_with(context_id="c\x00")), "message.context_id"),
    "NUL in task_id": (send_with(message_with(task_id="t\x00")), "message.task_id"),
    "NUL in a push config id": (
        lambda stub: stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id="t", id="c\x00", url="https://h.example/a"), metadata=V1
        ),
        "id",
    ),
    "GetTask without id": (get_task(), "id"),
    "negative history_length on GetTask": (get_task(id="t", history_length=-1), "history_length"),
    "page_size 0": (list_tasks(page_size=0), "page_size"),
    "page_size 101": (list_tasks(page_size=101), "page_size"),
    "negative page_size": (list_tasks(page_size=-5), "page_size"),
    "garbage page_token": (list_tasks(page_token="not a token!"), "page_token"),
    "page_token of another kind": (list_tasks(page_token="WyJjMSIsIngiXQ"), "page_token"),  # a config cursor
    "negative history_length on ListTasks": (list_tasks(history_length=-3), "history_length"),
    "status out of range": (list_tasks(status=42), "status"),
    "CancelTask without id": (
        lambda stub: stub.CancelTask(a2a_pb2.CancelTaskRequest(), metadata=V1),
        "id",
    ),
    "push config list page_size 101": (
        lambda stub: stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="t", page_size=101), metadata=V1
        ),
        "page_size",
    ),
    "push config with a relative url": (
        lambda stub: stub.CreateTaskPushNotificationConfig(
            a2a_pb2.TaskPushNotificationConfig(task_id="t", url="/hook"), metadata=V1
        ),
        "url",
    ),
    "push config get without id": (
        lambda stub: stub.GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id="t"), metadata=V1
        ),
        "id",
    ),
}


@pytest.mark.parametrize("case", INVALID_REQUESTS)
async def test_invalid_request_names_the_field_and_the_server_keeps_serving(stub: Stub, case: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        call, field = INVALID_REQUESTS[case]
        error = await rpc_error(call(stub))
        assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
        violations = bad_request(error).field_violations
        assert field in [v.field for v in violations], violations
        assert all(v.description for v in violations)
        assert field in error.details()
        await assert_still_serving(stub)


async def test_invalid_streaming_requests_name_the_field(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        no_parts = a2a_pb2.SendMessageRequest(message=message_with(parts=[]))
        error = await stream_error(stub.SendStreamingMessage(no_parts, metadata=V1))
        assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
        assert [v.field for v in bad_request(error).field_violations] == ["message.parts"]
        no_id = await stream_error(stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(), metadata=V1))
        assert [v.field for v in bad_request(no_id).field_violations] == ["id"]
        await assert_still_serving(stub)


async def test_every_violation_is_reported(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        message = a2a_pb2.Message(parts=[a2a_pb2.Part()])
        error = await rpc_error(stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=V1))
        fields = {v.field for v in bad_request(error).field_violations}
        assert fields == {"message.message_id", "message.role", "message.parts[0]"}
        await assert_still_serving(stub)


async def test_an_unknown_task_id_is_not_found(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        for task_id in ("unknown", "x" * 100, "../../etc/passwd", "' OR 1=1 --"):
            error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1))
            assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", taskId=task_id)
        await assert_still_serving(stub)


async def test_a_message_over_the_size_limit_is_resource_exhausted(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        huge = send_request("x" * (MAX_MESSAGE_BYTES + 1024))
        error = await rpc_error(stub.SendMessage(huge, metadata=V1))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        stream_failure = await stream_error(stub.SendStreamingMessage(huge, metadata=V1))
        assert stream_failure.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
        assert listed.total_size == 0, "an oversized message must not create a task"
        just_under = send_request("y" * (MAX_MESSAGE_BYTES // 4))  # the response carries it twice
        accepted = (await stub.SendMessage(just_under, metadata=V1)).task
        assert accepted.status.state == a2a_pb2.TASK_STATE_COMPLETED
        await assert_still_serving(stub)


async def test_bytes_that_are_not_a_request_are_invalid_and_leak_nothing(start_server: StartServer) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server()
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            garbage = b"\xff\xff\xff\xff"
            unary = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
            error = await rpc_error(unary(garbage, metadata=V1))
            stream = channel.unary_stream("/lf.a2a.v1.A2AService/SubscribeToTask")
            stream_failure = await stream_error(stream(garbage, metadata=V1))
            for failure in (error, stream_failure):
                assert_error(failure, INVALID_ARGUMENT, "INVALID_PARAMS")
                assert "DecodeError" not in (failure.details() or "")
                assert "lf.a2a.v1" not in (failure.details() or "")
            await assert_still_serving(make_stub(channel))


NESTED_TOKENS = {
    "page_token nested past the JSON decoder's recursion limit": base64.urlsafe_b64encode(b"[" * 3000).decode(),
    "page_token nested 100000 deep": base64.urlsafe_b64encode(b"[" * 100_000).decode(),
}
OUT_OF_RANGE_TIMESTAMPS = {
    "seconds 2**62": timestamp_pb2.Timestamp(seconds=2**62),
    "seconds -2**62": timestamp_pb2.Timestamp(seconds=-(2**62)),
    "after 9999-12-31T23:59:59Z": timestamp_pb2.Timestamp(seconds=253_402_300_800),
    "before 0001-01-01T00:00:00Z": timestamp_pb2.Timestamp(seconds=-62_135_596_801),
    "negative nanos": timestamp_pb2.Timestamp(seconds=0, nanos=-1),
}


def list_configs(**fields: Any) -> Call:
    request = a2a_pb2.ListTaskPushNotificationConfigsRequest(**fields)
    return lambda stub: stub.ListTaskPushNotificationConfigs(request, metadata=V1)


def hostile_list_calls(task_id: str) -> dict[str, tuple[Call, str]]:
    """ListTasks and ListTaskPushNotificationConfigs inputs that once reached the store and came back INTERNAL."""
    calls: dict[str, tuple[Call, str]] = {}
    for name, token in NESTED_TOKENS.items():
        calls[f"ListTasks {name}"] = (list_tasks(page_token=token), "page_token")
        calls[f"ListTaskPushNotificationConfigs {name}"] = (
            list_configs(task_id=task_id, page_token=token),
            "page_token",
        )
    for name, stamp in OUT_OF_RANGE_TIMESTAMPS.items():
        calls[f"status_timestamp_after {name}"] = (list_tasks(status_timestamp_after=stamp), "status_timestamp_after")
    return calls


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_hostile_list_inputs_are_invalid_arguments_and_log_no_error(
    start_server: StartServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, store: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        store_url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"
        server = await start_server(store_url=store_url)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            task = (await stub.SendMessage(send_request("a task to list configs of"), metadata=V1)).task
            for case, (call, field) in hostile_list_calls(task.id).items():
                error = await rpc_error(call(stub))
                assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
                assert [v.field for v in bad_request(error).field_violations] == [field], case
            await assert_still_serving(stub)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
