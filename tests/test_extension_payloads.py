"""Extension payloads: bounded in size, and large ones validated without stalling other calls."""

from __future__ import annotations

import argparse
import asyncio
import threading
from typing import Any

import grpc
import pytest
from conftest import V1, StartServer, bad_request
from google.protobuf import struct_pb2
from rpc_helpers import make_stub

from a2a_grpc import servicer
from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.cli import add_serve_parser
from a2a_grpc.client import text_message
from a2a_grpc.ext import traceability
from a2a_grpc.extensions import MAX_EXTENSION_PAYLOAD_BYTES, ExtensionPayload
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.input_modes import AcceptedInputModes
from a2a_grpc.server import A2AServer
from a2a_grpc.servicer import INLINE_VALIDATION_BYTES, INLINE_WALK_BYTES
from a2a_grpc.validation import validate_send

KEY = traceability.METADATA_KEY
TRACED = (*V1, ("a2a-extensions", traceability.URI))
# The fewest bytes a valid step takes: each one costs a whole step's validation against the schema.
STEP = {"step_id": "", "call_type": "TOOL"}
RAISED_LIMIT = 2 * 1024 * 1024
PARTS = 10  # with the request and message metadata: 12 payloads at the limit in one request
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


def watch_validation(server: A2AServer, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[int]]:
    """An event set when the server starts validating payloads against their schemas, and the threads it
    validated them on."""
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    threads: list[int] = []
    validate = server.registry.payload_violations

    def watched(payloads: list[ExtensionPayload]) -> list[tuple[str, str]]:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(started.set)
        return validate(payloads)

    monkeypatch.setattr(server.registry, "payload_violations", watched)
    return started, threads


async def send_traced(server: A2AServer, request: a2a_pb2.SendMessageRequest) -> a2a_pb2.SendMessageResponse:
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        response: a2a_pb2.SendMessageResponse = await make_stub(channel).SendMessage(
            request, metadata=TRACED, timeout=CALL_TIMEOUT
        )
        return response


def watch_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads the servicer walked SendMessage requests on (validate_send), as they are walked."""
    threads: list[int] = []

    def watched(
        request: a2a_pb2.SendMessageRequest, max_parts: int, input_modes: AcceptedInputModes | None = None
    ) -> None:
        threads.append(threading.get_ident())
        validate_send(request, max_parts, input_modes)

    monkeypatch.setattr(servicer, "validate_send", watched)
    return threads


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


@pytest.mark.parametrize("limit", [MAX_EXTENSION_PAYLOAD_BYTES, RAISED_LIMIT], ids=["at the limit", "raised"])
async def test_large_payloads_are_validated_off_the_event_loop(
    limit: int, start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validating them takes tens of milliseconds and more: on the loop, every other call would wait."""
    if limit == MAX_EXTENSION_PAYLOAD_BYTES:  # in the request, the message and every part
        request = traced_request(largest_trace(limit), parts=PARTS)
    else:  # one, in the request's metadata
        request = a2a_pb2.SendMessageRequest(message=text_message("hi"))
        request.metadata.update({KEY: largest_trace(limit)})
    server = await start_server(agent=agent, max_extension_payload_bytes=limit)
    _, threads = watch_validation(server, monkeypatch)
    walks = watch_walks(monkeypatch)
    response = await send_traced(server, request)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    loop_thread = threading.get_ident()  # in-process: the server's loop is this test's
    assert threads and loop_thread not in threads
    assert walks and loop_thread not in walks


async def test_a_large_request_is_walked_off_the_event_loop_and_a_small_one_on_it(
    start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await start_server(agent=agent)
    walks = watch_walks(monkeypatch)
    large = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    large.metadata.update({"notes": [{"n": index} for index in range(INLINE_WALK_BYTES // 4)]})
    assert large.ByteSize() > INLINE_WALK_BYTES
    small = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    for request in (large, small):
        assert (await send_traced(server, request)).task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    loop_thread = threading.get_ident()
    assert walks[0] != loop_thread and walks[1] == loop_thread


async def test_an_oversized_payload_is_refused_before_the_request_is_walked(
    start_server: StartServer, agent: TracedAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40,000 steps, 1.6 MB: refused for its size as soon as the request is parsed, nothing of it walked."""
    server = await start_server(agent=agent)
    validation_started, _ = watch_validation(server, monkeypatch)
    walks = watch_walks(monkeypatch)
    request = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    request.metadata.update({KEY: {"trace_id": "", "steps": [STEP] * 40_000}})
    assert request.ByteSize() > 1_500_000
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await send_traced(server, request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in bad_request(raised.value).field_violations] == [f"metadata[{KEY!r}]"]
    assert walks == [] and not validation_started.is_set()
    assert agent.runs == 0


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
