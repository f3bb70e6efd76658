"""What a push notification config may hold: fields bounded in size, the values a notification sends as HTTP
headers fit to be sent as they are, a bounded number of configs per task, and list pages bounded in bytes."""

from __future__ import annotations

import grpc
import pytest
from conftest import DEAD_HOOK, V1, StartServer, bad_request, send_request
from rpc_helpers import assert_error, make_stub, rpc_error

from a2a_grpc.agents.writer import WriterAgent
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.validation import (
    MAX_PUSH_CREDENTIALS_CHARS,
    MAX_PUSH_ID_CHARS,
    MAX_PUSH_TOKEN_CHARS,
    MAX_PUSH_URL_CHARS,
)

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT

# field -> (a value the config may not hold there, the field a BadRequest names)
UNFIT: dict[str, tuple[dict[str, str], str]] = {
    "token with CR LF": ({"token": "t\r\nX-Injected: 1"}, "token"),
    "token with NUL": ({"token": "t\x00"}, "token"),
    "token beyond ASCII": ({"token": "t\u00e9"}, "token"),
    "token too long": ({"token": "t" * (MAX_PUSH_TOKEN_CHARS + 1)}, "token"),
    "credentials with LF": ({"credentials": "c\nX-Injected: 1"}, "authentication.credentials"),
    "credentials too long": ({"credentials": "c" * (MAX_PUSH_CREDENTIALS_CHARS + 1)}, "authentication.credentials"),
    "scheme with a space": ({"scheme": "Bearer x"}, "authentication.scheme"),
    "id too long": ({"id": "i" * (MAX_PUSH_ID_CHARS + 1)}, "id"),
    "url too long": ({"url": DEAD_HOOK + "/" + "u" * MAX_PUSH_URL_CHARS}, "url"),
    "url with CR LF": ({"url": DEAD_HOOK + "\r\nX-Injected: yes"}, "url"),
    "url with LF": ({"url": DEAD_HOOK + "\nX"}, "url"),
    "url with a space": ({"url": DEAD_HOOK + " x"}, "url"),
    "url with a tab": ({"url": DEAD_HOOK + "\tx"}, "url"),
    "url with NUL": ({"url": DEAD_HOOK + "\x00"}, "url"),
    "url with DEL": ({"url": DEAD_HOOK + "\x7f"}, "url"),
    "url with a C1 control": ({"url": DEAD_HOOK + "\x85"}, "url"),
    "url beyond ASCII": ({"url": DEAD_HOOK + "/caf\u00e9"}, "url"),
}


def config_with(task_id: str, values: dict[str, str]) -> a2a_pb2.TaskPushNotificationConfig:
    config = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=values.get("url", DEAD_HOOK))
    config.id = values.get("id", "")
    config.token = values.get("token", "")
    if "scheme" in values or "credentials" in values:
        config.authentication.scheme = values.get("scheme", "Bearer")
        config.authentication.credentials = values.get("credentials", "")
    return config


@pytest.mark.parametrize("unfit", sorted(UNFIT))
async def test_a_config_that_does_not_fit_is_refused_at_create_naming_its_field(
    unfit: str, start_server: StartServer
) -> None:
    values, field = UNFIT[unfit]
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        refused = await rpc_error(stub.CreateTaskPushNotificationConfig(config_with(task.id, values), metadata=V1))
        assert refused.code() == INVALID_ARGUMENT
        assert [v.field for v in bad_request(refused).field_violations] == [field]
        with_message = send_request("y")
        with_message.configuration.task_push_notification_config.CopyFrom(config_with("", values))
        refused = await rpc_error(stub.SendMessage(with_message, metadata=V1))
        assert refused.code() == INVALID_ARGUMENT
        assert [v.field for v in bad_request(refused).field_violations] == [
            f"configuration.task_push_notification_config.{field}"
        ]
        listed = await stub.ListTaskPushNotificationConfigs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
        )
    assert list(listed.configs) == []


async def test_a_task_keeps_a_bounded_number_of_configs(start_server: StartServer) -> None:
    server = await start_server(max_push_configs_per_task=3)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        for index in range(3):
            await stub.CreateTaskPushNotificationConfig(config_with(task.id, {"id": f"c{index}"}), metadata=V1)
        refused = await rpc_error(stub.CreateTaskPushNotificationConfig(config_with(task.id, {}), metadata=V1))
        assert_error(refused, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_PUSH_CONFIGS", taskId=task.id, limit="3")
        replaced = config_with(task.id, {"id": "c1", "token": "new"})
        assert (await stub.CreateTaskPushNotificationConfig(replaced, metadata=V1)).token == "new"
        await stub.DeleteTaskPushNotificationConfig(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="c0"), metadata=V1
        )
        await stub.CreateTaskPushNotificationConfig(config_with(task.id, {"id": "c3"}), metadata=V1)


async def test_a_page_of_configs_ends_early_past_the_page_bytes_and_the_next_goes_on(
    start_server: StartServer,
) -> None:
    server = await start_server(max_list_page_bytes=3000)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = (await stub.SendMessage(send_request("x"), metadata=V1)).task
        for index in range(8):  # about 1 KB each
            config = config_with(task.id, {"id": f"c{index}", "token": "t" * MAX_PUSH_TOKEN_CHARS})
            await stub.CreateTaskPushNotificationConfig(config, metadata=V1)
        pages: list[list[str]] = []
        token = ""
        for _ in range(10):
            page = await stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id, page_token=token), metadata=V1
            )
            pages.append([config.id for config in page.configs])
            token = page.next_page_token
            if not token:
                break
    assert [config_id for page in pages for config_id in page] == [f"c{index}" for index in range(8)]
    assert all(1 <= len(page) <= 3 for page in pages) and len(pages) >= 3


async def test_a_message_whose_config_finds_no_room_is_refused_before_it_is_taken(start_server: StartServer) -> None:
    """A message continuing a task, with a config the task has no room for: refused, and the task is as it was
    (had the message been taken first, its caller would retry a message the agent already ran)."""
    server = await start_server(agent=WriterAgent(chunk_delay=0), max_push_configs_per_task=1)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = (await stub.SendMessage(send_request("the sea"), metadata=V1)).task
        assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        await stub.CreateTaskPushNotificationConfig(config_with(task.id, {"id": "c0"}), metadata=V1)
        follow = send_request("calm")
        follow.message.task_id = task.id
        follow.configuration.task_push_notification_config.CopyFrom(config_with("", {}))
        refused = await rpc_error(stub.SendMessage(follow, metadata=V1))
        assert_error(refused, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_PUSH_CONFIGS", taskId=task.id)
        still = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
    assert still.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    assert len(still.history) == len(task.history)
