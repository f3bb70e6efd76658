"""A bare A2A servicer of the kind a user writes on generated stubs, for the standard interceptors' tests: every RPC
of the service answers a default response of its type (a stream: one), and sets the trailer SEEN_TRAILER to what
`activated_extensions()` said inside it, so a test sees what the servicer read and that the echo survives a
servicer's own trailers. Made from any generated module's service descriptor and servicer class: ours, or stubs
generated at test time (tests/bare_a2a_server.py). Imports no generated code itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from a2a_grpc.interceptors.server import activated_extensions

SEEN_TRAILER = "x-seen-extensions"


def _seen() -> tuple[tuple[str, str], ...]:
    return ((SEEN_TRAILER, ",".join(activated_extensions()) or "-"),)


def bare_servicer(base: type, service: ServiceDescriptor, *, asynchronous: bool) -> Any:
    """An instance of a subclass of the generated servicer class `base` answering every method of `service`."""
    methods: dict[str, Any] = {}
    for method in service.methods:
        response = message_factory.GetMessageClass(method.output_type)
        if asynchronous:
            methods[method.name] = _async_stream(response) if method.server_streaming else _async_unary(response)
        else:
            methods[method.name] = _sync_stream(response) if method.server_streaming else _sync_unary(response)
    return type("BareServicer", (base,), methods)()


def _async_unary(response: type) -> Any:
    async def unary(self: Any, request: Any, context: Any) -> Any:
        context.set_trailing_metadata(_seen())
        return response()

    return unary


def _async_stream(response: type) -> Any:
    async def stream(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
        context.set_trailing_metadata(_seen())
        yield response()

    return stream


def _sync_unary(response: type) -> Any:
    def unary(self: Any, request: Any, context: Any) -> Any:
        context.set_trailing_metadata(_seen())
        return response()

    return unary


def _sync_stream(response: type) -> Any:
    def stream(self: Any, request: Any, context: Any) -> Iterator[Any]:
        context.set_trailing_metadata(_seen())
        yield response()

    return stream
