"""JSON values nested too deep are refused up front, and whatever is accepted stays readable by every client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import V1, StartServer, bad_request, send_request
from google.protobuf import struct_pb2
from rpc_helpers import Stub, make_stub, read_all, rpc_error, stream_error

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.nesting import MAX_JSON_NESTING

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT


def nested(levels: int) -> dict[str, Any]:
    """A JSON object `levels` objects deep."""
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(levels - 1):
        value = {"down": value}
    return value


def nested_list(levels: int) -> struct_pb2.Value:
    """A JSON array `levels` arrays deep, as a Value."""
    value: list[Any] = ["x"]
    for _ in range(levels - 1):
        value = [value]
    wrapped = struct_pb2.Value()
    wrapped.list_value.extend(value)
    return wrapped


def request_nesting(place: str, levels: int) -> a2a_pb2.SendMessageRequest:
    request = send_request(f"{place} {levels}")
    if place == "message.metadata":
        request.message.metadata.update(nested(levels))
    elif place == "metadata":
        request.metadata.update(nested(levels))
    elif place == "message.parts[0].metadata":
        request.message.parts[0].metadata.update(nested(levels))
    else:
        request.message.parts.add().data.CopyFrom(nested_list(levels))
    return request


PLACES = ["message.metadata", "metadata", "message.parts[0].metadata", "message.parts[1].data"]


@pytest.fixture(params=["memory", "sqlite"])
async def stub(request: pytest.FixtureRequest, start_server: StartServer, tmp_path: Path) -> AsyncIterator[Stub]:
    store_url = "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/tasks.db"
    server = await start_server(store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("levels", [MAX_JSON_NESTING + 1, 32])
async def test_a_request_nested_past_the_limit_is_refused_naming_the_field(place: str, levels: int, stub: Stub) -> None:
    unary = await rpc_error(stub.SendMessage(request_nesting(place, levels), metadata=V1))
    streamed = await stream_error(stub.SendStreamingMessage(request_nesting(place, levels), metadata=V1))
    for error in (unary, streamed):
        assert error.code() == INVALID_ARGUMENT, error.details()
        assert [v.field for v in bad_request(error).field_violations] == [place]
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
    assert listed.total_size == 0


async def test_everything_accepted_at_the_limit_reads_back_in_every_response(stub: Stub) -> None:
    """A real Python client decodes every response that embeds what was accepted at the limit."""
    task_ids = []
    for place in ("message.metadata", "message.parts[0].metadata", "message.parts[1].data"):
        response = await stub.SendMessage(request_nesting(place, MAX_JSON_NESTING), metadata=V1)
        task_ids.append(response.task.id)
        events = await read_all(stub.SendStreamingMessage(request_nesting(place, MAX_JSON_NESTING), metadata=V1))
        assert events[0].task.history[0].parts[0].text == f"{place} {MAX_JSON_NESTING}"
        task_ids.append(events[0].task.id)
    for task_id in task_ids:
        task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(include_artifacts=True), metadata=V1)
    assert sorted(task.id for task in listed.tasks) == sorted(task_ids)
