"""Server-side negotiation of A2A service parameters (issue 3), through raw generated stubs.

A real server whose card declares one required and one optional extension; its agent declares two
more in code (one depending on the optional extension, one depending on that one) and records what
every call negotiated. Covered: refusal of a call missing the required extension on every RPC, before
any lookup; every header form a real client sends; the echo in response headers (before the first
stream event) and trailers, merged with a handler's own headers; dependencies; `a2a-version`; and
hostile metadata, after which the server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD, DEAD_HOOK, StartServer, error_info, send_request
from google.protobuf import message as protobuf_message

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.errors import ERROR_DOMAIN, VersionNotSupportedError
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.server import VersionCheck
from a2a_grpc.protocol import EXTENSIONS_HEADER, RESUME_EXTENSION_URI
from a2a_grpc.server import A2AServer

Stub = Any  # a2a_pb2_grpc.A2AServiceStub: the generated module carries no type information
Metadata = tuple[tuple[str, str], ...]

REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
DEPENDENT = "https://example.com/ext/dependent/v1"  # declared in code; depends on OPTIONAL
CHAINED = "https://example.com/ext/chained/v1"  # declared in code; depends on DEPENDENT
UNKNOWN = "https://example.com/ext/unknown/v1"
REQUIRED_V2 = "https://example.com/ext/required/v2"
OPTIONAL_V2 = "https://example.com/ext/optional/v2"

NEGOTIATION_CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [
            {"uri": REQUIRED, "description": "Every call must activate it.", "required": True},
            {"uri": OPTIONAL, "description": "A call may activate it."},
        ],
    },
}
OPTIONAL_ONLY_CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extensions": [{"uri": OPTIONAL, "description": "Optional."}]},
}

FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
NO_SUCH_TASK = "no-such-task"
WAIT_SECONDS = 20.0  # the bound on any one wait in these tests
ROOMY_METADATA_BYTES = 1024 * 1024  # lets the hostile headers past the transport to the interceptors


@dataclass(frozen=True)
class Seen:
    """What one call looked like from inside the agent."""

    text: str
    version: str
    requested: tuple[str, ...]
    activated: tuple[str, ...]
    deadline: float | None


class RecordingAgent:
    """Answers every message with an echo artifact, after recording what its call negotiated.

    While `gate` is set and not yet open, `execute` waits for it before answering.
    """

    extensions = [
        Extension(DEPENDENT, description="Needs the optional extension.", dependencies=(OPTIONAL,)),
        Extension(CHAINED, description="Needs the dependent extension.", dependencies=(DEPENDENT,)),
    ]

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.gate: asyncio.Event | None = None

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        call = context.call
        self.seen.append(
            Seen(
                context.text(),
                call.version,
                call.requested_extensions,
                context.activated_extensions,
                call.time_remaining(),
            )
        )
        if self.gate is not None:
            await self.gate.wait()
        await events.artifact(text=context.text(), name="echo", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()

    def seen_once(self) -> Seen:
        assert len(self.seen) == 1, self.seen
        return self.seen[0]


class RequiredWithDependencyAgent(RecordingAgent):
    """Redeclares the card's required extension in code, now depending on the optional one."""

    extensions = [
        Extension(REQUIRED, description="Needs the optional extension.", required=True, dependencies=(OPTIONAL,))
    ]


# ---- helpers -----------------------------------------------------------------------------------


def call_metadata(*extension_values: str, version: str | None = "1.0") -> Metadata:
    """`a2a-version` (unless None) and one `a2a-extensions` entry per value, as given."""
    versions = () if version is None else (("a2a-version", version),)
    return (*versions, *((EXTENSIONS_HEADER, value) for value in extension_values))


def echoed(metadata: Sequence[tuple[str, str | bytes]] | None) -> list[str | bytes]:
    return [value for key, value in metadata or () if key == EXTENSIONS_HEADER]


def make_stub(channel: grpc.aio.Channel) -> Stub:
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


async def responses(call: Any) -> list[Any]:
    """Every response of a unary or server-streaming call."""
    if not isinstance(call, grpc.aio.UnaryStreamCall):
        return [await call]
    items = []
    while (item := await call.read()) is not grpc.aio.EOF:
        items.append(item)
    return items


async def refusal(call: Any) -> grpc.aio.AioRpcError:
    """The error `call` ends with; the test fails if it succeeds."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await asyncio.wait_for(responses(call), WAIT_SECONDS)
    return raised.value


def assert_status(error: grpc.aio.AioRpcError, code: grpc.StatusCode, reason: str) -> dict[str, str]:
    """`error` carries `code` and an ErrorInfo with `reason` in the A2A domain; returns its metadata."""
    assert error.code() == code, f"{error.code()}: {error.details()}"
    info = error_info(error)
    assert (info.reason, info.domain) == (reason, ERROR_DOMAIN), info
    return dict(info.metadata)


def assert_extension_refusal(error: grpc.aio.AioRpcError, missing: str = REQUIRED) -> None:
    metadata = assert_status(error, FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED")
    assert metadata == {"missingExtensions": missing}
    assert missing in error.details()


async def still_serving(stub: Stub, agent: RecordingAgent) -> None:
    """A normal call still completes, and its agent sees the required extension activated."""
    before = len(agent.seen)
    response = await stub.SendMessage(send_request("still serving"), metadata=call_metadata(REQUIRED))
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [seen.activated for seen in agent.seen[before:]] == [(REQUIRED,)]


# ---- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def agent() -> RecordingAgent:
    return RecordingAgent()


@pytest.fixture
async def negotiating_server(start_server: StartServer, agent: RecordingAgent) -> A2AServer:
    # unary calls echo in headers too here, so every echo path is exercised; the default is tested below
    return await start_server(card=NEGOTIATION_CARD, agent=agent, echo_unary_headers=True)


@pytest.fixture
async def stub(negotiating_server: A2AServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(negotiating_server.grpc_target) as channel:
        yield make_stub(channel)


@pytest.fixture
async def roomy_stub(start_server: StartServer, agent: RecordingAgent) -> AsyncIterator[Stub]:
    """The same server, but its transport admits 1 MiB of request headers."""
    server = await start_server(
        card=NEGOTIATION_CARD,
        agent=agent,
        max_metadata_bytes=ROOMY_METADATA_BYTES,
        max_extensions_per_call=10_000,  # past --max-extensions-per-call: the transport is the bound here
        echo_unary_headers=True,
    )
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


# ---- a missing required extension is refused on every RPC, before anything else ------------------

REQUESTS: dict[str, Callable[[], protobuf_message.Message]] = {
    "SendMessage": lambda: send_request("refused"),
    "SendStreamingMessage": lambda: send_request("refused"),
    "GetTask": lambda: a2a_pb2.GetTaskRequest(id=NO_SUCH_TASK),
    "ListTasks": a2a_pb2.ListTasksRequest,
    "CancelTask": lambda: a2a_pb2.CancelTaskRequest(id=NO_SUCH_TASK),
    "SubscribeToTask": lambda: a2a_pb2.SubscribeToTaskRequest(id=NO_SUCH_TASK),
    "CreateTaskPushNotificationConfig": lambda: a2a_pb2.TaskPushNotificationConfig(task_id=NO_SUCH_TASK, url=DEAD_HOOK),
    "GetTaskPushNotificationConfig": lambda: a2a_pb2.GetTaskPushNotificationConfigRequest(
        task_id=NO_SUCH_TASK, id="config"
    ),
    "ListTaskPushNotificationConfigs": lambda: a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=NO_SUCH_TASK),
    "DeleteTaskPushNotificationConfig": lambda: a2a_pb2.DeleteTaskPushNotificationConfigRequest(
        task_id=NO_SUCH_TASK, id="config"
    ),
    "GetExtendedAgentCard": a2a_pb2.GetExtendedAgentCardRequest,
}

# What each call gets once the required extension is sent: the lookups the refusal comes before.
ANSWERS_WHEN_ACCEPTED: dict[str, tuple[grpc.StatusCode, str]] = {
    "GetTask": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "CancelTask": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "SubscribeToTask": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "CreateTaskPushNotificationConfig": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "GetTaskPushNotificationConfig": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "ListTaskPushNotificationConfigs": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "DeleteTaskPushNotificationConfig": (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND"),
    "GetExtendedAgentCard": (FAILED_PRECONDITION, "UNSUPPORTED_OPERATION"),
}


def test_every_rpc_of_the_service_is_covered() -> None:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert set(REQUESTS) == {method.name for method in service.methods}


@pytest.mark.parametrize(
    "extension_values",
    [(), (OPTIONAL,), (f"{OPTIONAL},{DEPENDENT}", UNKNOWN, REQUIRED_V2)],
    ids=["none", "optional-only", "everything-but-required"],
)
@pytest.mark.parametrize("method", sorted(REQUESTS))
async def test_a_call_missing_the_required_extension_is_refused(
    method: str, extension_values: tuple[str, ...], stub: Stub, agent: RecordingAgent
) -> None:
    call = getattr(stub, method)(REQUESTS[method](), metadata=call_metadata(*extension_values))
    error = await refusal(call)
    assert_extension_refusal(error)
    assert echoed(await call.initial_metadata()) == []
    assert echoed(error.trailing_metadata()) == []
    assert agent.seen == []


@pytest.mark.parametrize("method", sorted(ANSWERS_WHEN_ACCEPTED))
async def test_with_the_required_extension_the_same_call_reaches_its_lookup(
    method: str, stub: Stub, agent: RecordingAgent
) -> None:
    call = getattr(stub, method)(REQUESTS[method](), metadata=call_metadata(REQUIRED))
    error = await refusal(call)
    assert_status(error, *ANSWERS_WHEN_ACCEPTED[method])
    assert echoed(error.trailing_metadata()) == [REQUIRED]  # an accepted call keeps its echo on error
    assert agent.seen == []


async def test_a_refused_send_creates_no_task(stub: Stub, agent: RecordingAgent) -> None:
    for method in ("SendMessage", "SendStreamingMessage"):
        assert_extension_refusal(
            await refusal(getattr(stub, method)(send_request("refused"), metadata=call_metadata()))
        )
    listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=call_metadata(REQUIRED))
    assert (listed.total_size, list(listed.tasks)) == (0, [])
    assert agent.seen == []


async def test_the_refusal_comes_before_the_request_is_even_parsed(negotiating_server: A2AServer) -> None:
    async with grpc.aio.insecure_channel(negotiating_server.grpc_target) as channel:
        get_task = channel.unary_unary("/lf.a2a.v1.A2AService/GetTask")  # bytes in, bytes out
        subscribe = channel.unary_stream("/lf.a2a.v1.A2AService/SubscribeToTask")
        not_protobuf = b"\xff\xff\xff\xff"
        assert_extension_refusal(await refusal(get_task(not_protobuf, metadata=call_metadata(OPTIONAL))))
        assert_extension_refusal(await refusal(subscribe(not_protobuf, metadata=call_metadata(OPTIONAL))))


# ---- every header form negotiates the same way ---------------------------------------------------

# name: (the a2a-extensions entries as sent, what the agent sees requested, what it sees activated)
HEADER_FORMS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "one joined entry": ((f"{REQUIRED},{OPTIONAL}",), (REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL)),
    "one entry per uri": ((REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL)),
    "spaces": ((f"  {REQUIRED} ,   {OPTIONAL}  ",), (REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL)),
    "duplicates": (
        (f"{REQUIRED},{OPTIONAL},{REQUIRED}", OPTIONAL, REQUIRED),
        (REQUIRED, OPTIONAL),
        (REQUIRED, OPTIONAL),
    ),
    "empty items": ((f",{REQUIRED},,{OPTIONAL},", ",", ""), (REQUIRED, OPTIONAL), (REQUIRED, OPTIONAL)),
    "unknown uris": (
        (f"{UNKNOWN}, {REQUIRED}", "urn:example:unknown"),
        (UNKNOWN, REQUIRED, "urn:example:unknown"),
        (REQUIRED,),
    ),
    "v2 of the declared optional v1": ((f"{REQUIRED},{OPTIONAL_V2}",), (REQUIRED, OPTIONAL_V2), (REQUIRED,)),
    "request order is kept": ((f"{OPTIONAL},{REQUIRED}",), (OPTIONAL, REQUIRED), (OPTIONAL, REQUIRED)),
    "mixed forms": (
        (f" {UNKNOWN} ,{OPTIONAL}", f"{REQUIRED},,{OPTIONAL}", f"  {REQUIRED}"),
        (UNKNOWN, OPTIONAL, REQUIRED),
        (OPTIONAL, REQUIRED),
    ),
}

# name: the a2a-extensions entries as sent; none of them activates the required extension
REFUSED_FORMS: dict[str, tuple[str, ...]] = {
    "v2 of the declared required v1": (REQUIRED_V2, OPTIONAL),
    "another case": (REQUIRED.upper(),),
    "a trailing slash": (REQUIRED + "/",),
    "a longer uri": (REQUIRED + "1",),
    "an empty value": ("",),
    "only commas": (",,, ,",),
    "a semicolon is no separator": (f"{REQUIRED};{OPTIONAL}",),
}


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("form", sorted(HEADER_FORMS))
async def test_every_header_form_negotiates(form: str, method: str, stub: Stub, agent: RecordingAgent) -> None:
    sent, requested, activated = HEADER_FORMS[form]
    call = getattr(stub, method)(send_request(form), metadata=call_metadata(*sent))
    headers = await call.initial_metadata()
    await responses(call)
    seen = agent.seen_once()
    assert (seen.text, seen.requested, seen.activated) == (form, requested, activated)
    assert echoed(headers) == [",".join(activated)]
    assert echoed(await call.trailing_metadata()) == [",".join(activated)]


@pytest.mark.parametrize("form", sorted(REFUSED_FORMS))
async def test_forms_that_do_not_name_the_required_v1_are_refused(form: str, stub: Stub, agent: RecordingAgent) -> None:
    call = stub.SendMessage(send_request(form), metadata=call_metadata(*REFUSED_FORMS[form]))
    assert_extension_refusal(await refusal(call))
    assert echoed(await call.initial_metadata()) == []
    assert agent.seen == []


async def test_concurrent_calls_each_see_only_their_own_negotiation(stub: Stub, agent: RecordingAgent) -> None:
    choices = [(REQUIRED,), (REQUIRED, OPTIONAL), (OPTIONAL, REQUIRED, DEPENDENT), (UNKNOWN, REQUIRED)]
    sends = [
        stub.SendMessage(send_request(f"call {i}"), metadata=call_metadata(",".join(choices[i % len(choices)])))
        for i in range(24)
    ]
    await asyncio.wait_for(asyncio.gather(*sends), WAIT_SECONDS)
    expected = {f"call {i}": tuple(u for u in choices[i % len(choices)] if u != UNKNOWN) for i in range(24)}
    assert {seen.text: seen.activated for seen in agent.seen} == expected


async def test_the_agent_sees_the_version_and_the_deadline(stub: Stub, agent: RecordingAgent) -> None:
    await stub.SendMessage(send_request("with deadline"), metadata=call_metadata(REQUIRED), timeout=30)
    await stub.SendMessage(send_request("without deadline"), metadata=call_metadata(REQUIRED))
    with_deadline, without_deadline = agent.seen
    assert with_deadline.version == without_deadline.version == "1.0"
    # gRPC converts its monotonic deadline to wall-clock time, so allow a little skew above 30 s
    assert with_deadline.deadline is not None and 0 < with_deadline.deadline <= 31
    assert without_deadline.deadline is None


# ---- the echo ------------------------------------------------------------------------------------


async def test_the_stream_echo_arrives_before_the_first_event(stub: Stub, agent: RecordingAgent) -> None:
    agent.gate = asyncio.Event()  # the agent answers only once the test has read the response headers
    call = stub.SendStreamingMessage(send_request("gated"), metadata=call_metadata(f"{REQUIRED}, {OPTIONAL}"))
    try:
        headers = await asyncio.wait_for(call.initial_metadata(), WAIT_SECONDS)
        assert echoed(headers) == [f"{REQUIRED},{OPTIONAL}"]
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=call_metadata(REQUIRED))
        assert list(listed.tasks) == []  # still held: its agent published nothing, so the task is not shown yet
    finally:
        agent.gate.set()
    events = await asyncio.wait_for(responses(call), WAIT_SECONDS)
    assert events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert echoed(await call.trailing_metadata()) == [f"{REQUIRED},{OPTIONAL}"]


async def test_a_subscription_echoes_its_own_negotiation_before_the_snapshot(stub: Stub, agent: RecordingAgent) -> None:
    agent.gate = asyncio.Event()
    try:
        sent = await stub.SendMessage(
            send_request("background", configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True)),
            metadata=call_metadata(REQUIRED),
        )
        task_id = sent.task.id
        call = stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=call_metadata(OPTIONAL, REQUIRED)
        )
        headers = await asyncio.wait_for(call.initial_metadata(), WAIT_SECONDS)
        assert echoed(headers) == [f"{OPTIONAL},{REQUIRED}"]
        first = await asyncio.wait_for(call.read(), WAIT_SECONDS)
        assert first.task.id == task_id
    finally:
        agent.gate.set()
    rest = await asyncio.wait_for(responses(call), WAIT_SECONDS)
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert echoed(await call.trailing_metadata()) == [f"{OPTIONAL},{REQUIRED}"]


async def test_unary_lookups_echo_one_joined_entry(stub: Stub) -> None:
    sent = await stub.SendMessage(send_request("for lookups"), metadata=call_metadata(REQUIRED))
    metadata = call_metadata(REQUIRED, OPTIONAL, REQUIRED)
    for call in (
        stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=metadata),
        stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata),
    ):
        await call
        assert echoed(await call.initial_metadata()) == [f"{REQUIRED},{OPTIONAL}"]
        assert echoed(await call.trailing_metadata()) == [f"{REQUIRED},{OPTIONAL}"]


@pytest.mark.parametrize(
    "extension_values",
    [(), (UNKNOWN,), (OPTIONAL_V2,), (DEPENDENT,), ("", ",")],
    ids=["none", "unknown", "other-version", "dependency-missing", "empty"],
)
async def test_nothing_activated_means_nothing_echoed(
    extension_values: tuple[str, ...], start_server: StartServer
) -> None:
    agent = RecordingAgent()
    server = await start_server(card=OPTIONAL_ONLY_CARD, agent=agent, echo_unary_headers=True)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        call = stub.SendStreamingMessage(send_request("quiet"), metadata=call_metadata(*extension_values))
        headers = await call.initial_metadata()
        await responses(call)
        assert echoed(headers) == [] and echoed(await call.trailing_metadata()) == []
        assert agent.seen_once().activated == ()
        call = stub.SendMessage(send_request("loud"), metadata=call_metadata(OPTIONAL))
        await call
        assert echoed(await call.initial_metadata()) == [OPTIONAL]


@pytest.mark.parametrize("unary_headers", [True, False], ids=["unary-headers", "unary-trailers"])
async def test_an_accepted_call_that_fails_keeps_its_echo_beside_the_status(
    unary_headers: bool, start_server: StartServer
) -> None:
    server = await start_server(card=NEGOTIATION_CARD, agent=RecordingAgent(), echo_unary_headers=unary_headers)
    metadata = call_metadata(REQUIRED, OPTIONAL)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        for call, unary in (
            (stub.GetTask(a2a_pb2.GetTaskRequest(id="missing"), metadata=metadata), True),
            (stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="missing"), metadata=metadata), False),
        ):
            error = await refusal(call)
            assert_status(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
            assert echoed(error.trailing_metadata()) == [f"{REQUIRED},{OPTIONAL}"]
            headers = await call.initial_metadata()
            if unary and not unary_headers:
                assert echoed(headers) == []
            elif unary:  # a busy server's grpc may send the headers with the status (trailers-only): both then
                assert echoed(headers) in ([f"{REQUIRED},{OPTIONAL}"], [])  # hold the echo, checked above
            else:
                assert echoed(headers) == [f"{REQUIRED},{OPTIONAL}"]


# ---- dependencies --------------------------------------------------------------------------------

# name: (the a2a-extensions entry as sent, what is activated and echoed)
DEPENDENCY_CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "dependency not requested": (f"{REQUIRED},{DEPENDENT}", (REQUIRED,)),
    "dependency requested": (f"{REQUIRED},{DEPENDENT},{OPTIONAL}", (REQUIRED, DEPENDENT, OPTIONAL)),
    "dependency requested first": (f"{OPTIONAL},{DEPENDENT},{REQUIRED}", (OPTIONAL, DEPENDENT, REQUIRED)),
    "chain missing its middle": (f"{REQUIRED},{CHAINED},{OPTIONAL}", (REQUIRED, OPTIONAL)),
    "chain missing its root": (f"{REQUIRED},{CHAINED},{DEPENDENT}", (REQUIRED,)),
    "whole chain": (f"{CHAINED},{DEPENDENT},{OPTIONAL},{REQUIRED}", (CHAINED, DEPENDENT, OPTIONAL, REQUIRED)),
}


def test_extensions_declared_in_code_join_the_card(negotiating_server: A2AServer) -> None:
    declared = {e.uri: e.required for e in negotiating_server.card.capabilities.extensions}
    assert declared == {REQUIRED: True, OPTIONAL: False, DEPENDENT: False, CHAINED: False, RESUME_EXTENSION_URI: False}


@pytest.mark.parametrize("case", sorted(DEPENDENCY_CASES))
async def test_an_extension_is_active_only_with_its_dependencies(case: str, stub: Stub, agent: RecordingAgent) -> None:
    sent, activated = DEPENDENCY_CASES[case]
    call = stub.SendMessage(send_request(case), metadata=call_metadata(sent))
    await call
    assert agent.seen_once().activated == activated
    assert echoed(await call.initial_metadata()) == [",".join(activated)]


async def test_a_required_extension_with_a_dependency_is_never_completed_for_the_caller(
    start_server: StartServer,
) -> None:
    agent = RequiredWithDependencyAgent()
    server = await start_server(card=NEGOTIATION_CARD, agent=agent, echo_unary_headers=True)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        assert_extension_refusal(
            await refusal(stub.SendMessage(send_request("alone"), metadata=call_metadata(REQUIRED)))
        )
        assert agent.seen == []
        call = stub.SendMessage(send_request("complete"), metadata=call_metadata(REQUIRED, OPTIONAL))
        await call
        assert agent.seen_once().activated == (REQUIRED, OPTIONAL)
        assert echoed(await call.initial_metadata()) == [f"{REQUIRED},{OPTIONAL}"]


# ---- a2a-version ---------------------------------------------------------------------------------

REFUSED_VERSIONS = {
    "missing": None,
    "empty": "",
    "0.3": "0.3",
    "2.0": "2.0",
    "1.1": "1.1",
    "major only": "1",
    "four parts": "1.0.1.0",
    "prefixed": "v1.0",
    "garbage": "garbage",
}


def assert_version_refusal(error: grpc.aio.AioRpcError, sent: str | None) -> None:
    metadata = assert_status(error, FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert metadata == {"requestedVersion": sent or "", "supportedVersions": "1.0"}
    assert "a2a-version: 1.0" in error.details()
    assert ("0.3" if not sent else repr(sent)) in error.details()


@pytest.mark.parametrize("case", REFUSED_VERSIONS)
async def test_an_unsupported_version_is_refused(case: str, stub: Stub, agent: RecordingAgent) -> None:
    version = REFUSED_VERSIONS[case]
    call = stub.SendMessage(send_request(case), metadata=call_metadata(REQUIRED, version=version))
    error = await refusal(call)
    assert_version_refusal(error, version)
    assert echoed(await call.initial_metadata()) == [] and echoed(error.trailing_metadata()) == []
    assert agent.seen == []


@pytest.mark.parametrize("method", sorted(REQUESTS))
async def test_a_missing_version_is_refused_on_every_rpc_before_extensions(method: str, stub: Stub) -> None:
    for extension_values in [(REQUIRED,), ()]:  # checked before the missing required extension
        call = getattr(stub, method)(REQUESTS[method](), metadata=call_metadata(*extension_values, version=None))
        assert_version_refusal(await refusal(call), None)


@pytest.mark.parametrize("version", ["1.0", "1.0.1", "1.00"])
async def test_version_1_0_with_any_patch_is_accepted(version: str, stub: Stub, agent: RecordingAgent) -> None:
    call = stub.SendMessage(send_request(version), metadata=call_metadata(REQUIRED, version=version))
    assert (await call).task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.seen_once().version == "1.0"


async def test_a_setting_lets_a_missing_version_mean_1_0(start_server: StartServer) -> None:
    agent = RecordingAgent()
    server = await start_server(
        card=NEGOTIATION_CARD, agent=agent, missing_version_means="1.0", echo_unary_headers=True
    )
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        for version in (None, ""):
            await stub.SendMessage(
                send_request(f"version {version!r}"), metadata=call_metadata(REQUIRED, version=version)
            )
        assert [seen.version for seen in agent.seen] == ["1.0", "1.0"]
        error = await refusal(stub.SendMessage(send_request("0.3"), metadata=call_metadata(REQUIRED, version="0.3")))
        assert_version_refusal(error, "0.3")
        missing_extension = stub.SendMessage(send_request("no extension"), metadata=call_metadata(version=None))
        assert_extension_refusal(await refusal(missing_extension))


def test_a_repeated_refusal_does_not_grow_its_traceback() -> None:
    """The version check caches its verdict per header value; every refusal must still be a fresh error,
    or re-raising one object would chain the traceback (and the frames) of every refused call onto it."""
    check = VersionCheck()
    refused = []
    for _ in range(3):
        with pytest.raises(VersionNotSupportedError) as raised:
            check((("a2a-version", "0.3"),))
        refused.append(raised.value)
    assert len({id(error) for error in refused}) == 3
    depths = {len(traceback.extract_tb(error.__traceback__)) for error in refused}
    assert len(depths) == 1, depths


# ---- hostile metadata ----------------------------------------------------------------------------

MANY_URIS = [f"https://example.com/ext/many-{i}/v1" for i in range(5000)]
HUGE_VALUE = "x" * (64 * 1024)


@pytest.fixture
def no_server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails the test if anything in the process logged an error (a traceback) meanwhile."""
    with caplog.at_level(logging.WARNING):
        yield
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]
    assert errors == [], [record.getMessage() for record in errors]


@pytest.mark.usefixtures("no_server_errors")
@pytest.mark.parametrize(
    "extension_values",
    [(f"{REQUIRED},{HUGE_VALUE}",), (HUGE_VALUE,), (",".join([REQUIRED, *MANY_URIS]),)],
    ids=["64KiB-value", "64KiB-value-without-required", "5000-uris"],
)
async def test_headers_over_the_transport_limit_are_refused_by_the_transport(
    extension_values: tuple[str, ...], stub: Stub, agent: RecordingAgent
) -> None:
    """The server keeps gRPC's 16 KiB limit on request headers: larger ones never reach Python."""
    for method in ("SendMessage", "SendStreamingMessage"):
        error = await refusal(getattr(stub, method)(send_request("huge"), metadata=call_metadata(*extension_values)))
        assert error.code() == RESOURCE_EXHAUSTED, error.details()
    assert agent.seen == []
    await still_serving(stub, agent)


@pytest.mark.usefixtures("no_server_errors")
async def test_headers_under_the_transport_limit_are_always_admitted(stub: Stub, agent: RecordingAgent) -> None:
    """gRPC refuses request headers between its 8 KiB soft and 16 KiB hard limit at random unless the
    two are equal; the server sets them equal, so every one of these calls reaches the interceptors."""
    hundred_entries = call_metadata(*[REQUIRED] * 100)  # about 8.6 KiB: over gRPC's default soft limit
    fourteen_kib = call_metadata(f"{REQUIRED},{'x' * 14_000}")
    for metadata in [hundred_entries, fourteen_kib] * 8:
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata)
    call = stub.SendMessage(send_request("hundred"), metadata=hundred_entries)
    await call
    assert agent.seen_once().requested == (REQUIRED,)
    assert echoed(await call.initial_metadata()) == [REQUIRED]


# name: (the a2a-extensions entries as sent, what the agent sees requested; None when the call is refused)
HOSTILE_HEADERS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "64KiB value": ((f"{REQUIRED},{HUGE_VALUE}",), (REQUIRED,)),
    "64KiB value before the required": ((f"{HUGE_VALUE}, {REQUIRED}",), (REQUIRED,)),
    "64KiB value without the required": ((HUGE_VALUE,), None),
    "64KiB of commas": ((f"{',' * 65536}{REQUIRED}",), (REQUIRED,)),
    "5000 uris in one entry": ((",".join([REQUIRED, *MANY_URIS]),), (REQUIRED, *MANY_URIS)),
    "5000 entries": ((REQUIRED, *MANY_URIS), (REQUIRED, *MANY_URIS)),
    # Every URI counts, wherever it stands (the roomy server lifts --max-extensions-per-call).
    "5000 uris before the required": ((",".join([*MANY_URIS, REQUIRED]),), (*MANY_URIS, REQUIRED)),
    "100 repeated entries": ((REQUIRED,) * 100, (REQUIRED,)),
    "5000 repeated entries": ((REQUIRED,) * 5000, (REQUIRED,)),
    "an empty value": (("",), None),
    "an empty value beside the required": (("", REQUIRED, ""), (REQUIRED,)),
    "only commas": ((",,,,,,,,",), None),
    "only commas beside the required": ((",,,,", REQUIRED, ",,"), (REQUIRED,)),
}


@pytest.mark.usefixtures("no_server_errors")
@pytest.mark.parametrize("case", sorted(HOSTILE_HEADERS))
async def test_hostile_extension_headers_get_a_sensible_answer(
    case: str, roomy_stub: Stub, agent: RecordingAgent
) -> None:
    sent, requested = HOSTILE_HEADERS[case]
    for method in ("SendMessage", "SendStreamingMessage"):
        call = getattr(roomy_stub, method)(send_request(case), metadata=call_metadata(*sent))
        if requested is None:
            error = await refusal(call)
            assert_extension_refusal(error)
            assert len(error.details()) < 200  # nothing of the hostile value comes back
            assert echoed(error.trailing_metadata()) == []
        else:
            headers = await call.initial_metadata()
            await asyncio.wait_for(responses(call), WAIT_SECONDS)
            assert echoed(headers) == [REQUIRED]
            assert [(seen.requested, seen.activated) for seen in agent.seen] == [(requested, (REQUIRED,))]
            agent.seen.clear()
    await still_serving(roomy_stub, agent)


# ---- the default echo placement ----------------------------------------------------------------


async def test_by_default_unary_calls_echo_in_trailers_and_streams_in_headers_and_trailers(
    start_server: StartServer, agent: RecordingAgent
) -> None:
    server = await start_server(card=NEGOTIATION_CARD, agent=agent)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        unary = stub.SendMessage(send_request("unary"), metadata=call_metadata(REQUIRED))
        await unary
        assert echoed(await unary.initial_metadata()) == []
        assert echoed(await unary.trailing_metadata()) == [REQUIRED]
        stream = stub.SendStreamingMessage(send_request("stream"), metadata=call_metadata(REQUIRED))
        assert echoed(await asyncio.wait_for(stream.initial_metadata(), WAIT_SECONDS)) == [REQUIRED]
        await asyncio.wait_for(responses(stream), WAIT_SECONDS)
        assert echoed(await stream.trailing_metadata()) == [REQUIRED]
