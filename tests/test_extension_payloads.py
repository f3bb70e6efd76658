"""Extension payloads: bounded in size, and large ones validated without stalling other calls."""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

import grpc
import pytest
from conftest import V1, StartServer, bad_request
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.cli import add_serve_parser
from a2a_grpc.client import text_message
from a2a_grpc.ext import traceability
from a2a_grpc.extensions import MAX_EXTENSION_PAYLOAD_BYTES, ExtensionPayload, ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer
from a2a_grpc.servicer import INLINE_VALIDATION_BYTES

KEY = traceability.METADATA_KEY
TRACED = (*V1, ("a2a-extensions", traceability.URI))
# The fewest bytes a valid step takes: each one costs a whole step's validation against the schema.
STEP = {"step_id": "", "call_type": "TOOL"}
RAISED_LIMIT = 2 * 1024 * 1024
PARTS = 10  # with the request and message metadata: 12 payloads at the limit in one request
HEALTH_INTERVAL = 0.005
# Validating in a worker thread still takes the GIL from the loop now and then (about 0.12 s at p99 on a
# busy 2-core machine); on the loop itself, a check would wait for the whole validation (0.4 s and more).
HEALTH_P99_SECONDS = 0.2
CALL_TIMEOUT = 20.0


class TracedAgent:
    """Declares traceability and counts its runs."""

    extensions = [traceability.EXTENSION]

    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.runs += 1
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def trace_size(steps: int) -> int:
    """The serialized size of a trace of `steps` minimal steps, as the server measures a payload."""
    value = struct_pb2.Value()
    value.struct_value.update({"trace_id": "", "steps": [STEP] * steps})
    return int(value.ByteSize())


def largest_trace(max_bytes: int) -> dict[str, Any]:
    """A valid trace of as many minimal steps as fit in `max_bytes`."""
    empty = trace_size(0)
    steps = (max_bytes - empty) // (trace_size(1) - empty)
    while trace_size(steps) > max_bytes:
        steps -= 1
    return {"trace_id": "", "steps": [STEP] * steps}


def traced_request(trace: dict[str, Any], *, parts: int = 0) -> a2a_pb2.SendMessageRequest:
    """`trace` in the request and message metadata, and in that of `parts` extra parts."""
    message = text_message("hi", metadata={KEY: trace})
    for _ in range(parts):
        part = message.parts.add(text="more")
        part.metadata.update({KEY: trace})
    request = a2a_pb2.SendMessageRequest(message=message)
    request.metadata.update({KEY: trace})
    return request


def validation_seconds(request: a2a_pb2.SendMessageRequest) -> float:
    """How long validating the request's traceability payloads takes, here, on this thread."""
    registry = ExtensionRegistry([traceability.EXTENSION])
    payloads = registry.schema_payloads([traceability.URI], request)
    start = time.perf_counter()
    assert registry.payload_violations(payloads) == []
    return time.perf_counter() - start


async def health_latencies(
    channel: grpc.aio.Channel, since: float, busy: asyncio.Future[Any]
) -> list[tuple[float, float]]:
    """(due, latency) of health checks due every HEALTH_INTERVAL from `since` until `busy` is done, each
    timed from when it was due: a stalled event loop shows as the wait of every check it delayed."""
    check = health_pb2_grpc.HealthStub(channel).Check
    loop = asyncio.get_running_loop()

    async def timed_check(due: float) -> tuple[float, float]:
        response = await check(health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT)
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        return due, loop.time() - due

    due = since
    checks: list[asyncio.Future[tuple[float, float]]] = []
    while not busy.done():
        while due <= loop.time():  # every check due by now, however late this loop turn came
            checks.append(asyncio.ensure_future(timed_check(due)))
            due += HEALTH_INTERVAL
        await asyncio.sleep(due - loop.time())
    return list(await asyncio.gather(*checks))


def p99(values: list[float]) -> float:
    return sorted(values)[math.ceil(0.99 * len(values)) - 1]


def watch_validation(server: A2AServer, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[float]]:
    """An event set when the server starts validating payloads (on whatever thread), and the start and
    end times of that validation on the loop's clock."""
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    times: list[float] = []
    validate = server.registry.payload_violations

    def timed(payloads: list[ExtensionPayload]) -> list[tuple[str, str]]:
        times.append(loop.time())
        loop.call_soon_threadsafe(started.set)
        try:
            return validate(payloads)
        finally:
            times.append(loop.time())

    monkeypatch.setattr(server.registry, "payload_violations", timed)
    return started, times


async def health_while_validating(
    server: A2AServer, request: a2a_pb2.SendMessageRequest, monkeypatch: pytest.MonkeyPatch
) -> list[float]:
    """The latencies of the health checks due while the server validates `request`'s payloads."""
    started, times = watch_validation(server, monkeypatch)
    async with (
        grpc.aio.insecure_channel(server.grpc_target) as sending,
        grpc.aio.insecure_channel(server.grpc_target) as checking,
    ):
        await health_pb2_grpc.HealthStub(checking).Check(health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT)
        send = asyncio.ensure_future(make_stub(sending).SendMessage(request, metadata=TRACED, timeout=CALL_TIMEOUT))
        await asyncio.wait_for(started.wait(), CALL_TIMEOUT)
        checks = await health_latencies(checking, times[0], send)
        response = await send
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    return [latency for due, latency in checks if due <= times[1]]


@pytest.fixture
def agent() -> TracedAgent:
    return TracedAgent()


async def test_a_payload_over_the_limit_is_refused_naming_its_key_before_the_schema_is_checked(
    start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await start_server(agent=agent)
    validation_started, _ = watch_validation(server, monkeypatch)
    over = largest_trace(MAX_EXTENSION_PAYLOAD_BYTES + 64)
    assert trace_size(len(over["steps"])) > MAX_EXTENSION_PAYLOAD_BYTES
    request = traced_request({"trace_id": "", "steps": [STEP]})
    request.message.parts[0].metadata.update({KEY: over})
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        for method in (stub.SendMessage, stub.SendStreamingMessage):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                call = method(request, metadata=TRACED, timeout=CALL_TIMEOUT)
                await (call if method is stub.SendMessage else call.read())
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            violations = bad_request(raised.value).field_violations
            assert [v.field for v in violations] == [f"message.parts[0].metadata[{KEY!r}]"]
            assert f"over the limit of {MAX_EXTENSION_PAYLOAD_BYTES} bytes" in violations[0].description
    assert not validation_started.is_set()
    assert agent.runs == 0


async def test_health_stays_responsive_while_payloads_at_the_limit_are_validated(
    start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = traced_request(largest_trace(MAX_EXTENSION_PAYLOAD_BYTES), parts=PARTS)
    assert validation_seconds(request) > 1.5 * HEALTH_P99_SECONDS, "on the event loop, this would stall health"
    server = await start_server(agent=agent)
    latencies = await health_while_validating(server, request, monkeypatch)
    assert len(latencies) >= 10
    assert p99(latencies) < HEALTH_P99_SECONDS
    assert agent.runs == 1


async def test_health_stays_responsive_while_a_payload_at_a_raised_limit_is_validated(
    start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    request.metadata.update({KEY: largest_trace(RAISED_LIMIT)})
    assert validation_seconds(request) > 1.5 * HEALTH_P99_SECONDS, "on the event loop, this would stall health"
    server = await start_server(agent=agent, max_extension_payload_bytes=RAISED_LIMIT)
    latencies = await health_while_validating(server, request, monkeypatch)
    assert len(latencies) >= 10
    assert p99(latencies) < HEALTH_P99_SECONDS
    assert agent.runs == 1


@pytest.mark.parametrize(
    "size", [INLINE_VALIDATION_BYTES // 2, MAX_EXTENSION_PAYLOAD_BYTES], ids=["inline", "in a worker thread"]
)
async def test_a_payload_that_does_not_fit_the_schema_still_names_the_field(
    size: int, start_server: StartServer, agent: TracedAgent
) -> None:
    server = await start_server(agent=agent)
    trace = largest_trace(size)
    trace["steps"][0] = {"step_id": "", "call_type": "tool"}
    request = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    request.metadata.update({KEY: trace})
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await make_stub(channel).SendMessage(request, metadata=TRACED, timeout=CALL_TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = bad_request(raised.value).field_violations
    assert [v.field for v in violations] == [f"metadata[{KEY!r}]['steps'][0]['call_type']"]
    assert violations[0].description.startswith("does not fit the schema of extension")
    assert violations[0].description.endswith("is not one of ['AGENT', 'TOOL', 'HOST']")
    assert agent.runs == 0


def test_the_limit_is_a_serve_flag_and_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    monkeypatch.delenv("A2A_GRPC_MAX_EXTENSION_PAYLOAD_BYTES", raising=False)
    add_serve_parser(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["serve"]).max_extension_payload_bytes == MAX_EXTENSION_PAYLOAD_BYTES
    assert parser.parse_args(["serve", "--max-extension-payload-bytes", "100"]).max_extension_payload_bytes == 100
    monkeypatch.setenv("A2A_GRPC_MAX_EXTENSION_PAYLOAD_BYTES", "200")
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["serve"]).max_extension_payload_bytes == 200
