"""Calling one A2A method through the chain's own handler, for an HTTP face.

A face parses ProtoJSON into the method's request message, and hands its encoding to the handler
`ServerChain.method_handlers` built for the gRPC port, with an `HttpCall` for a context: the handler
authenticates, applies the limits, checks the version and the extensions, parses the request and names
its tenant, then calls the servicer, exactly as for a gRPC call. A body that is not a valid request is
handed on as bytes no message parses from, so the chain refuses it at the point a gRPC call's bad request
is refused (after authentication, the version and the extensions); the face then words the refusal for
JSON (which field did not parse).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from a2a_grpc.errors import InvalidRequestError, UnavailableError
from a2a_grpc.faces.call import HttpAbort, HttpCall
from a2a_grpc.faces.errors import Refusal

STOPPING = "the server is stopping; send the request again (to another replica)"
UNPARSABLE = b"\xff"  # no message parses from these bytes (a truncated varint)
VERSION_PARAMETER = "A2A-Version"  # spec §3.6.1: a client may send the version as a request parameter instead
_VERSION_KEY = "a2a-version"
_BAD_REQUEST_TYPE = "type.googleapis.com/" + error_details_pb2.BadRequest.DESCRIPTOR.full_name


class Draining:
    """Whether the server is stopping: then the faces refuse new calls before they reach the chain, as grpc core
    refuses a new call on a port that is stopping."""

    __slots__ = ("refusing",)

    def __init__(self) -> None:
        self.refusing = False

    def refusal(self) -> Refused:
        return Refused(Refusal.of_error(UnavailableError(STOPPING)))


class Refused(Exception):
    """The request was refused with `refusal`, before any response was sent."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass(frozen=True)
class FaceMethod:
    """One method of the service as the faces call it: its message classes and the chain's handler."""

    name: str
    request_class: type[Message]
    response_class: type[Message]
    streaming: bool
    handler: grpc.RpcMethodHandler
    draining: Draining

    def request(self, document: Any) -> Message | InvalidRequestError:
        """The request message `document` (ProtoJSON data) describes, or why it does not describe one."""
        if not isinstance(document, dict):
            return InvalidRequestError(f"the request of {self.name} must be a JSON object")
        try:
            return json_format.ParseDict(document, self.request_class())
        except (json_format.ParseError, ValueError, TypeError, RecursionError) as error:
            return InvalidRequestError(f"the request is not a valid {self.name} request: {error}")

    async def unary(self, request: Message | InvalidRequestError, call: HttpCall) -> Message:
        """The response, or Refused."""
        if self.draining.refusing:
            raise self.draining.refusal()
        try:
            response = await self.handler.unary_unary(_encoded(request), call)
            call.raise_status()
        except HttpAbort as abort:
            raise Refused(_refusal(abort, request)) from None
        return self.response_class.FromString(response) if type(response) is bytes else response

    async def stream(
        self, request: Message | InvalidRequestError, call: HttpCall
    ) -> tuple[Any, AsyncGenerator[Any, None]]:
        """The first event (None for a stream that ended without one) and the stream of the rest, or Refused
        when the chain refused the call before its first event."""
        if self.draining.refusing:
            raise self.draining.refusal()
        events = self.handler.unary_stream(_encoded(request), call)
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return None, events
        except HttpAbort as abort:
            raise Refused(_refusal(abort, request)) from None
        return first, call.events_then_status(events)

    def event(self, encoded: Any) -> Message:
        return self.response_class.FromString(encoded) if type(encoded) is bytes else encoded


def arrived_call(request: web.Request) -> HttpCall:
    """What the chain reads of the caller, read as the request arrives: its headers, and the version from the
    `A2A-Version` query parameter when no header carries it."""
    call = HttpCall.of(request)
    version = request.query.get(VERSION_PARAMETER)
    if version is None or _VERSION_KEY in request.headers:
        return call
    return HttpCall((*call.invocation_metadata(), (_VERSION_KEY, version)), call.peer(), call.auth_context())


def face_methods(
    service: ServiceDescriptor, handlers: Mapping[str, grpc.RpcMethodHandler], draining: Draining
) -> dict[str, FaceMethod]:
    return {
        method.name: FaceMethod(
            method.name,
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
            method.server_streaming,
            handlers[method.name],
            draining,
        )
        for method in service.methods
    }


def _encoded(request: Message | InvalidRequestError) -> bytes:
    return UNPARSABLE if isinstance(request, InvalidRequestError) else request.SerializeToString()


def _refusal(abort: HttpAbort, request: Message | InvalidRequestError) -> Refusal:
    """The chain's refusal; for a request the face could not parse, refused where the chain parses (invalid,
    with no field named), the face's own words on what did not parse."""
    refusal = Refusal.of_abort(abort)
    if (
        isinstance(request, InvalidRequestError)
        and refusal.code is grpc.StatusCode.INVALID_ARGUMENT
        and not any(detail.get("@type") == _BAD_REQUEST_TYPE for detail in refusal.details)
    ):
        return Refusal.of_error(request)
    return refusal


def query_document(request_class: type[Message], query: Mapping[str, list[str]]) -> Any:
    """The ProtoJSON data a GET's query parameters describe (spec §11.5: camelCase names, scalars as text,
    repeated fields repeated or comma-joined); an InvalidRequestError naming a parameter that is not a field, or
    one a query cannot carry."""
    fields = request_class.DESCRIPTOR.fields
    by_name = {**{field.name: field for field in fields}, **{field.json_name: field for field in fields}}
    document: dict[str, Any] = {}
    for name, values in query.items():
        if name == VERSION_PARAMETER:  # a service parameter (arrived_call), not a field
            continue
        field = by_name.get(name)
        if field is None:
            return InvalidRequestError(f"{name!r} is not a parameter of this method", violations=[(name, "unknown")])
        if field.message_type is not None and field.message_type.full_name != "google.protobuf.Timestamp":
            return InvalidRequestError(f"{name!r} cannot be given in the query", violations=[(name, "not a scalar")])
        texts = [part for value in values for part in value.split(",")] if _is_repeated(field) else values[-1:]
        converted = [_scalar(field, text) for text in texts]
        document[field.json_name] = converted if _is_repeated(field) else converted[0]
    return document


def _is_repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _scalar(field: Any, text: str) -> Any:
    """`text` as its field's JSON value; left as text where the field's parse will refuse it by name."""
    if field.cpp_type == field.CPPTYPE_BOOL:
        return {"true": True, "false": False}.get(text, text)
    return text
