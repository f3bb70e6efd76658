"""The A2A 0.3 face (`a2a.v1.A2AService`), driven with our own generated 0.3 stubs: how each request and answer
maps, how errors read to a 0.3 caller, the version and extension rules of the face, the card both versions
read, and the face turned off. The official 0.3 SDK client's view is tests/test_v03_clients.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import pytest
from agents import REQUIRED_EXTENSION, OutcomeAgent, PacedAgent, RequiredExtensionAgent
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, bad_request, error_info
from google.protobuf import json_format, struct_pb2

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_grpc
from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.server import A2AServer
from a2a_grpc.telemetry import ACCESS_LOGGER

TEST_SECONDS = 30
Code = grpc.StatusCode
Stub03 = Any  # v03_grpc.A2AServiceStub, which the generated code leaves untyped


class DataAgent:
    """Answers with an artifact of a list (not an object) and a text part with metadata: what 0.3 cannot carry."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        artifact = a2a_pb2.Artifact(artifact_id="data", name="data")
        listed = artifact.parts.add()
        listed.data.list_value.values.add(number_value=1)
        text = artifact.parts.add(text="hi", media_type="text/markdown", filename="hi.md")
        text.metadata.update({"kept": "yes"})
        await events.artifact(artifact, last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.fixture
async def stubs() -> AsyncIterator[list[grpc.aio.Channel]]:
    opened: list[grpc.aio.Channel] = []
    yield opened
    for channel in opened:
        await channel.close()


def v03_stub(server: A2AServer, channels: list[grpc.aio.Channel]) -> Stub03:
    channel = grpc.aio.insecure_channel(server.grpc_target)
    channels.append(channel)
    return v03_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


def v10_stub(server: A2AServer, channels: list[grpc.aio.Channel]) -> a2a_pb2_grpc.A2AServiceStub:
    channel = grpc.aio.insecure_channel(server.grpc_target)
    channels.append(channel)
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


def message(text: str = "hello", **fields: Any) -> v03.Message:
    fields.setdefault("message_id", f"m-{text}-{id(fields)}")
    return v03.Message(role=v03.ROLE_USER, content=[v03.Part(text=text)], **fields)


def send(text: str = "hello", **fields: Any) -> v03.SendMessageRequest:
    return v03.SendMessageRequest(request=message(text), **fields)


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


# ---- requests and answers ------------------------------------------------------------------------


async def test_a_task_made_on_one_face_is_read_on_the_other(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server()
        old, new = v03_stub(server, stubs), v10_stub(server, stubs)
        answer = await old.SendMessage(send("across"))
        assert answer.task.status.state == v03.TASK_STATE_COMPLETED
        assert [part.text for part in answer.task.history[0].content] == ["across"]
        seen = await new.GetTask(a2a_pb2.GetTaskRequest(id=answer.task.id), metadata=V1)
        assert seen.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert [part.text for part in seen.history[0].parts] == ["across"]

        made = await new.SendMessage(a2a_pb2.SendMessageRequest(message=_v10_message("back")), metadata=V1)
        read = await old.GetTask(v03.GetTaskRequest(name=f"tasks/{made.task.id}"))
        assert read.id == made.task.id and read.status.state == v03.TASK_STATE_COMPLETED


def _v10_message(text: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])


async def test_without_a_configuration_a_send_waits_and_with_one_blocking_says(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    agent = PacedAgent(chunks=1)
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent)
        stub = v03_stub(server, stubs)
        at_once = await stub.SendMessage(send(configuration=v03.SendMessageConfiguration(blocking=False)))
        assert at_once.task.status.state in (v03.TASK_STATE_SUBMITTED, v03.TASK_STATE_WORKING)
        agent.finish()
        waited = await stub.SendMessage(send("again"))
        assert waited.task.status.state == v03.TASK_STATE_COMPLETED
        blocking = await stub.SendMessage(send("more", configuration=v03.SendMessageConfiguration(blocking=True)))
        assert blocking.task.status.state == v03.TASK_STATE_COMPLETED


async def test_a_stream_that_stops_for_input_marks_its_last_update_final(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=OutcomeAgent())
        stub = v03_stub(server, stubs)
        events = [event async for event in stub.SendStreamingMessage(send("input"))]
        assert [event.WhichOneof("payload") for event in events] == ["task", "artifact_update", "status_update"]
        last = events[-1].status_update
        assert (last.status.state, last.final) == (v03.TASK_STATE_INPUT_REQUIRED, True)
        assert events[1].artifact_update.last_chunk and not events[1].artifact_update.append

        done = [event async for event in stub.SendStreamingMessage(send("complete"))]
        assert done[-1].status_update.final and done[-1].status_update.status.state == v03.TASK_STATE_COMPLETED


async def test_what_0_3_cannot_carry_is_dropped_and_a_non_object_value_is_wrapped(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=DataAgent())
        answer = await v03_stub(server, stubs).SendMessage(send())
    listed, text = answer.task.artifacts[0].parts
    assert json_format.MessageToDict(listed.data.data) == {"value": [1]}
    assert (text.text, json_format.MessageToDict(text.metadata)) == ("hi", {"kept": "yes"})
    assert text.ListFields()[:1] == [(v03.Part.DESCRIPTOR.fields_by_name["text"], "hi")]
    assert len(text.ListFields()) == 2, "a text part's filename and media type have no place in 0.3"


async def test_files_and_data_from_a_0_3_caller_reach_the_agent_as_1_0_parts(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    data = struct_pb2.Struct()
    data.update({"n": 1})
    parts = [
        v03.Part(file=v03.FilePart(file_with_uri="https://example.com/a.png", mime_type="image/png", name="a.png")),
        v03.Part(file=v03.FilePart(file_with_bytes=b"\x00\x01", mime_type="application/octet-stream")),
        v03.Part(data=v03.DataPart(data=data)),
    ]
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server()
        answer = await v03_stub(server, stubs).SendMessage(
            v03.SendMessageRequest(request=v03.Message(message_id="files", role=v03.ROLE_USER, content=parts))
        )
        stored = await v10_stub(server, stubs).GetTask(a2a_pb2.GetTaskRequest(id=answer.task.id), metadata=V1)
    sent = stored.history[0].parts
    assert (sent[0].url, sent[0].media_type, sent[0].filename) == ("https://example.com/a.png", "image/png", "a.png")
    assert (sent[1].raw, sent[1].media_type) == (b"\x00\x01", "application/octet-stream")
    assert json_format.MessageToDict(sent[2].data) == {"n": 1}
    assert list(answer.task.history[0].content) == parts, "and back to a 0.3 caller as they came"


async def test_push_configs_map_field_by_field(start_server: StartServer, stubs: list[grpc.aio.Channel]) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=PacedAgent())
        stub = v03_stub(server, stubs)
        task = (await stub.SendMessage(send(configuration=v03.SendMessageConfiguration(blocking=False)))).task
        config = v03.PushNotificationConfig(
            id="hook",
            url=DEAD_HOOK,
            token="t",
            authentication=v03.AuthenticationInfo(schemes=["Bearer"], credentials="c"),
        )
        name = f"tasks/{task.id}/pushNotificationConfigs/hook"
        created = await stub.CreateTaskPushNotificationConfig(
            v03.CreateTaskPushNotificationConfigRequest(
                parent=f"tasks/{task.id}",
                config_id="hook",
                config=v03.TaskPushNotificationConfig(name=name, push_notification_config=config),
            )
        )
        assert created == v03.TaskPushNotificationConfig(name=name, push_notification_config=config)
        assert await stub.GetTaskPushNotificationConfig(v03.GetTaskPushNotificationConfigRequest(name=name)) == created
        listed = await stub.ListTaskPushNotificationConfig(
            v03.ListTaskPushNotificationConfigRequest(parent=f"tasks/{task.id}")
        )
        assert list(listed.configs) == [created]
        seen = await v10_stub(server, stubs).GetTaskPushNotificationConfig(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook"), metadata=V1
        )
        assert (seen.authentication.scheme, seen.authentication.credentials, seen.token) == ("Bearer", "c", "t")
        await stub.DeleteTaskPushNotificationConfig(v03.DeleteTaskPushNotificationConfigRequest(name=name))
        gone = await refused(stub.GetTaskPushNotificationConfig(v03.GetTaskPushNotificationConfigRequest(name=name)))
        assert gone.code() == Code.NOT_FOUND

        two = v03.PushNotificationConfig(
            url=DEAD_HOOK, authentication=v03.AuthenticationInfo(schemes=["Bearer", "Basic"])
        )
        error = await refused(
            stub.CreateTaskPushNotificationConfig(
                v03.CreateTaskPushNotificationConfigRequest(
                    parent=f"tasks/{task.id}", config=v03.TaskPushNotificationConfig(push_notification_config=two)
                )
            )
        )
        assert error.code() == Code.INVALID_ARGUMENT
        assert bad_request(error).field_violations[0].field == "config.push_notification_config.authentication.schemes"


async def test_a_0_3_push_url_with_cr_lf_is_refused_on_create_and_on_send_naming_its_field(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    """Finding 16 on the 0.3 face: never stored, so never listed nor dialled."""
    injected = v03.PushNotificationConfig(id="hook", url=DEAD_HOOK + "\r\nX-Injected: yes", token="t")
    async with asyncio.timeout(TEST_SECONDS):
        stub = v03_stub(await start_server(), stubs)
        task = (await stub.SendMessage(send())).task
        created = stub.CreateTaskPushNotificationConfig(
            v03.CreateTaskPushNotificationConfigRequest(
                parent=f"tasks/{task.id}",
                config_id="hook",
                config=v03.TaskPushNotificationConfig(push_notification_config=injected),
            )
        )
        sent = stub.SendMessage(send(configuration=v03.SendMessageConfiguration(push_notification=injected)))
        errors = [await refused(created), await refused(sent)]
        listed = await stub.ListTaskPushNotificationConfig(
            v03.ListTaskPushNotificationConfigRequest(parent=f"tasks/{task.id}")
        )
    assert [error.code() for error in errors] == [Code.INVALID_ARGUMENT] * 2
    assert [[v.field for v in bad_request(error).field_violations] for error in errors] == [
        ["config.push_notification_config.url"],
        ["configuration.push_notification.url"],
    ]
    assert list(listed.configs) == []


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tasks/x/extra", "x", "tasks/", "task/x", "/tasks/x"])
async def test_a_task_name_must_be_exactly_tasks_slash_id(
    start_server: StartServer, stubs: list[grpc.aio.Channel], name: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = v03_stub(await start_server(), stubs)
        error = await refused(stub.GetTask(v03.GetTaskRequest(name=name)))
    assert error.code() == Code.INVALID_ARGUMENT
    assert (error.details() or "").startswith("InvalidParamsError: invalid request: name must be tasks/{task_id}")
    assert error_info(error).reason == "INVALID_PARAMS"
    assert [violation.field for violation in bad_request(error).field_violations] == ["name"]


async def test_errors_carry_0_3_codes_names_states_and_fields_with_their_details(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    agent = PacedAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent, card={**BASE_CARD, "capabilities": {"streaming": True}})
        stub = v03_stub(server, stubs)
        missing = await refused(stub.GetTask(v03.GetTaskRequest(name="tasks/nope")))
        assert (missing.code(), error_info(missing).reason) == (Code.NOT_FOUND, "TASK_NOT_FOUND")
        assert (missing.details() or "").startswith("TaskNotFoundError: ")

        task = (await stub.SendMessage(send(configuration=v03.SendMessageConfiguration(blocking=False)))).task
        canceled = await stub.CancelTask(v03.CancelTaskRequest(name=f"tasks/{task.id}"))
        assert canceled.status.state == v03.TASK_STATE_CANCELLED
        again = await refused(stub.CancelTask(v03.CancelTaskRequest(name=f"tasks/{task.id}")))
        assert again.code() == Code.FAILED_PRECONDITION
        assert again.details() == f"TaskNotCancelableError: task {task.id} is already TASK_STATE_CANCELLED"
        assert error_info(again).reason == "TASK_NOT_CANCELABLE"

        no_push = await refused(
            stub.GetTaskPushNotificationConfig(
                v03.GetTaskPushNotificationConfigRequest(name=f"tasks/{task.id}/pushNotificationConfigs/x")
            )
        )
        assert no_push.code() == Code.UNIMPLEMENTED, "0.3's code: the JS 0.3 client types it"
        assert (no_push.details() or "").startswith("PushNotificationNotSupportedError: ")
        assert error_info(no_push).reason == "PUSH_NOTIFICATION_NOT_SUPPORTED"

        empty = v03.SendMessageRequest(request=v03.Message(role=v03.ROLE_USER, content=[v03.Part()]))
        invalid = await refused(stub.SendMessage(empty))
        assert invalid.code() == Code.INVALID_ARGUMENT
        fields = [violation.field for violation in bad_request(invalid).field_violations]
        assert fields == ["request.content[0]"], "0.3's field names"
        no_id = await refused(stub.SendMessage(v03.SendMessageRequest(request=message(message_id=""))))
        assert [violation.field for violation in bad_request(no_id).field_violations] == ["request.message_id"]
        assert (
            no_id.details()
            == "InvalidParamsError: invalid request: request.message_id is required and must not be empty"
        )


async def test_calls_to_the_0_3_face_speak_0_3_unless_they_ask_for_1_0(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = v03_stub(await start_server(), stubs)
        for version in ("0.3", "0.3.0", "2.0", ""):
            answer = await stub.SendMessage(send(version or "none"), metadata=(("a2a-version", version),))
            assert answer.task.status.state == v03.TASK_STATE_COMPLETED
        error = await refused(stub.SendMessage(send(), metadata=(("a2a-version", "1.0.1"),)))
    assert error.code() == Code.FAILED_PRECONDITION
    assert error.details() == (
        "VersionNotSupportedError: a2a.v1.A2AService is A2A 0.3; A2A 1.0 is served as lf.a2a.v1.A2AService on this port"
    )
    assert error_info(error).reason == "VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize("header", ["x-a2a-extensions", "a2a-extensions"])
async def test_a_required_extension_is_enforced_on_every_0_3_rpc_but_the_card_and_echoed(
    start_server: StartServer, stubs: list[grpc.aio.Channel], header: str
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = v03_stub(await start_server(agent=RequiredExtensionAgent()), stubs)
        for call in (
            stub.SendMessage(send()),
            stub.GetTask(v03.GetTaskRequest(name="tasks/x")),
            stub.CancelTask(v03.CancelTaskRequest(name="tasks/x")),
            stub.ListTaskPushNotificationConfig(v03.ListTaskPushNotificationConfigRequest(parent="tasks/x")),
        ):
            error = await refused(call)
            assert error.code() == Code.FAILED_PRECONDITION
            assert (error.details() or "").startswith("ExtensionSupportRequiredError: ")
            assert error_info(error).metadata["missingExtensions"] == REQUIRED_EXTENSION
        call = stub.SendMessage(send(), metadata=((header, f"{REQUIRED_EXTENSION}, https://unknown.example/x"),))
        answer = await call
        assert answer.task.status.state == v03.TASK_STATE_COMPLETED
        trailers = dict(await call.trailing_metadata())
        assert trailers["x-a2a-extensions"] == trailers["a2a-extensions"] == REQUIRED_EXTENSION


# ---- the card ------------------------------------------------------------------------------------


async def http_card(server: A2AServer) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{server.http_target}{AGENT_CARD_PATH}") as response,
    ):
        document: dict[str, Any] = await response.json()
        return document


SECURED_CARD = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extendedAgentCard": True},
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}


async def test_with_v03_card_one_card_for_both_versions_and_get_agent_card_for_0_3(
    start_server: StartServer, stubs: list[grpc.aio.Channel], tmp_path: Any
) -> None:
    extended = tmp_path / "extended.json"
    extended.write_text(
        json_format.MessageToJson(json_format.ParseDict({**SECURED_CARD, "name": "x"}, a2a_pb2.AgentCard()))
    )
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(
            card=SECURED_CARD, bearer_tokens={"t": "alice"}, extended_card_path=str(extended), v03_card=True
        )
        served = await http_card(server)
        stub = v03_stub(server, stubs)
        public = await stub.GetAgentCard(v03.GetAgentCardRequest(), metadata=(("authorization", "Bearer t"),))
    target = server.grpc_target
    assert served["supportedInterfaces"] == [
        {"url": target, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": target, "protocolBinding": "GRPC", "protocolVersion": "0.3"},
        {"url": f"http://{server.http_target}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"http://{server.http_target}", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    assert (served["url"], served["preferredTransport"], served["protocolVersion"]) == (target, "GRPC", "0.3.0")
    assert served["additionalInterfaces"] == [{"url": target, "transport": "GRPC"}]
    assert served["securitySchemes"]["bearer"] == {
        "httpAuthSecurityScheme": {"scheme": "Bearer"},
        "type": "http",
        "scheme": "Bearer",
    }, "1.0's form exact, 0.3's beside it"
    assert served["security"] == [{"bearer": []}]
    assert served["securityRequirements"] == SECURED_CARD["securityRequirements"]
    assert served["supportsAuthenticatedExtendedCard"] is True and served["capabilities"]["extendedAgentCard"]
    assert (public.name, public.url, public.protocol_version) == ("x", target, "0.3.0"), "the extended card"
    assert public.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [list(requirement.schemes) for requirement in public.security] == [["bearer"]]


async def test_a_0_3_client_learns_the_required_extension_from_get_agent_card_without_sending_it(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    """Finding 8: GetAgentCard is how a gRPC-only 0.3 client learns the card, so it is not refused for the required
    extension it cannot know yet (as the card over HTTP is not); a call that sends it gets it echoed."""
    async with asyncio.timeout(TEST_SECONDS):
        stub = v03_stub(await start_server(agent=RequiredExtensionAgent()), stubs)
        learned = stub.GetAgentCard(v03.GetAgentCardRequest())
        card = await learned
        learned_trailers = dict(await learned.trailing_metadata())
        asked = stub.GetAgentCard(v03.GetAgentCardRequest(), metadata=(("x-a2a-extensions", REQUIRED_EXTENSION),))
        await asked
        asked_trailers = dict(await asked.trailing_metadata())
    assert (REQUIRED_EXTENSION, True) in [(e.uri, e.required) for e in card.capabilities.extensions]
    assert "x-a2a-extensions" not in learned_trailers, "nothing activated, nothing echoed"
    assert asked_trailers["x-a2a-extensions"] == asked_trailers["a2a-extensions"] == REQUIRED_EXTENSION


async def test_get_agent_card_without_the_required_extension_still_needs_the_credential_the_card_asks_for(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=RequiredExtensionAgent(), card=SECURED_CARD, bearer_tokens={"t": "alice"})
        stub = v03_stub(server, stubs)
        error = await refused(stub.GetAgentCard(v03.GetAgentCardRequest()))
        card = await stub.GetAgentCard(v03.GetAgentCardRequest(), metadata=(("authorization", "Bearer t"),))
    assert error.code() == Code.UNAUTHENTICATED
    assert REQUIRED_EXTENSION in [e.uri for e in card.capabilities.extensions]


# ---- the face off --------------------------------------------------------------------------------


async def test_with_the_face_off_0_3_calls_are_unimplemented_naming_the_1_0_service_and_logged(
    start_server: StartServer, stubs: list[grpc.aio.Channel], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(serve_v03=False)
        error = await refused(v03_stub(server, stubs).SendMessage(send()))
        served = await http_card(server)
        answer = await v10_stub(server, stubs).SendMessage(
            a2a_pb2.SendMessageRequest(message=_v10_message("still")), metadata=V1
        )
    assert error.code() == Code.UNIMPLEMENTED
    assert error.details() == (
        "this agent does not serve /a2a.v1.A2AService/SendMessage: it speaks A2A 1.0 as lf.a2a.v1.A2AService"
    )
    info = error_info(error)
    assert (info.reason, info.metadata["service"], info.metadata["services"]) == (
        "METHOD_NOT_FOUND",
        "a2a.v1.A2AService",
        "lf.a2a.v1.A2AService",
    )
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert any("/a2a.v1.A2AService/SendMessage" in line and "UNIMPLEMENTED" in line for line in lines), lines
    assert "url" not in served and {i["protocolVersion"] for i in served["supportedInterfaces"]} == {"1.0"}
    assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_an_unknown_service_or_method_names_both_faces(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server()
        channel = grpc.aio.insecure_channel(server.grpc_target)
        stubs.append(channel)
        for method in ("/a2a.v1.A2AService/ListTasks", "/x.Y/Z"):
            error = await refused(channel.unary_unary(method)(b""))
            assert error.code() == Code.UNIMPLEMENTED
            assert error.details() == (
                f"this agent does not serve {method}: it speaks A2A 1.0 as lf.a2a.v1.A2AService"
                " and A2A 0.3 as a2a.v1.A2AService"
            )
        streamed = channel.unary_stream("/x.Y/Stream")(b"")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async for _ in streamed:
                pass
        assert raised.value.code() == Code.UNIMPLEMENTED


# ---- what review found -----------------------------------------------------------------------------


async def test_a_push_config_without_an_id_is_created_as_the_0_3_sdk_sends_it(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=PacedAgent())
        stub = v03_stub(server, stubs)
        task = (await stub.SendMessage(send(configuration=v03.SendMessageConfiguration(blocking=False)))).task
        created = await stub.CreateTaskPushNotificationConfig(
            v03.CreateTaskPushNotificationConfigRequest(
                parent=f"tasks/{task.id}",
                config=v03.TaskPushNotificationConfig(
                    name=f"tasks/{task.id}/pushNotificationConfigs/None",  # what a2a-sdk 0.3.26 sends
                    push_notification_config=v03.PushNotificationConfig(url=DEAD_HOOK),
                ),
            )
        )
    config_id = created.push_notification_config.id
    assert config_id and created.name == f"tasks/{task.id}/pushNotificationConfigs/{config_id}"


async def test_a_message_with_too_many_parts_is_refused_before_its_parts_are_read(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    request = v03.SendMessageRequest(
        request=v03.Message(message_id="many", role=v03.ROLE_USER, content=[v03.Part()] * 5)
    )
    async with asyncio.timeout(TEST_SECONDS):
        error = await refused(v03_stub(await start_server(max_parts=4), stubs).SendMessage(request))
    assert error.code() == Code.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in bad_request(error).field_violations] == [
        ("request.content", "has 5 parts; at most 4 are allowed")
    ], "not the first empty part: no part was looked at"


async def test_an_empty_file_uri_is_named_in_0_3_terms(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    request = v03.SendMessageRequest(
        request=v03.Message(message_id="f", role=v03.ROLE_USER, content=[v03.Part(file=v03.FilePart(file_with_uri=""))])
    )
    async with asyncio.timeout(TEST_SECONDS):
        error = await refused(v03_stub(await start_server(), stubs).SendMessage(request))
    assert [v.field for v in bad_request(error).field_violations] == ["request.content[0].file.file_with_uri"]


async def test_the_extended_card_is_not_served_unless_the_card_declares_it(
    start_server: StartServer, stubs: list[grpc.aio.Channel], tmp_path: Any
) -> None:
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps({**SECURED_CARD, "name": "private"}))
    undeclared = {**SECURED_CARD, "capabilities": BASE_CARD["capabilities"]}
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=undeclared, bearer_tokens={"t": "alice"}, extended_card_path=str(extended))
        card = await v03_stub(server, stubs).GetAgentCard(
            v03.GetAgentCardRequest(), metadata=(("authorization", "Bearer t"),)
        )
    assert card.name == "test agent" and not card.supports_authenticated_extended_card


async def test_a_0_3_call_is_logged_under_its_service_with_its_task(
    start_server: StartServer, stubs: list[grpc.aio.Channel], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=RequiredExtensionAgent())
        answer = await v03_stub(server, stubs).SendMessage(send(), metadata=(("x-a2a-extensions", REQUIRED_EXTENSION),))
        await refused(v03_stub(server, stubs).GetTask(v03.GetTaskRequest(name="tasks/x")))
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    sent = next(line for line in lines if "a2a.v1.A2AService/SendMessage" in line)
    assert f"task_id={answer.task.id}" in sent and "version=0.3" in sent, sent
    refusal = next(line for line in lines if "a2a.v1.A2AService/GetTask" in line)
    assert "FAILED_PRECONDITION" in refusal and "missingExtensions" in refusal, refusal


async def test_a_card_whose_every_interface_names_a_tenant_has_no_0_3_face(
    start_server: StartServer, stubs: list[grpc.aio.Channel]
) -> None:
    tenanted = {
        **BASE_CARD,
        "supportedInterfaces": [
            {"url": "127.0.0.1:0", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t1"}
        ],
    }
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=tenanted)
        served = await http_card(server)
        error = await refused(v03_stub(server, stubs).GetTask(v03.GetTaskRequest(name="tasks/x")))
    assert "url" not in served and "protocolVersion" not in served
    assert error.code() == Code.UNIMPLEMENTED
    assert (error.details() or "").endswith("it speaks A2A 1.0 as lf.a2a.v1.A2AService")
