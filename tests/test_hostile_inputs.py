"""Property-based hostile input for all 11 A2AService RPCs, with strategies walked from the generated
descriptors (tests/hostile_strategies.py): random field values, random bytes, truncated encodings,
unknown fields, sizes at the message limit, and arbitrary request headers.

After every call: the status is one the README documents (never UNKNOWN or INTERNAL); no message
carries exception or file path text; the server still reports SERVING and logs no ERROR; and when the
call was refused, the seeded tasks, their push configs and every caller's task count are unchanged.

One real server serves the whole module. The default profile is bounded and derandomized (CI runs the
same examples every time); HYPOTHESIS_PROFILE=nightly runs many more, at random.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from agents import OutcomeAgent
from conftest import BASE_CARD, DEAD_HOOK, LOOPBACK_PUSH
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hostile_strategies import (
    ALICE,
    BOB,
    CONFIG_ID,
    CONFIG_PAGE,
    CONTEXT_DONE,
    CONTEXT_OPEN,
    EVERY_EXTENSION,
    MAX_MESSAGE_BYTES,
    PLACEHOLDERS,
    SCHEMA_EXTENSIONS,
    TASK_DONE,
    TASK_OPEN,
    TASK_PAGE,
    Metadata,
    Wire,
    call_metadata,
    extension_data,
    fill,
    metadata_values,
    requests,
    valid_request,
    webhook_safe,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import A2A_SERVICE, RUNNING_STATES, SERVICE_NAME
from a2a_grpc.server import A2AServer, ServerSettings

settings.register_profile(
    "hostile",
    max_examples=30,
    deadline=None,  # the machine is noisy: a slow example is no failure
    derandomize=True,  # CI sees the same examples on every run
    database=None,  # nothing written into the work tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile(
    "nightly",
    max_examples=1_000,
    deadline=None,
    database=None,
    print_blob=True,  # a failure prints the @reproduce_failure line that replays it
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
PROFILE = settings.get_profile("nightly" if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else "hostile")
HEADER_EXAMPLES = settings(PROFILE, max_examples=max(PROFILE.max_examples // 2, 1))

METHODS = {method.name: method for method in A2A_SERVICE.methods}
Code = grpc.StatusCode
# What the README and the error table document (a2a_grpc/errors.py), plus what a client ends a call with
# itself: CANCELLED when it gives up on a stream, DEADLINE_EXCEEDED at its deadline.
DOCUMENTED = {
    Code.OK,
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.FAILED_PRECONDITION,
    Code.UNIMPLEMENTED,
    Code.UNAUTHENTICATED,
    Code.PERMISSION_DENIED,
    Code.RESOURCE_EXHAUSTED,
    Code.ABORTED,
    Code.UNAVAILABLE,
    Code.DEADLINE_EXCEEDED,
    Code.CANCELLED,
}
NOT_REFUSED = {Code.OK, Code.CANCELLED, Code.DEADLINE_EXCEEDED}  # the call may have been carried out
# Text that only an exception or a source location puts in a message (unless the request itself sent it).
LEAKS = ["Traceback", 'File "', ".py", "/work/", "site-packages", "Error(", "Exception(", "<class '", " object at 0x"]
LEAKS += sorted({sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parent.parent)})
CALL_SECONDS = 20.0  # a unary call's deadline: only a hung server reaches it
FIRST_EVENT_SECONDS = 5.0  # a stream's first event, or its status
NEXT_EVENT_SECONDS = 0.3  # later events: a stream on an interrupted task stays open, so stop reading
MAX_EVENTS = 4
SETTLE_SECONDS = 10.0
ALICE_HEADERS: Metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {ALICE}"))
BOB_HEADERS: Metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {BOB}"))
ALICE_EXTENDED: Metadata = (*ALICE_HEADERS, ("a2a-extensions", EVERY_EXTENSION))
EXTENDED_CARD = {**BASE_CARD, "name": "extended test agent", "capabilities": {**BASE_CARD["capabilities"]}}


class Agent(OutcomeAgent):
    """Ends in the state its message names (tests/agents.py); declares the extensions whose data the
    server checks against a schema."""

    extensions = list(SCHEMA_EXTENSIONS)


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    trailers: Metadata
    responses: list[bytes] = field(default_factory=list)
    silent: bool = False  # a stream that neither sent an event nor ended in time


@dataclass(frozen=True)
class Snapshot:
    tasks: tuple[bytes, ...]  # the seeded tasks, as their owner reads them
    configs: tuple[bytes, ...]  # their push configs
    counts: tuple[int, ...]  # each caller's number of tasks


class ErrorLog(logging.Handler):
    """Every ERROR (or worse) record logged while the module runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[str]:
        taken = [f"{record.name}: {record.getMessage()}" for record in self.records]
        self.records.clear()
        return taken


class Harness:
    """The module's server and client, its seeded tasks, and the checks each example ends with."""

    def __init__(self, server: A2AServer, channel: grpc.aio.Channel, errors: ErrorLog) -> None:
        self.server = server
        self.channel = channel
        self.errors = errors
        self.health = health_pb2_grpc.HealthStub(channel)
        self.values: dict[str, str] = {}

    def fill(self, message: Message) -> Message:
        return fill(message, self.values)

    async def unary(self, name: str, request: Message, metadata: Metadata = ALICE_HEADERS) -> bytes:
        """A well-formed call that must succeed (seeding and snapshots); the raw response."""
        method = self.channel.unary_unary(
            f"/{SERVICE_NAME}/{name}", request_serializer=None, response_deserializer=None
        )
        response: bytes = await method(request.SerializeToString(), metadata=metadata, timeout=CALL_SECONDS)
        return response

    async def send(self, text: str) -> a2a_pb2.Task:
        message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id=f"seed-{text}", parts=[a2a_pb2.Part(text=text)])
        response = a2a_pb2.SendMessageResponse.FromString(
            await self.unary("SendMessage", a2a_pb2.SendMessageRequest(message=message))
        )
        return response.task

    async def task(self, task_id: str) -> a2a_pb2.Task:
        return a2a_pb2.Task.FromString(await self.unary("GetTask", a2a_pb2.GetTaskRequest(id=task_id)))

    async def configs(self, task_id: str, page_size: int = 0) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        request = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id, page_size=page_size)
        return a2a_pb2.ListTaskPushNotificationConfigsResponse.FromString(
            await self.unary("ListTaskPushNotificationConfigs", request)
        )

    async def add_config(self, task_id: str) -> str:
        request = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=DEAD_HOOK, token="seed")
        created = await self.unary("CreateTaskPushNotificationConfig", request)
        return a2a_pb2.TaskPushNotificationConfig.FromString(created).id

    async def seed(self) -> None:
        """Make sure the placeholders name what they promise: a COMPLETED and an INPUT_REQUIRED task of
        alice's, two push configs on the first, and real page tokens."""
        values = self.values
        if TASK_DONE not in values:
            done = await self.send("complete")
            values[TASK_DONE], values[CONTEXT_DONE] = done.id, done.context_id
        if (
            TASK_OPEN not in values
            or (await self.task(values[TASK_OPEN])).status.state != a2a_pb2.TASK_STATE_INPUT_REQUIRED
        ):
            opened = await self.send("input")
            assert opened.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, opened
            values[TASK_OPEN], values[CONTEXT_OPEN] = opened.id, opened.context_id
        configs = (await self.configs(values[TASK_DONE])).configs
        while len(configs) < 2:
            await self.add_config(values[TASK_DONE])
            configs = (await self.configs(values[TASK_DONE])).configs
        if values.get(CONFIG_ID) not in {config.id for config in configs}:
            values[CONFIG_ID] = configs[0].id
        values[CONFIG_PAGE] = (await self.configs(values[TASK_DONE], page_size=1)).next_page_token
        listed = await self.unary("ListTasks", a2a_pb2.ListTasksRequest(page_size=1))
        values[TASK_PAGE] = a2a_pb2.ListTasksResponse.FromString(listed).next_page_token
        assert sorted(values) == sorted(PLACEHOLDERS) and all(values.values()), values

    async def snapshot(self) -> Snapshot:
        tasks = [await self.task(self.values[key]) for key in (TASK_DONE, TASK_OPEN)]
        configs = [await self.configs(self.values[key]) for key in (TASK_DONE, TASK_OPEN)]
        counts = []
        for headers in (ALICE_HEADERS, BOB_HEADERS):
            listed = await self.unary("ListTasks", a2a_pb2.ListTasksRequest(page_size=1), headers)
            counts.append(a2a_pb2.ListTasksResponse.FromString(listed).total_size)
        return Snapshot(
            tuple(task.SerializeToString(deterministic=True) for task in tasks),
            tuple(page.SerializeToString(deterministic=True) for page in configs),
            tuple(counts),
        )

    async def settle(self) -> None:
        """Wait until no seeded task is running: an accepted call may have started the agent on one."""
        async with asyncio.timeout(SETTLE_SECONDS):
            for key in (TASK_DONE, TASK_OPEN):
                while True:
                    if (await self.task(self.values[key])).status.state not in RUNNING_STATES:
                        break
                    await asyncio.sleep(0.01)

    async def call(self, method: MethodDescriptor, body: bytes, metadata: Metadata) -> Outcome:
        path = f"/{SERVICE_NAME}/{method.name}"
        if method.server_streaming:
            return await self._stream(path, body, metadata)
        call = self.channel.unary_unary(path, request_serializer=None, response_deserializer=None)
        try:
            response = await call(body, metadata=metadata, timeout=CALL_SECONDS)
        except grpc.aio.AioRpcError as error:
            return Outcome(error.code(), error.details() or "", tuple(error.trailing_metadata() or ()))
        return Outcome(Code.OK, "", (), [response])

    async def _stream(self, path: str, body: bytes, metadata: Metadata) -> Outcome:
        """At most MAX_EVENTS events, then the call is cancelled (an open stream is no failure)."""
        call = self.channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
            body, metadata=metadata, timeout=CALL_SECONDS
        )
        responses: list[bytes] = []
        silent = False
        try:
            while len(responses) < MAX_EVENTS:
                async with asyncio.timeout(NEXT_EVENT_SECONDS if responses else FIRST_EVENT_SECONDS):
                    item = await call.read()
                if item is grpc.aio.EOF:
                    break
                responses.append(item)
        except TimeoutError:
            silent = not responses
        except grpc.aio.AioRpcError:
            pass
        call.cancel()
        code = await call.code()
        return Outcome(code, await call.details() or "", tuple(await call.trailing_metadata() or ()), responses, silent)

    async def assert_serving(self) -> None:
        for service in ("", SERVICE_NAME):
            reply = await self.health.Check(health_pb2.HealthCheckRequest(service=service), timeout=CALL_SECONDS)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, f"health of {service!r}: {reply}"


@pytest.fixture(scope="module")
async def hostile(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    folder = tmp_path_factory.mktemp("hostile")
    card_path, extended_path = folder / "card.json", folder / "extended-card.json"
    card_path.write_text(
        json.dumps({**BASE_CARD, "capabilities": {**BASE_CARD["capabilities"], "extendedAgentCard": True}})
    )
    extended_path.write_text(json.dumps(EXTENDED_CARD))
    server = A2AServer(
        ServerSettings(
            listen="127.0.0.1:0",
            http_listen="",
            card_path=str(card_path),
            extended_card_path=str(extended_path),
            store_url="memory",
            bearer_tokens={ALICE: "alice", BOB: "bob"},
            max_message_bytes=MAX_MESSAGE_BYTES,
            push=LOOPBACK_PUSH,
            max_auth_failures_per_second=0,  # hostile headers fail authentication by the thousand
        ),
        agent=Agent(),
    )
    errors = ErrorLog()
    logging.getLogger().addHandler(errors)
    await server.start()
    try:
        # unlimited: a response larger than gRPC's default 4 MiB must not become a client-side error
        async with grpc.aio.insecure_channel(
            server.grpc_target, options=[("grpc.max_receive_message_length", -1)]
        ) as channel:
            harness = Harness(server, channel, errors)
            await harness.seed()
            await harness.assert_serving()
            assert errors.take() == []
            yield harness
    finally:
        await server.stop(0)
        logging.getLogger().removeHandler(errors)


def status_texts(outcome: Outcome) -> list[str]:
    """The status message, and every text of the rich status and the other trailers; the rich status
    must carry the call's code."""
    texts = [outcome.details]
    for key, value in outcome.trailers:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            assert status.code == outcome.code.value[0], f"rich status {status} on a call ending {outcome.code}"
            texts.append(status.message)
            for detail in status.details:
                info, bad_request = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
                if detail.Unpack(info):
                    texts += [info.reason, info.domain, *info.metadata.keys(), *info.metadata.values()]
                elif detail.Unpack(bad_request):
                    texts += [text for v in bad_request.field_violations for text in (v.field, v.description)]
        elif isinstance(value, str):
            texts.append(value)
    return texts


def leaks(texts: list[str], sent: bytes) -> list[str]:
    """Exception or path text in `texts` that the request (`sent`: its body and header values) lacks."""
    return [
        f"{marker!r} in {text!r}"
        for text in texts
        for marker in LEAKS
        if marker in text and marker.encode() not in sent
    ]


def check_responses(method: MethodDescriptor, outcome: Outcome) -> None:
    """Whatever the server answered parses as the method's response type."""
    parse = message_factory.GetMessageClass(method.output_type).FromString
    for response in outcome.responses:
        try:
            parse(response)
        except DecodeError as error:
            raise AssertionError(f"{method.name} answered {response[:200]!r}, which does not parse") from error


async def exercise(hostile: Harness, method: MethodDescriptor, wire: Wire, metadata: Metadata) -> None:
    """One hostile call, and every property that must hold after it."""
    body = wire.encode(hostile.fill)
    assume(webhook_safe(method, body))
    hostile.errors.take()  # what an earlier failing example left
    before = await hostile.snapshot()
    outcome = await hostile.call(method, body, metadata)
    sent = body + b"\n".join(metadata_values(metadata))
    assert not outcome.silent, f"{method.name}: the stream sent no event and no status in {FIRST_EVENT_SECONDS}s"
    assert outcome.code not in {Code.UNKNOWN, Code.INTERNAL}, f"{method.name}: {outcome.code} {outcome.details!r}"
    assert outcome.code in DOCUMENTED, f"{method.name}: {outcome.code} {outcome.details!r}"
    assert leaks(status_texts(outcome), sent) == [], f"{method.name}: {outcome.code} {outcome.details!r}"
    check_responses(method, outcome)
    await hostile.assert_serving()
    assert hostile.errors.take() == [], f"{method.name}: {outcome.code} {outcome.details!r}"
    if outcome.code in NOT_REFUSED or outcome.responses:
        await hostile.settle()
        await hostile.seed()  # what the call used up (a canceled task, a deleted config) is seeded again
    else:
        assert await hostile.snapshot() == before, (
            f"{method.name} changed stored state although refused: {outcome.code}"
        )


# Mostly alice's headers, so that the calls reach the servicer (half of them activating every extension,
# so that extension data is checked); sometimes bob's (whom alice's tasks are NOT_FOUND to) or hostile ones.
HEADER_CHOICES: list[st.SearchStrategy[Metadata]] = [st.just(ALICE_HEADERS)] * 3 + [st.just(ALICE_EXTENDED)] * 3
HEADER_CHOICES += [st.just(BOB_HEADERS), call_metadata()]


@pytest.mark.parametrize("name", list(METHODS))
@PROFILE
@given(data=st.data())
async def test_hostile_requests_get_documented_answers(hostile: Harness, name: str, data: st.DataObject) -> None:
    method = METHODS[name]
    wire = data.draw(requests(method), label="request")
    metadata = data.draw(st.sampled_from(HEADER_CHOICES).flatmap(lambda headers: headers), label="metadata")
    await exercise(hostile, method, wire, metadata)


@pytest.mark.parametrize("name", list(METHODS))
@HEADER_EXAMPLES
@given(metadata=call_metadata())
async def test_hostile_headers_get_documented_answers(hostile: Harness, name: str, metadata: Metadata) -> None:
    method = METHODS[name]
    await exercise(hostile, method, Wire("encoded", valid_request(method)), metadata)


@pytest.mark.parametrize("name", ["SendMessage", "SendStreamingMessage"])
@PROFILE
@given(data=st.data())
async def test_hostile_extension_data_gets_documented_answers(hostile: Harness, name: str, data: st.DataObject) -> None:
    method = METHODS[name]
    await exercise(hostile, method, data.draw(extension_data(method), label="request"), ALICE_EXTENDED)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name", ["SendMessage", "SendStreamingMessage"])
async def test_nonfinite_extension_data_is_invalid_argument(hostile: Harness, name: str, number: float) -> None:
    method = METHODS[name]
    request = a2a_pb2.SendMessageRequest.FromString(valid_request(method).SerializeToString())
    request.message.metadata.fields[SCHEMA_EXTENSIONS[0].data_key].number_value = number
    body = request.SerializeToString()
    hostile.errors.take()
    outcome = await hostile.call(method, body, ALICE_EXTENDED)
    logged = hostile.errors.take()
    assert (outcome.code, logged) == (Code.INVALID_ARGUMENT, []), outcome.details


def test_the_suite_covers_all_11_rpcs() -> None:
    assert len(METHODS) == 11
    for method in METHODS.values():
        assert valid_request(method).DESCRIPTOR.full_name == method.input_type.full_name
