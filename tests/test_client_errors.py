"""Every status a caller can see arrives as its typed error: real servers on 127.0.0.1, real channels,
the client interceptors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import StartServer
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from rpc_helpers import TEST_SECONDS, Stub, make_stub

from a2a_grpc.client.cli import describe_error
from a2a_grpc.errors import (
    ERROR_DOMAIN,
    STATUS_DETAILS_KEY,
    A2AError,
    AbortedError,
    AlreadyExistsError,
    AuthenticationError,
    CallCancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    RemoteError,
    ResourceExhaustedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.client import client_interceptors

SLOW = "slow"

PLAIN_STATUS_ERRORS: dict[grpc.StatusCode, type[A2AError]] = {
    grpc.StatusCode.CANCELLED: CallCancelledError,
    grpc.StatusCode.UNKNOWN: UnknownError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DATA_LOSS: DataLossError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
}


def rich_trailers(code: grpc.StatusCode, reason: str) -> tuple[tuple[str, bytes], ...]:
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata={"taskId": "t-1"})
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=f"{code.name} {reason}", details=[detail])
    return ((STATUS_DETAILS_KEY, status.SerializeToString()),)


async def abort_as_named(task_id: str, context: grpc.aio.ServicerContext) -> None:
    """End the call with the status `task_id` names: `CODE`, or `CODE:REASON` for an ErrorInfo."""
    if task_id == SLOW:
        await asyncio.sleep(TEST_SECONDS)
    name, _, reason = task_id.partition(":")
    code = grpc.StatusCode[name]
    await context.abort(code, f"{name} from the peer", rich_trailers(code, reason) if reason else ())


class AbortingServicer(a2a_pb2_grpc.A2AServiceServicer):
    """A peer whose GetTask and SubscribeToTask fail with the status the task id names."""

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, context: grpc.aio.ServicerContext) -> a2a_pb2.Task:
        await abort_as_named(request.id, context)
        raise AssertionError("abort returned")

    async def SubscribeToTask(
        self, request: a2a_pb2.SubscribeToTaskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        await abort_as_named(request.id, context)
        yield a2a_pb2.StreamResponse()


@pytest.fixture
async def peer() -> AsyncIterator[str]:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(AbortingServicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture
async def peer_stub(peer: str) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(peer, interceptors=client_interceptors()) as channel:
        yield make_stub(channel)


@pytest.fixture
async def nowhere_stub() -> AsyncIterator[Stub]:
    """A stub for a loopback port that is bound, so nothing else takes it, and never listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
        async with grpc.aio.insecure_channel(target, interceptors=client_interceptors()) as channel:
            yield make_stub(channel)


async def get_task_error(stub: Stub, task_id: str, deadline: float | None = None) -> A2AError:
    with pytest.raises(A2AError) as raised:
        await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), timeout=deadline)
    return raised.value


def assert_decoded(error: A2AError, cls: type[A2AError], code: grpc.StatusCode) -> None:
    assert type(error) is cls, repr(error)
    assert error.code == code
    cause: Any = error.__cause__
    assert isinstance(cause, grpc.aio.AioRpcError) and cause.code() == code


# ---- a status without ErrorInfo: the code names the class ----------------------------------------


@pytest.mark.parametrize("code", list(PLAIN_STATUS_ERRORS), ids=lambda code: code.name)
async def test_a_plain_status_from_the_peer_is_the_class_of_its_code(peer_stub: Stub, code: grpc.StatusCode) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(peer_stub, code.name)
    assert_decoded(error, PLAIN_STATUS_ERRORS[code], code)
    assert error.message == f"{code.name} from the peer"
    assert error.metadata == {}


async def test_a_plain_status_ending_a_stream_is_the_class_of_its_code(peer_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stream = peer_stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="NOT_FOUND"))
        with pytest.raises(NotFoundError) as raised:
            async for _ in stream:
                pass
    assert_decoded(raised.value, NotFoundError, grpc.StatusCode.NOT_FOUND)


async def test_nothing_listening_is_an_unavailable_error(nowhere_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(nowhere_stub, "x", deadline=5)
    assert_decoded(error, UnavailableError, grpc.StatusCode.UNAVAILABLE)


async def test_a_call_past_its_deadline_is_a_deadline_exceeded_error(peer_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(peer_stub, SLOW, deadline=0.2)
    assert_decoded(error, DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_a_plain_unimplemented_is_still_an_unsupported_operation(peer_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(peer_stub, "UNIMPLEMENTED")
    assert isinstance(error, UnsupportedOperationError)
    assert error.code == grpc.StatusCode.UNIMPLEMENTED


# ---- a status with ErrorInfo: the reason names the class -----------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        ("FAILED_PRECONDITION:TASK_NOT_CANCELABLE", TaskNotCancelableError),
        ("UNIMPLEMENTED:UNSUPPORTED_OPERATION", UnsupportedOperationError),
        ("INVALID_ARGUMENT:INVALID_PARAMS", InvalidRequestError),
        ("INVALID_ARGUMENT:INVALID_REQUEST", InvalidRequestError),
    ],
)
async def test_the_reason_wins_over_the_code(peer_stub: Stub, status: str, cls: type[A2AError]) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(peer_stub, status)
    assert type(error) is cls, repr(error)
    assert error.metadata == {"taskId": "t-1"}


async def test_an_unknown_reason_is_a_remote_error_with_what_was_received(peer_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(peer_stub, "NOT_FOUND:SOMETHING_NEW")
    assert_decoded(error, RemoteError, grpc.StatusCode.NOT_FOUND)
    assert error.reason == "SOMETHING_NEW"
    assert error.metadata == {"taskId": "t-1"}
    assert describe_error(error).splitlines() == [
        "a2a-grpc: NOT_FOUND SOMETHING_NEW: NOT_FOUND SOMETHING_NEW",
        "  taskId: t-1",
    ]


async def test_the_cli_reports_the_received_code_and_no_empty_reason(nowhere_stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        error = await get_task_error(nowhere_stub, "x", deadline=5)
    assert error.reason == ""
    assert describe_error(error).startswith("a2a-grpc: UNAVAILABLE: "), "no reason part when there is none"


async def test_only_task_not_found_from_an_a2a_server_is_a_task_not_found_error(
    start_server: StartServer, peer_stub: Stub
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server()
        async with grpc.aio.insecure_channel(server.grpc_target, interceptors=client_interceptors()) as channel:
            error = await get_task_error(make_stub(channel), "no-such-task")
        plain = await get_task_error(peer_stub, "NOT_FOUND")
    assert_decoded(error, TaskNotFoundError, grpc.StatusCode.NOT_FOUND)
    assert error.metadata["taskId"] == "no-such-task"
    assert not isinstance(plain, TaskNotFoundError)
    assert_decoded(plain, NotFoundError, grpc.StatusCode.NOT_FOUND)
