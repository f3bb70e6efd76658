"""Error trailers stay under a client's header limit whatever the input, so the client gets the real error.

gRPC clients refuse trailers over 8-16 KiB (at random in between) with RESOURCE_EXHAUSTED "Stream removed":
a status that lists every violation, or repeats a long id, would never reach them.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import V1, StartServer, bad_request, error_info
from rpc_helpers import TEST_SECONDS, Stub, assert_error, make_stub, rpc_error, stream_error

from a2a_grpc.errors import (
    MAX_MESSAGE_BYTES,
    MAX_TEXT_BYTES,
    MAX_VIOLATIONS,
    InvalidRequestError,
    TaskNotFoundError,
    error_from_status,
    status_message,
    status_trailers,
)
from a2a_grpc.generated import a2a_pb2

TRAILER_LIMIT = 8 * 1024  # grpc's default soft limit on received metadata
EMPTY_PARTS = 100_000
LONG_IDS = {"4 KB of ASCII": "x" * 4096, "4 KB of two-byte characters": "é" * 2048, "8 KB": "y" * 8192}


def wire_size(entries: list[tuple[str, str | bytes]]) -> int:
    """What header entries weigh against the limit: name, value as sent, 32 bytes each (HPACK's entry size)."""
    total = 0
    for key, value in entries:
        sent = base64.b64encode(value) if isinstance(value, bytes) else value.encode()
        total += len(key) + len(sent) + 32
    return total


def percent_encoded(message: str) -> str:
    """grpc-message as sent: bytes outside printable ASCII, and '%', take three characters."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in message.encode())


def trailer_size(error: grpc.aio.AioRpcError) -> int:
    status = [("grpc-status", str(error.code().value[0])), ("grpc-message", percent_encoded(error.details() or ""))]
    return wire_size([*status, *(error.trailing_metadata() or ())])


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Stub]:
    server = await start_server()
    channel = grpc.aio.insecure_channel(server.grpc_target)
    yield make_stub(channel)
    await channel.close()


def empty_parts_request() -> a2a_pb2.SendMessageRequest:
    parts = [a2a_pb2.Part() for _ in range(EMPTY_PARTS)]
    return a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=parts))


def assert_bounded_bad_request(error: grpc.aio.AioRpcError) -> None:
    assert_error(error, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    violations = bad_request(error).field_violations
    assert [v.field for v in violations[:MAX_VIOLATIONS]] == [f"message.parts[{i}]" for i in range(MAX_VIOLATIONS)]
    assert (violations[-1].field, violations[-1].description) == ("", "and 99,980 more violations")
    assert len(violations) == MAX_VIOLATIONS + 1
    assert trailer_size(error) < TRAILER_LIMIT


async def test_a_hundred_thousand_empty_parts_get_a_bounded_bad_request(start_server: StartServer) -> None:
    server = await start_server(max_parts=EMPTY_PARTS)  # the default --max-parts refuses them before any check
    async with asyncio.timeout(TEST_SECONDS), grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        request = empty_parts_request()
        assert_bounded_bad_request(await rpc_error(stub.SendMessage(request, metadata=V1)))
        assert_bounded_bad_request(await stream_error(stub.SendStreamingMessage(request, metadata=V1)))


@pytest.mark.parametrize("task_id", LONG_IDS.values(), ids=LONG_IDS.keys())
async def test_a_long_unknown_id_is_not_found_on_every_rpc_that_takes_one(stub: Stub, task_id: str) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        errors = [
            await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)),
            await rpc_error(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=V1)),
            await stream_error(stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=V1)),
        ]
        for error in errors:
            assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
            shown = error_info(error).metadata["taskId"]
            assert len(shown.encode()) <= MAX_TEXT_BYTES
            head, _, tail = shown.partition("…")
            assert task_id.startswith(head) and task_id.endswith(tail) and head and tail
            assert (error.details() or "").endswith(" not found")
            assert trailer_size(error) < TRAILER_LIMIT


def test_the_largest_status_is_under_the_limit_in_four_byte_characters() -> None:
    wide = "\U0001f600" * 10_000
    errors = [
        TaskNotFoundError(wide, metadata={wide: wide, "taskId": wide, "contextId": wide}),
        InvalidRequestError(wide, violations=[(wide, wide)] * 1000),
    ]
    for error in errors:
        message = ("grpc-message", percent_encoded(status_message(error)))
        assert wire_size([message, *status_trailers(error)]) < TRAILER_LIMIT - 1024, "room left for the echo"
        assert len(status_message(error).encode()) <= MAX_MESSAGE_BYTES


def test_details_within_the_bounds_travel_unchanged() -> None:
    violations = [("f" * 50, "d" * 50)] * MAX_VIOLATIONS
    sent = InvalidRequestError(
        "m" * MAX_MESSAGE_BYTES, metadata={"taskId": "t" * MAX_TEXT_BYTES}, violations=violations
    )
    received = error_from_status(sent.code, "", status_trailers(sent))
    assert (received.message, received.metadata, received.violations) == (sent.message, sent.metadata, violations)
