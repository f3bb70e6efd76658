"""The client interceptors and A2AClient against real servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD, StartServer
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.call import CallContext
from a2a_grpc.client import A2AClient, AgentCardError, ExtensionPropagator, text_message
from a2a_grpc.errors import (
    AuthenticationError,
    ExtensionSupportRequiredError,
    TaskNotFoundError,
    UnavailableError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.client import ResponseExtensions, client_interceptors, observe_extensions, use_extensions
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.server import A2AServer

REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
UNKNOWN = "https://example.com/ext/unknown/v1"
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED

CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [
            {"uri": REQUIRED, "description": "must be requested", "required": True},
            {"uri": OPTIONAL, "description": "may be requested"},
        ],
    },
}


class ProbeAgent:
    """Records the extensions each message arrived with; "wait" holds the task open until `release`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.seen.append(context.activated_extensions)
        if context.text() == "wait":
            await events.working("waiting")
            await asyncio.wait_for(self.release.wait(), timeout=10)
        await events.artifact(text=context.text(), last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture
async def agent() -> ProbeAgent:
    return ProbeAgent()


@pytest.fixture
async def probe_server(start_server: StartServer, agent: ProbeAgent) -> A2AServer:
    return await start_server(card=CARD, agent=agent)


@pytest.fixture
async def client(probe_server: A2AServer) -> AsyncIterator[A2AClient]:
    async with A2AClient(probe_server.grpc_target, extensions=[REQUIRED]) as client:
        yield client


# ---- construction --------------------------------------------------------------------------------


async def test_a_client_built_from_the_card_url_calls_the_cards_grpc_interface(probe_server: A2AServer) -> None:
    url = f"http://127.0.0.1:{probe_server.http_port}"
    async with await A2AClient.connect(url, extensions=[REQUIRED]) as client:
        assert client.target == probe_server.grpc_target
        card = await client.get_card()
        assert [e.uri for e in card.capabilities.extensions] == [REQUIRED, OPTIONAL, RESUME_EXTENSION_URI]
        result = await client.send_message("via the card")
    assert result.value.task.status.state == COMPLETED
    assert result.activated_extensions == (REQUIRED,)


async def test_a_card_url_that_serves_no_card_is_a_card_error(probe_server: A2AServer) -> None:
    with pytest.raises(AgentCardError, match="HTTP 404"):
        await A2AClient.connect(f"http://127.0.0.1:{probe_server.http_port}/nothing-here.json")


async def test_a_host_port_client_has_no_public_card_to_fetch(client: A2AClient) -> None:
    with pytest.raises(AgentCardError, match="served over HTTP"):
        await client.get_card()


# ---- activation ------------------------------------------------------------------------------------


async def test_the_clients_extensions_are_activated_and_exposed(client: A2AClient, agent: ProbeAgent) -> None:
    result = await client.send_message("hello")
    assert result.value.task.status.state == COMPLETED
    assert result.activated_extensions == (REQUIRED,)
    assert result.is_active(REQUIRED) and not result.is_active(OPTIONAL)
    assert agent.seen[-1] == (REQUIRED,)


async def test_a_call_adds_extensions_to_the_clients_set(client: A2AClient, agent: ProbeAgent) -> None:
    result = await client.send_message("hello", extra_extensions=[OPTIONAL, UNKNOWN])
    assert result.activated_extensions == (REQUIRED, OPTIONAL)
    assert agent.seen[-1] == (REQUIRED, OPTIONAL)
    plain = await client.get_task(result.value.task.id)
    assert plain.activated_extensions == (REQUIRED,)  # the extra was for that one call


async def test_a_call_replaces_the_clients_set(client: A2AClient) -> None:
    result = await client.send_message("hello", extensions=[OPTIONAL, UNKNOWN, REQUIRED])
    assert result.activated_extensions == (OPTIONAL, REQUIRED)
    with pytest.raises(ExtensionSupportRequiredError):
        await client.send_message("hello", extensions=[OPTIONAL])


async def test_the_propagator_forwards_what_the_incoming_call_activated(probe_server: A2AServer) -> None:
    incoming = CallContext(activated_extensions=(OPTIONAL, UNKNOWN))
    async with A2AClient(
        probe_server.grpc_target, extensions=[REQUIRED], propagator=ExtensionPropagator(call=incoming)
    ) as client:
        result = await client.send_message("downstream")
    assert result.activated_extensions == (REQUIRED, OPTIONAL)


async def test_the_propagator_can_forward_only_some_extensions() -> None:
    incoming = CallContext(activated_extensions=(OPTIONAL, UNKNOWN))
    assert ExtensionPropagator(call=incoming, only=frozenset({UNKNOWN}))() == (UNKNOWN,)


# ---- the regression: streaming calls go through the interceptor too -----------------------------


async def test_a_streaming_send_carries_the_extension_header(client: A2AClient, agent: ProbeAgent) -> None:
    stream = client.send_streaming_message("streamed", extra_extensions=[OPTIONAL])
    events = await stream.collect()
    assert [e.WhichOneof("payload") for e in events] == ["task", "artifact_update", "status_update"]
    assert events[-1].status_update.status.state == COMPLETED
    assert agent.seen[-1] == (REQUIRED, OPTIONAL)  # what the server negotiated from the header
    assert stream.activated_extensions == (REQUIRED, OPTIONAL)  # and echoed back


async def test_a_subscription_carries_the_extension_header(client: A2AClient, agent: ProbeAgent) -> None:
    sent = await client.send_message("wait", configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True))
    task_id = sent.value.task.id
    async with client.subscribe(task_id, extra_extensions=[OPTIONAL]) as stream:
        # without the header the required extension would refuse the call before the snapshot
        assert await stream.headers() == (REQUIRED, OPTIONAL)
        events: list[a2a_pb2.StreamResponse] = []
        async for event in stream:
            events.append(event)
            if len(events) == 1:
                assert event.task.id == task_id
                agent.release.set()
    assert events[-1].status_update.status.state == COMPLETED


async def test_raw_stubs_on_an_intercepted_channel_stream_with_the_header(
    probe_server: A2AServer, agent: ProbeAgent
) -> None:
    interceptors = client_interceptors(extensions=[REQUIRED, OPTIONAL])
    async with grpc.aio.insecure_channel(probe_server.grpc_target, interceptors=interceptors) as channel:
        stub = make_stub(channel)
        call = stub.SendStreamingMessage(a2a_pb2.SendMessageRequest(message=text_message("raw")))
        events = [event async for event in call]
        headers = await call.initial_metadata()
    assert events[-1].status_update.status.state == COMPLETED
    assert agent.seen[-1] == (REQUIRED, OPTIONAL)
    assert (("a2a-extensions", f"{REQUIRED},{OPTIONAL}")) in tuple(headers)


# ---- exposure of the echo --------------------------------------------------------------------------


async def test_observers_see_each_responses_activated_set(probe_server: A2AServer) -> None:
    seen_by_callback: list[ResponseExtensions] = []
    interceptors = client_interceptors(extensions=[REQUIRED], on_response=seen_by_callback.append)
    async with grpc.aio.insecure_channel(probe_server.grpc_target, interceptors=interceptors) as channel:
        stub = make_stub(channel)
        with observe_extensions() as records:
            sent = await stub.SendMessage(a2a_pb2.SendMessageRequest(message=text_message("one")))
            with use_extensions([REQUIRED, OPTIONAL]):
                await stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id))
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=(("a2a-extensions", OPTIONAL),))
    # the server's default: unary calls echo in the trailers
    assert [(r.method.rsplit("/", 1)[1], r.activated, r.source) for r in records] == [
        ("SendMessage", (REQUIRED,), "trailers"),
        ("GetTask", (REQUIRED, OPTIONAL), "trailers"),
    ]
    assert [r.activated for r in seen_by_callback] == [(REQUIRED,), (REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL)]


async def test_nothing_activated_is_an_empty_set(start_server: StartServer) -> None:
    server = await start_server()
    async with A2AClient(server.grpc_target, extensions=[UNKNOWN]) as client:
        result = await client.send_message("plain")
    assert result.activated_extensions == ()


# ---- typed errors ----------------------------------------------------------------------------------


async def test_an_unknown_task_is_task_not_found(client: A2AClient) -> None:
    with pytest.raises(TaskNotFoundError) as raised:
        await client.get_task("no-such-task")
    assert raised.value.metadata["taskId"] == "no-such-task"
    assert isinstance(raised.value.__cause__, grpc.aio.AioRpcError)


@pytest.mark.parametrize("method", ["send", "stream", "get", "list"])
async def test_a_missing_required_extension_is_extension_support_required(method: str, probe_server: A2AServer) -> None:
    async with A2AClient(probe_server.grpc_target, extensions=[OPTIONAL]) as client:
        with pytest.raises(ExtensionSupportRequiredError) as raised:
            if method == "send":
                await client.send_message("hi")
            elif method == "stream":
                await client.send_streaming_message("hi").collect()
            elif method == "get":
                await client.get_task("any")
            else:
                await client.list_tasks()
    assert raised.value.metadata["missingExtensions"] == REQUIRED


@pytest.mark.parametrize("version", ["0.3", "2.0"])
async def test_a_client_speaking_another_version_gets_version_not_supported(
    version: str, probe_server: A2AServer
) -> None:
    async with A2AClient(probe_server.grpc_target, extensions=[REQUIRED], version=version) as client:
        with pytest.raises(VersionNotSupportedError, match=r"a2a-version: 1\.0"):
            await client.send_message("hi")


async def test_a_calls_own_version_header_wins(probe_server: A2AServer) -> None:
    async with A2AClient(probe_server.grpc_target, extensions=[REQUIRED]) as client:
        with pytest.raises(VersionNotSupportedError):
            await client.get_task("any", headers=[("a2a-version", "0.3")])


async def test_subscribing_to_a_finished_task_is_unsupported_operation(client: A2AClient) -> None:
    done = await client.send_message("finished")
    with pytest.raises(UnsupportedOperationError):
        await client.subscribe(done.value.task.id).collect()


async def test_streaming_to_an_agent_without_streaming_is_unsupported_operation(start_server: StartServer) -> None:
    card = {**CARD, "capabilities": {**CARD["capabilities"], "streaming": False}}
    server = await start_server(card=card)
    async with A2AClient(server.grpc_target, extensions=[REQUIRED]) as client:
        with pytest.raises(UnsupportedOperationError):
            await client.send_streaming_message("hi").collect()


async def test_call_headers_reach_the_server(start_server: StartServer) -> None:
    server = await start_server(bearer_tokens={"s3cret": "alice"})
    async with A2AClient(server.grpc_target, headers=[("authorization", "Bearer s3cret")]) as client:
        assert (await client.send_message("hi")).value.task.status.state == COMPLETED
        with pytest.raises(AuthenticationError):
            await client.send_message("hi", headers=[("authorization", "Bearer wrong")])


async def test_untyped_mode_leaves_the_grpc_error(probe_server: A2AServer) -> None:
    async with grpc.aio.insecure_channel(
        probe_server.grpc_target, interceptors=client_interceptors(typed_errors=False)
    ) as channel:
        stub = make_stub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="x"))
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_an_unreachable_agent_is_a_remote_error_with_its_code() -> None:
    async with A2AClient("127.0.0.1:1", timeout=5) as client:
        with pytest.raises(UnavailableError) as raised:
            await client.get_task("x")
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE


# ---- peers that behave like other implementations -------------------------------------------------


def _old_style_unsupported() -> tuple[tuple[str, bytes], ...]:
    """UNIMPLEMENTED with ErrorInfo UNSUPPORTED_OPERATION, as spec v1.0.0 peers send it."""
    info = error_details_pb2.ErrorInfo(reason="UNSUPPORTED_OPERATION", domain="a2a-protocol.org")
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=grpc.StatusCode.UNIMPLEMENTED.value[0], message="old peer", details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()),)


class _OtherPeer(grpc.GenericRpcHandler):  # type: ignore[misc]
    """An A2A peer that echoes in trailers only, one entry per URI (as the Go SDK does), and uses the
    UNIMPLEMENTED code of spec v1.0.0."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        name = handler_call_details.method.rsplit("/", 1)[1]
        echo = (("a2a-extensions", REQUIRED), ("a2a-extensions", OPTIONAL))
        task = a2a_pb2.Task(id="t1", context_id="c1", status=a2a_pb2.TaskStatus(state=COMPLETED))

        async def send(request: a2a_pb2.SendMessageRequest, context: Any) -> a2a_pb2.SendMessageResponse:
            context.set_trailing_metadata(echo)
            return a2a_pb2.SendMessageResponse(task=task)

        async def stream(request: a2a_pb2.SendMessageRequest, context: Any) -> AsyncIterator[a2a_pb2.StreamResponse]:
            yield a2a_pb2.StreamResponse(task=task)
            context.set_trailing_metadata(echo)

        async def unimplemented(request: Any, context: Any) -> Any:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "old peer", trailing_metadata=_old_style_unsupported())

        if name == "SendMessage":
            return grpc.unary_unary_rpc_method_handler(
                send,
                request_deserializer=a2a_pb2.SendMessageRequest.FromString,
                response_serializer=a2a_pb2.SendMessageResponse.SerializeToString,
            )
        if name == "SendStreamingMessage":
            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=a2a_pb2.SendMessageRequest.FromString,
                response_serializer=a2a_pb2.StreamResponse.SerializeToString,
            )
        if name == "CancelTask":
            return grpc.unary_unary_rpc_method_handler(
                unimplemented, request_deserializer=a2a_pb2.CancelTaskRequest.FromString
            )
        return None  # anything else: grpc's own UNIMPLEMENTED, no details


@pytest.fixture
async def other_peer() -> AsyncIterator[str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_OtherPeer()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(0)


async def test_an_echo_in_the_trailers_only_is_read(other_peer: str) -> None:
    async with A2AClient(other_peer, extensions=[REQUIRED, OPTIONAL]) as client:
        result = await client.send_message("hi")
        stream = client.send_streaming_message("hi")
        events = await stream.collect()
    assert result.activated_extensions == (REQUIRED, OPTIONAL)
    assert len(events) == 1
    assert stream.activated_extensions == (REQUIRED, OPTIONAL)  # completed from the trailers


async def test_the_old_unimplemented_code_still_names_the_error(other_peer: str) -> None:
    async with A2AClient(other_peer) as client:
        with pytest.raises(UnsupportedOperationError, match="old peer"):
            await client.cancel_task("t1")
        with pytest.raises(UnsupportedOperationError):  # plain UNIMPLEMENTED, no ErrorInfo
            await client.get_task("t1")
