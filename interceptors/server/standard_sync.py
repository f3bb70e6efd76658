"""`A2ASyncServerInterceptor`: A2A's version check, extension negotiation and echo for any sync `grpc.server`.

    server = grpc.server(thread_pool, interceptors=[A2ASyncServerInterceptor(card="agent-card.json")])

The rules are our server's own (interceptors.server.admission); this module wraps the handlers the sync way, and
does the same for the sync servicer methods a grpc.aio server runs in its thread pool. A refusal sets the status's
trailers, then aborts: the sync server keeps trailers set before an abort.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc

from a2a_grpc.errors import A2AError
from a2a_grpc.interceptors.server.admission import (
    Accept,
    Echo,
    Refuse,
    StandardChecks,
    activate,
    deactivate,
    with_echo,
)
from a2a_grpc.status_details import Metadata, status_message, status_trailers

_DONE = object()


class SyncEchoingContext:
    """A sync servicer's context while its call echoes: the response headers it sends carry the echo too (sent
    before the first message, or on return, when it sends none), and trailers it sets keep the echo unless they
    name it themselves, as do those it aborts with. Everything else is the servicer context's."""

    __slots__ = ("_context", "_echo", "headers_due")

    def __init__(self, context: Any, echo: Echo, headers_due: bool) -> None:
        self._context = context
        self._echo = echo
        self.headers_due = headers_due

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def send_initial_metadata(self, metadata: Metadata) -> None:
        if self.headers_due:
            self.headers_due = False
            metadata = (*self._echo, *metadata)
        self._context.send_initial_metadata(metadata)

    def send_headers(self) -> None:
        self.headers_due = False
        self._context.send_initial_metadata(self._echo)

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._context.set_trailing_metadata(with_echo(metadata, self._echo))

    def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()) -> None:
        if not trailing_metadata:  # the sync server's abort takes no trailers, and keeps the ones set (the echo)
            self._context.abort(code, details)
        else:  # grpc.aio's context of a sync method: these trailers would replace the echo
            self._context.abort(code, details, with_echo(trailing_metadata, self._echo))

    def abort_with_status(self, status: grpc.Status) -> None:
        self._context.abort_with_status(
            _Status(status.code, status.details, with_echo(status.trailing_metadata, self._echo))
        )


class _Status(grpc.Status):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Metadata) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


def accept_sync(
    handler: grpc.RpcMethodHandler, activated: tuple[str, ...], echo: Echo, unary_headers: bool
) -> grpc.RpcMethodHandler:
    """`handler` echoing `echo` in the trailers (set before the servicer runs, so an error it raises keeps them) and,
    on streams or with `unary_headers`, in the response headers; its servicer reads `activated` as
    `activated_extensions()`."""
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, activated, echo, unary_headers),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _stream(handler.unary_stream, activated, echo),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


def _unary(behaviour: Callable[[Any, Any], Any], activated: tuple[str, ...], echo: Echo, headers: bool) -> Any:
    def unary(request: Any, context: Any) -> Any:
        context.set_trailing_metadata(echo)
        echoing = SyncEchoingContext(context, echo, headers)
        token = activate(activated)
        try:
            response = behaviour(request, echoing)
        finally:
            deactivate(token)
        if echoing.headers_due:
            echoing.send_headers()
        return response

    return unary


def _stream(behaviour: Callable[[Any, Any], Iterable[Any]], activated: tuple[str, ...], echo: Echo) -> Any:
    def stream(request: Any, context: Any) -> Iterator[Any]:
        context.set_trailing_metadata(echo)
        echoing = SyncEchoingContext(context, echo, True)
        # the servicer's iterator runs with every `next`: each in the call's own context, which no other call sees
        call = contextvars.copy_context()
        call.run(activate, activated)
        items = iter(call.run(behaviour, request, echoing))
        while (item := call.run(next, items, _DONE)) is not _DONE:
            if echoing.headers_due:
                echoing.send_headers()
            yield item
        if echoing.headers_due:
            echoing.send_headers()

    return stream


def refuse_sync(handler: grpc.RpcMethodHandler, error: A2AError) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind that ends its call with `error` (its request is never parsed)."""

    def refuse(request: bytes, context: Any) -> None:
        context.set_trailing_metadata(status_trailers(error))
        context.abort(error.code, status_message(error))

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)


class A2ASyncServerInterceptor(StandardChecks, grpc.ServerInterceptor):  # type: ignore[misc]
    """Checks every call to an A2A service (`lf.a2a.v1.A2AService`, and the 0.3 `a2a.v1.A2AService`) of a sync
    `grpc.server` as `a2a-grpc serve` does: its `a2a-version` (VERSION_NOT_SUPPORTED), then its `a2a-extensions`
    against what `card` (a ProtoJSON file's path, a ProtoJSON dict or an AgentCard message) or `extensions`
    ((uri, required) pairs) declares: a call without a required one is FAILED_PRECONDITION with the ErrorInfo
    EXTENSION_SUPPORT_REQUIRED; an accepted call's activated set is echoed in `a2a-extensions` and is what
    `activated_extensions()` returns in its servicer method. Calls to other services pass untouched.
    See docs/interceptors.md."""

    @staticmethod
    def _handlers() -> tuple[Accept, Refuse]:
        return accept_sync, refuse_sync

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return self._admission.handler(handler_call_details.method, handler_call_details.invocation_metadata, handler)
