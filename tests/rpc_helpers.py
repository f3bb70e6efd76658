"""Helpers shared by the RPC tests: stubs, call metadata, error assertions and stream readers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

import grpc
import pytest
from conftest import V1, error_info
from google.rpc import error_details_pb2

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server import A2AServer
from a2a_grpc.tasks import TERMINAL_STATES

Stub = Any  # a2a_pb2_grpc.A2AServiceStub: the generated module carries no type information
Metadata = tuple[tuple[str, str], ...]

DOMAIN = "a2a-protocol.org"
OWN_DOMAIN = "a2a-grpc"
# the ErrorInfo reasons the spec defines (its A2A-specific errors, §3.3.2 and §5.4), in DOMAIN (§10.6);
# every other reason this server sends is in OWN_DOMAIN
SPEC_REASONS = frozenset(
    {
        "TASK_NOT_FOUND",
        "TASK_NOT_CANCELABLE",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "UNSUPPORTED_OPERATION",
        "CONTENT_TYPE_NOT_SUPPORTED",
        "INVALID_AGENT_RESPONSE",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "EXTENSION_SUPPORT_REQUIRED",
        "VERSION_NOT_SUPPORTED",
    }
)
TEST_SECONDS = 20.0  # the bound on any one test's body
TaskState = a2a_pb2.TaskState
TERMINAL = TERMINAL_STATES


def make_stub(channel: grpc.aio.Channel) -> Stub:
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


class Clients:
    """Separate channels (separate clients) opened by one test, closed before its servers stop."""

    def __init__(self) -> None:
        self._channels: list[grpc.aio.Channel] = []

    def stub(self, server: A2AServer) -> Stub:
        channel = grpc.aio.insecure_channel(server.grpc_target)
        self._channels.append(channel)
        return make_stub(channel)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


def bearer(token: str) -> Metadata:
    return (*V1, ("authorization", f"Bearer {token}"))


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """The error a unary call ends with (the test fails if it succeeds)."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def read_all(call: Any) -> list[a2a_pb2.StreamResponse]:
    """Every message of a server stream, until it closes normally."""
    items: list[a2a_pb2.StreamResponse] = []
    while True:
        item = await call.read()
        if item is grpc.aio.EOF:
            return items
        items.append(item)


async def stream_error(call: Any) -> grpc.aio.AioRpcError:
    """The error a server stream ends with; it must send no message first."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        item = await call.read()
        raise AssertionError(f"the stream sent {item!r} before failing")
    return caught.value


def assert_error(
    error: grpc.aio.AioRpcError, code: grpc.StatusCode, reason: str, **metadata: str
) -> error_details_pb2.ErrorInfo:
    """`error` is the given row of the error table, with ErrorInfo in the reason's domain and this metadata."""
    assert error.code() == code, f"{error.code()} {error.details()}"
    info = error_info(error)
    assert info.reason == reason, info
    assert info.domain == domain_of(reason), info
    for key, value in metadata.items():
        assert info.metadata[key] == value, info
    return info


def domain_of(reason: str) -> str:
    """The ErrorInfo domain `reason` travels in: the spec's for its own reasons, ours for the rest."""
    return DOMAIN if reason in SPEC_REASONS else OWN_DOMAIN


def kinds(items: Iterable[a2a_pb2.StreamResponse]) -> list[str]:
    return [str(item.WhichOneof("payload")) for item in items]


def states(items: Iterable[a2a_pb2.StreamResponse]) -> list[int]:
    return [item.status_update.status.state for item in items if item.HasField("status_update")]


def artifact_texts(task: a2a_pb2.Task) -> list[str]:
    return [part.text for artifact in task.artifacts for part in artifact.parts]


def replay(snapshot: a2a_pb2.Task, events: Iterable[a2a_pb2.StreamResponse]) -> a2a_pb2.Task:
    """What a client knows after applying a stream's events to its snapshot, as the spec describes."""
    task = a2a_pb2.Task()
    task.CopyFrom(snapshot)
    for event in events:
        if event.HasField("status_update"):
            task.status.CopyFrom(event.status_update.status)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            existing = [a for a in task.artifacts if a.artifact_id == update.artifact.artifact_id]
            if update.append and existing:
                existing[0].parts.extend(update.artifact.parts)
            elif existing:
                existing[0].CopyFrom(update.artifact)
            else:
                task.artifacts.append(update.artifact)
    return task


async def wait_for_state(stub: Stub, task_id: str, wanted: Iterable[int], metadata: Metadata = V1) -> a2a_pb2.Task:
    """Poll GetTask until the task is in one of `wanted` (bounded by the test's timeout)."""
    wanted = frozenset(wanted)
    while True:
        task: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=metadata)
        if task.status.state in wanted:
            return task
        await asyncio.sleep(0.01)
