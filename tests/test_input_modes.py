"""Issue 33, item 5: with `enforce_input_modes`, a message part whose media type no input mode of the card
accepts (its defaultInputModes or any skill's inputModes) is refused with ContentTypeNotSupportedError,
through generated stubs of both faces; wildcards, parameters and case are honoured, and a part that states
no media type is not checked. Off (the default), every part is taken as before."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, bad_request, error_info, user_message
from rpc_helpers import TEST_SECONDS, Clients, assert_error, read_all, rpc_error, stream_error

from a2a_grpc.errors import ContentTypeNotSupportedError, InvalidRequestError, error_from_rpc_error
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_grpc
from a2a_grpc.input_modes import AcceptedInputModes, enforced_input_modes
from a2a_grpc.server import A2AServer
from a2a_grpc.validation import validate_send

Code = grpc.StatusCode
REFUSED = "CONTENT_TYPE_NOT_SUPPORTED"
IMAGE_SKILL = {
    "id": "look",
    "name": "Look",
    "description": "Describes a picture.",
    "tags": ["image"],
    "inputModes": ["image/png"],
}


def card(default_modes: list[str], *skills: dict[str, Any]) -> dict[str, Any]:
    return {**BASE_CARD, "defaultInputModes": default_modes, "skills": [*BASE_CARD["skills"], *skills]}


def with_part(media_type: str) -> a2a_pb2.SendMessageRequest:
    """A message of a text part without a media type, then a picture of `media_type`."""
    message = user_message("look")
    message.parts.add(url="https://example.com/p.png", media_type=media_type)
    return a2a_pb2.SendMessageRequest(message=message)


async def enforcing(start_server: StartServer, card: dict[str, Any]) -> A2AServer:
    return await start_server(card=card, enforce_input_modes=True)


async def completed(server: A2AServer, clients: Clients, request: a2a_pb2.SendMessageRequest) -> None:
    task = (await clients.stub(server).SendMessage(request, metadata=V1)).task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED, task


async def test_a_part_of_a_type_the_card_does_not_accept_is_refused_naming_the_type_and_the_modes(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(["text/plain", "application/json"]))
        error = await rpc_error(clients.stub(server).SendMessage(with_part("image/png"), metadata=V1))
    assert_error(
        error, Code.INVALID_ARGUMENT, REFUSED, mediaType="image/png", acceptedModes="text/plain, application/json"
    )
    assert [v.field for v in bad_request(error).field_violations] == ["message.parts[1].media_type"]
    assert isinstance(error_from_rpc_error(error), ContentTypeNotSupportedError)


async def test_a_streaming_send_is_refused_before_its_first_event(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(["text/plain"]))
        error = await stream_error(clients.stub(server).SendStreamingMessage(with_part("audio/ogg"), metadata=V1))
    assert_error(error, Code.INVALID_ARGUMENT, REFUSED, mediaType="audio/ogg", acceptedModes="text/plain")


async def test_a_0_3_caller_is_refused_in_0_3_terms(start_server: StartServer) -> None:
    request = v03.SendMessageRequest(
        request=v03.Message(
            message_id="pic",
            role=v03.ROLE_USER,
            content=[v03.Part(file=v03.FilePart(file_with_uri="https://example.com/p.png", mime_type="image/png"))],
        )
    )
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(["text/plain"]))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = v03_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            error = await rpc_error(stub.SendMessage(request))
    assert error.code() == Code.INVALID_ARGUMENT
    assert (error.details() or "").startswith("ContentTypeNotSupportedError: ")
    assert error_info(error).reason == REFUSED
    assert [v.field for v in bad_request(error).field_violations] == ["request.content[0].file.mime_type"]


async def test_the_cards_default_modes_accept_parameters_and_any_case(
    start_server: StartServer, clients: Clients
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(["text/plain", "Image/PNG"]))
        await completed(server, clients, with_part("image/png; name=p"))
        await completed(server, clients, with_part("TEXT/plain;charset=utf-8"))


async def test_a_type_only_a_skill_accepts_is_taken(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(["text/plain"], IMAGE_SKILL))
        await completed(server, clients, with_part("image/png"))
        error = await rpc_error(clients.stub(server).SendMessage(with_part("image/jpeg"), metadata=V1))
    assert_error(error, Code.INVALID_ARGUMENT, REFUSED, acceptedModes="text/plain, image/png")


@pytest.mark.parametrize(
    ("modes", "taken", "refused"), [(["*/*"], "model/gltf+json", None), (["image/*"], "image/webp", "imagex/webp")]
)
async def test_wildcards_accept_every_type_or_every_subtype(
    start_server: StartServer, clients: Clients, modes: list[str], taken: str, refused: str | None
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await enforcing(start_server, card(modes))
        await completed(server, clients, with_part(taken))
        if refused is not None:
            error = await rpc_error(clients.stub(server).SendMessage(with_part(refused), metadata=V1))
            assert_error(error, Code.INVALID_ARGUMENT, REFUSED, mediaType=refused)


async def test_off_by_default_every_part_is_taken(start_server: StartServer, clients: Clients) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=card(["text/plain"]))
        await completed(server, clients, with_part("image/png"))
        events = await read_all(clients.stub(server).SendStreamingMessage(with_part("audio/ogg"), metadata=V1))
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


def test_what_a_card_accepts_is_compiled_once_and_bounded_in_the_refusal() -> None:
    many = [f"application/x-type-{n}" for n in range(30)]
    accepted = AcceptedInputModes.of(a2a_pb2.AgentCard(default_input_modes=["text", " text/* ", *many]))
    assert accepted.accepts("text") and accepted.accepts("text/csv") and not accepted.accepts("textual")
    assert not accepted.accepts("texts/csv"), "a whole type matches its own type only"
    assert enforced_input_modes(a2a_pb2.AgentCard(), enforce=True) is None, "no modes anywhere: everything"
    refused = accepted.refusal(a2a_pb2.Part(text="x", media_type="video/" + "x" * 10_000), 3)
    assert refused is not None and refused.violations[0][0] == "message.parts[3].media_type"
    assert len(refused.metadata["mediaType"]) == 100
    assert refused.metadata["acceptedModes"].endswith(" and 22 more")


def test_an_otherwise_invalid_request_is_refused_as_invalid_first() -> None:
    request = with_part("video/mp4")
    request.message.parts.add(media_type="text/plain")  # no content
    with pytest.raises(InvalidRequestError):
        validate_send(request, input_modes=enforced_input_modes(a2a_pb2.AgentCard(default_input_modes=["a/b"]), True))
