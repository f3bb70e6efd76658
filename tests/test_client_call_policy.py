"""Every A2A call the client interceptors make, unary or stream, asyncio or sync, ends the same way on failure:
its error status typed, the echo of its trailers read and its record published with it; one its caller
abandons ends its span. A real grpc.aio peer on 127.0.0.1 refuses each call before any header (a trailers-only
status), echoing an extension in the trailers as an A2A server echoes the ones it activated, or holds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from rpc_helpers import TEST_SECONDS, make_stub

from a2a_grpc.errors import TaskNotFoundError, status_trailers
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.client import (
    ResponseExtensions,
    client_interceptors,
    sync_client_interceptors,
)
from a2a_grpc.telemetry.tracing import Tracing

ECHOED = "https://example.com/ext/echoed/v1"
GET_TASK = "/lf.a2a.v1.A2AService/GetTask"
SUBSCRIBE = "/lf.a2a.v1.A2AService/SubscribeToTask"
Heard = list[tuple[str, tuple[str, ...], str | None]]


HELD = "held"
SPAN_SECONDS = 5.0
POLL_SECONDS = 0.01


class RefusingServicer(a2a_pb2_grpc.A2AServiceServicer):
    """A peer that answers GetTask and SubscribeToTask with TASK_NOT_FOUND, its echo in the trailers alone; but
    a subscription to the task HELD, which it holds without a header until the call ends (`held` is set)."""

    def __init__(self) -> None:
        self.held = asyncio.Event()

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, context: grpc.aio.ServicerContext) -> a2a_pb2.Task:
        await refuse(request.id, context)
        raise AssertionError("abort returned")

    async def SubscribeToTask(
        self, request: a2a_pb2.SubscribeToTaskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        if request.id == HELD:
            self.held.set()
            await asyncio.sleep(TEST_SECONDS)
        await refuse(request.id, context)
        yield a2a_pb2.StreamResponse()


async def refuse(task_id: str, context: grpc.aio.ServicerContext) -> None:
    error = TaskNotFoundError(f"no task {task_id}")
    await context.abort(error.code, error.message, status_trailers(error, (("a2a-extensions", ECHOED),)))


@pytest.fixture
def servicer() -> RefusingServicer:
    return RefusingServicer()


@pytest.fixture
async def peer(servicer: RefusingServicer) -> AsyncIterator[str]:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(0)


def hearing(heard: Heard) -> Any:
    """An observer that notes what each record says when it is published (not what it says later)."""

    def observe(record: ResponseExtensions) -> None:
        heard.append((record.method, record.activated, record.source))

    return observe


async def test_a_stream_refused_before_its_first_event_publishes_its_trailers_echo_as_a_unary_call_does(
    peer: str,
) -> None:
    heard: Heard = []
    interceptors = client_interceptors([ECHOED], on_response=hearing(heard))
    async with grpc.aio.insecure_channel(peer, interceptors=interceptors) as channel:
        stub = make_stub(channel)
        with pytest.raises(TaskNotFoundError):
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="t-1"), timeout=TEST_SECONDS)
        with pytest.raises(TaskNotFoundError):
            async for _ in stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="t-2"), timeout=TEST_SECONDS):
                pass
    assert heard == [(GET_TASK, (ECHOED,), "trailers"), (SUBSCRIBE, (ECHOED,), "trailers")]


def sync_calls(peer: str, heard: Heard) -> list[BaseException]:
    """A unary call and a stream through the sync interceptor, each refused: what each raised."""
    raised: list[BaseException] = []
    with grpc.insecure_channel(peer) as channel:
        intercepted = grpc.intercept_channel(channel, *sync_client_interceptors([ECHOED], on_response=hearing(heard)))
        stub = a2a_pb2_grpc.A2AServiceStub(intercepted)  # type: ignore[no-untyped-call]
        try:
            stub.GetTask(a2a_pb2.GetTaskRequest(id="t-1"), timeout=TEST_SECONDS)
        except Exception as error:
            raised.append(error)
        events: Iterator[Any] = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="t-2"), timeout=TEST_SECONDS)
        try:
            list(events)
        except Exception as error:
            raised.append(error)
    return raised


async def test_sync_calls_refused_end_as_the_asyncio_ones_do(peer: str) -> None:
    heard: Heard = []
    raised = await asyncio.to_thread(sync_calls, peer, heard)
    assert [type(error) for error in raised] == [TaskNotFoundError, TaskNotFoundError]
    assert heard == [(GET_TASK, (ECHOED,), "trailers"), (SUBSCRIBE, (ECHOED,), "trailers")]


async def test_a_stream_its_caller_cancels_before_its_headers_ends_its_client_span(
    peer: str, servicer: RefusingServicer
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptors = client_interceptors(tracer=Tracing(provider).client())
    async with grpc.aio.insecure_channel(peer, interceptors=interceptors) as channel:
        call = make_stub(channel).SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=HELD), timeout=TEST_SECONDS)
        first = asyncio.ensure_future(call.read())
        await servicer.held.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        for _ in range(int(SPAN_SECONDS / POLL_SECONDS)):
            if exporter.get_finished_spans():
                break
            await asyncio.sleep(POLL_SECONDS)
    (span,) = exporter.get_finished_spans()
    assert (span.name, span.kind) == (SUBSCRIBE.lstrip("/"), SpanKind.CLIENT)
    assert span.attributes is not None
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.CANCELLED.value[0]
