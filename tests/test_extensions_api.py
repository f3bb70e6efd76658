"""The extension API for agent authors: declaring, payload validation, attaching data, the card."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, bad_request
from google.protobuf import json_format
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, ExtensionNotActiveError, RequestContext
from a2a_grpc.agents.relay import RelayAgent
from a2a_grpc.call import CallContext
from a2a_grpc.client import A2AClient, text_message
from a2a_grpc.errors import ExtensionSupportRequiredError, InvalidRequestError
from a2a_grpc.ext import timestamp, traceability
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.server import A2AServer

PRIORITY = Extension(
    uri="https://example.com/ext/priority/v1",
    description="A priority for the request, 1 (low) to 5 (high).",
    params={"levels": 5},
    payload_schema={
        "type": "object",
        "required": ["level"],
        "properties": {"level": {"type": "integer", "minimum": 1, "maximum": 5}},
    },
)
NOT_REQUESTED = "https://example.com/ext/never-requested/v1"


class PayloadAgent:
    """Answers with the priority payload it read; tries to attach data for an inactive extension."""

    extensions = [PRIORITY, Extension(uri=NOT_REQUESTED), timestamp.EXTENSION]

    def __init__(self) -> None:
        self.refused: list[str] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        payload = context.extension_payload(PRIORITY)
        artifact = a2a_pb2.Artifact(artifact_id="answer", parts=[a2a_pb2.Part(text=json.dumps(payload))])
        if payload is not None:
            context.attach_extension_data(artifact, PRIORITY, {"level": payload["level"], "handled": True})
        try:
            context.attach_extension_data(artifact, NOT_REQUESTED, {"x": 1})
        except ExtensionNotActiveError as error:
            self.refused.append(str(error))
        await events.artifact(timestamp.stamp(context, artifact), last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture
async def payload_agent() -> PayloadAgent:
    return PayloadAgent()


@pytest.fixture
async def payload_server(start_server: StartServer, payload_agent: PayloadAgent) -> A2AServer:
    return await start_server(agent=payload_agent)


def _send(text: str = "hi", **fields: Any) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(message=text_message(text), **fields)


def _with_priority(metadata: Any = ()) -> tuple[tuple[str, str], ...]:
    return (*V1, ("a2a-extensions", PRIORITY.uri), *metadata)


# ---- payload validation ---------------------------------------------------------------------------

BAD_PLACES: dict[str, tuple[str, Callable[[a2a_pb2.SendMessageRequest, dict[str, Any]], None]]] = {
    "request": ("metadata['https://example.com/ext/priority/v1']['level']", lambda r, v: r.metadata.update(v)),
    "message": (
        "message.metadata['https://example.com/ext/priority/v1']['level']",
        lambda r, v: r.message.metadata.update(v),
    ),
    "part": (
        "message.parts[0].metadata['https://example.com/ext/priority/v1']['level']",
        lambda r, v: r.message.parts[0].metadata.update(v),
    ),
}


@pytest.mark.parametrize("place", sorted(BAD_PLACES))
async def test_a_payload_that_does_not_fit_its_schema_is_invalid_argument_naming_the_key(
    place: str, payload_server: A2AServer
) -> None:
    field, put = BAD_PLACES[place]
    request = _send()
    put(request, {PRIORITY.uri: {"level": 9}})
    async with grpc.aio.insecure_channel(payload_server.grpc_target) as channel:
        stub = make_stub(channel)
        for method in (stub.SendMessage, stub.SendStreamingMessage):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                call = method(request, metadata=_with_priority())
                await (call if method is stub.SendMessage else call.read())
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            violations = bad_request(raised.value).field_violations
            assert [v.field for v in violations] == [field]
            assert PRIORITY.uri in violations[0].description


async def test_the_client_raises_the_violation_as_invalid_request(payload_server: A2AServer) -> None:
    async with A2AClient(payload_server.grpc_target, extensions=[PRIORITY.uri]) as client:
        with pytest.raises(InvalidRequestError) as raised:
            await client.send_message("hi", metadata={PRIORITY.uri: {"level": "high"}})
    assert raised.value.violations[0][0] == "metadata['https://example.com/ext/priority/v1']['level']"


async def test_a_payload_of_an_inactive_extension_is_not_read_nor_validated(
    payload_server: A2AServer,
) -> None:
    async with A2AClient(payload_server.grpc_target) as client:
        result = await client.send_message("hi", metadata={PRIORITY.uri: {"level": 9}})
    assert result.value.task.artifacts[0].parts[0].text == "null"


async def test_an_extension_with_its_own_key_is_validated_under_that_key(payload_server: A2AServer) -> None:
    message = text_message("hi", metadata={timestamp.METADATA_KEY: "last tuesday"})
    async with A2AClient(payload_server.grpc_target, extensions=[timestamp.URI]) as client:
        with pytest.raises(InvalidRequestError) as raised:
            await client.send_message(message)
        good = text_message("hi", metadata={timestamp.METADATA_KEY: "2026-01-02T03:04:05.123456Z"})
        assert (await client.send_message(good)).value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert raised.value.violations[0][0] == f"message.metadata[{timestamp.METADATA_KEY!r}]"


async def test_the_agent_reads_a_valid_payload_message_first(payload_server: A2AServer) -> None:
    async with A2AClient(payload_server.grpc_target, extensions=[PRIORITY.uri]) as client:
        from_request = await client.send_message("hi", metadata={PRIORITY.uri: {"level": 2}})
        message = text_message("hi", metadata={PRIORITY.uri: {"level": 5}})
        from_message = await client.send_message(message, metadata={PRIORITY.uri: {"level": 1}})
    assert json.loads(from_request.value.task.artifacts[0].parts[0].text) == {"level": 2}
    assert json.loads(from_message.value.task.artifacts[0].parts[0].text) == {"level": 5}


# ---- attaching data -------------------------------------------------------------------------------


async def test_attached_data_is_written_under_the_key_and_listed(
    payload_server: A2AServer, payload_agent: PayloadAgent
) -> None:
    async with A2AClient(payload_server.grpc_target, extensions=[PRIORITY.uri, timestamp.URI]) as client:
        result = await client.send_message("hi", metadata={PRIORITY.uri: {"level": 3}})
    artifact = result.value.task.artifacts[0]
    assert list(artifact.extensions) == [PRIORITY.uri, timestamp.URI]
    metadata = json_format.MessageToDict(artifact.metadata)
    assert metadata[PRIORITY.uri] == {"level": 3, "handled": True}
    assert NOT_REQUESTED not in metadata
    stamped = timestamp.timestamp_of(artifact)
    assert stamped is not None and abs((datetime.now(UTC) - stamped).total_seconds()) < 60
    assert payload_agent.refused == [f"extension {NOT_REQUESTED} is not active on this call"]


def _context(*activated: str) -> RequestContext:
    task = a2a_pb2.Task(id="t", context_id="c")
    return RequestContext(text_message("hi"), task, CallContext(activated_extensions=activated))


def test_extension_active_takes_an_extension_as_its_siblings_do() -> None:
    """Finding 10: extension_active answers for an `Extension` as for its URI, as extension_payload and
    attach_extension_data do."""
    context = _context(PRIORITY.uri)
    assert context.extension_active(PRIORITY) and context.extension_active(PRIORITY.uri)
    assert not context.extension_active(timestamp.EXTENSION) and not context.extension_active(timestamp.URI)


def test_attaching_twice_lists_the_uri_once() -> None:
    context = _context(PRIORITY.uri)
    message = a2a_pb2.Message()
    context.attach_extension_data(message, PRIORITY, {"level": 1})
    context.attach_extension_data(message, PRIORITY.uri, {"level": 2})
    assert list(message.extensions) == [PRIORITY.uri]
    assert json_format.MessageToDict(message.metadata) == {PRIORITY.uri: {"level": 2}}


def test_attaching_for_an_inactive_extension_is_refused_and_changes_nothing() -> None:
    context = _context(PRIORITY.uri)
    artifact = a2a_pb2.Artifact(artifact_id="a")
    with pytest.raises(ExtensionNotActiveError):
        context.attach_extension_data(artifact, timestamp.EXTENSION, "2026-01-01T00:00:00Z")
    assert not artifact.metadata.fields and not artifact.extensions
    assert timestamp.stamp(context, artifact) is artifact and timestamp.timestamp_of(artifact) is None


def test_a_stamp_is_rfc3339_utc_and_an_existing_one_is_kept() -> None:
    context = _context(timestamp.URI)
    message = a2a_pb2.Message()
    timestamp.stamp(context, message, datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    timestamp.stamp(context, message)
    assert message.metadata[timestamp.METADATA_KEY] == "2026-05-06T07:08:09.123456Z"
    assert list(message.extensions) == [timestamp.URI]
    assert timestamp.timestamp_of(message) == datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


# ---- traces ---------------------------------------------------------------------------------------


def test_a_tool_step_records_its_parameters_timing_nesting_and_error() -> None:
    tracer = traceability.Tracer(_context(traceability.URI))
    with tracer.tool("outer", {"q": 1}) as outer, pytest.raises(ZeroDivisionError), tracer.tool("divide", {"by": 0}):
        _ = 1 / 0
    steps = tracer.trace.steps
    assert [s.name for s in steps] == ["outer", "divide"]
    assert steps[1].parent_step_id == outer.step_id and steps[0].parent_step_id is None
    assert steps[1].error is not None and steps[1].error.startswith("ZeroDivisionError")
    data = tracer.trace.to_dict()
    assert data["steps"][0]["step_action"] == {"tool_invocation": {"tool_name": "outer", "parameters": {"q": 1}}}
    assert all(step["trace_id"] == data["trace_id"] and step["latency"] is not None for step in data["steps"])
    assert traceability.Trace.from_dict(json.loads(json.dumps(data))).to_dict() == data


def test_an_untraced_call_records_and_attaches_nothing() -> None:
    tracer = traceability.Tracer(_context())
    with tracer.tool("lookup"):
        pass
    message = tracer.attach(a2a_pb2.Message())
    assert tracer.trace.steps == [] and not message.metadata.fields


def test_a_trace_that_does_not_fit_the_schema_is_not_taken() -> None:
    good = a2a_pb2.Message()
    good.metadata.update({traceability.METADATA_KEY: {"trace_id": "t", "steps": []}})
    bad = a2a_pb2.Message()
    bad.metadata.update({traceability.METADATA_KEY: {"trace_id": "t", "steps": [{"call_type": "MAGIC"}]}})
    found = traceability.find_trace(good)
    assert found is not None and found.trace_id == "t"
    assert traceability.find_trace(bad) is None


async def test_a_malformed_trace_in_a_request_is_invalid_argument(start_server: StartServer) -> None:
    server = await start_server(agent=RelayAgent())
    async with A2AClient(server.grpc_target, extensions=[traceability.URI]) as client:
        with pytest.raises(InvalidRequestError) as raised:
            await client.send_message("hi", metadata={traceability.METADATA_KEY: {"steps": "none"}})
    assert raised.value.violations[0][0].startswith(f"metadata[{traceability.METADATA_KEY!r}]")


# ---- one source for the card and the registry ----------------------------------------------------


async def test_the_served_card_lists_exactly_the_registered_extensions(payload_server: A2AServer) -> None:
    registered = payload_server.registry.to_card_extensions()
    assert list(payload_server.card.capabilities.extensions) == registered
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{payload_server.http_port}/.well-known/agent-card.json") as response,
    ):
        served = await response.json()
    assert served["capabilities"]["extensions"] == [json_format.MessageToDict(e) for e in registered]
    assert served["capabilities"]["extensions"][0] == {
        "uri": PRIORITY.uri,
        "description": PRIORITY.description,
        "params": {"levels": 5},
    }


class ParamsAgent:
    """Declares an extension whose params hold integers, nested and in lists, beside a fraction."""

    extensions = [
        Extension(
            uri="https://example.com/ext/limits/v1",
            params={"levels": 5, "range": [1, -5], "limits": {"max": 10, "ratio": 0.5}},
        )
    ]

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_the_served_card_publishes_integral_params_as_integers(start_server: StartServer) -> None:
    declared = {"uri": "https://example.com/ext/window/v1", "params": {"seconds": 30}}
    card = {**BASE_CARD, "capabilities": {**BASE_CARD["capabilities"], "extensions": [declared]}}
    server = await start_server(card=card, agent=ParamsAgent())
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.http_port}/.well-known/agent-card.json") as response,
    ):
        served = json.loads(await response.read())
    params = {e["uri"]: json.dumps(e.get("params"), sort_keys=True) for e in served["capabilities"]["extensions"]}
    assert params == {
        "https://example.com/ext/limits/v1": '{"levels": 5, "limits": {"max": 10, "ratio": 0.5}, "range": [1, -5]}',
        "https://example.com/ext/window/v1": '{"seconds": 30}',
        RESUME_EXTENSION_URI: "null",
    }


async def test_card_and_code_declarations_merge_into_one_list(start_server: StartServer) -> None:
    card_only = "https://example.com/ext/from-the-card/v1"
    card = {
        **BASE_CARD,
        "capabilities": {
            **BASE_CARD["capabilities"],
            "extensions": [
                {"uri": PRIORITY.uri, "description": "the card's words"},
                {"uri": card_only, "required": True},
            ],
        },
    }
    server = await start_server(card=card, agent=PayloadAgent())
    uris = [e.uri for e in server.card.capabilities.extensions]
    assert sorted(uris) == sorted({PRIORITY.uri, NOT_REQUESTED, timestamp.URI, card_only, RESUME_EXTENSION_URI})
    assert len(uris) == len(set(uris))
    declared = {e.uri: e for e in server.card.capabilities.extensions}
    assert declared[PRIORITY.uri].description == PRIORITY.description  # the code's declaration wins
    assert list(server.card.capabilities.extensions) == server.registry.to_card_extensions()
    async with A2AClient(server.grpc_target) as client:
        with pytest.raises(ExtensionSupportRequiredError):  # the card's required extension is enforced
            await client.send_message("hi")
        ok = await client.send_message("hi", extensions=[card_only, PRIORITY.uri])
    assert ok.activated_extensions == (card_only, PRIORITY.uri)
