"""The user's own `grpc.aio.ServerInterceptor`s (`A2AServer(interceptors=[...])`, `serve --interceptor`), run
inside the chain, around the servicer.

Where, and why there: our chain is built by wrapping each A2A method's handler, not from grpc interceptors, so
an interceptor given to `grpc.aio.server(interceptors=...)` would run before all of it, on calls that
authentication then refuses and on health and reflection too. These run after authentication, the limits, the
version and extension checks, the echo, the request's parse and its tenant check, just before the servicer: a
user's interceptor sees only calls that were admitted, with the parsed request, and whatever it raises still
leaves through the errors guard and the access log, metrics and spans. With none given, nothing of this runs.

Each call runs them as grpc would (`intercept_service(continuation, handler_call_details)`, the first given
outermost): `handler_call_details.method` is the full method path (`/lf.a2a.v1.A2AService/SendMessage`, or the
0.3 face's `/a2a.v1.A2AService/...`), `invocation_metadata` the request headers. The handler the continuation
returns serves the call; a streaming one's behavior is an async generator and must be returned as one.

The grpc context a user's interceptor is given is the call's, through `InterceptorContext`: `abort()` raises the
typed error of its code (or of the ErrorInfo reason in a `grpc-status-details-bin` it passes), which the chain
turns into the status, so the access log and metrics record it; `set_trailing_metadata()` adds to the trailers
(the extension echo stays). The rule of a2a_grpc.arrival holds for it: the context is for the call's life only,
never after the behavior returned or the stream's last event, nor from a task left running after the call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any, NamedTuple

import grpc

from a2a_grpc.call import CallContext
from a2a_grpc.errors import A2AError, UnimplementedError, error_from_status
from a2a_grpc.interceptors.server.limits import released_when_done
from a2a_grpc.loading import load_object
from a2a_grpc.status_details import STATUS_DETAILS_KEY, Metadata, status_message, status_trailers
from a2a_grpc.telemetry.calls import Behave, Prepare


class _CallDetails(NamedTuple):
    method: str
    invocation_metadata: Metadata


class HandlerCallDetails(_CallDetails, grpc.HandlerCallDetails):  # type: ignore[misc]
    """What a user's interceptor is told of a call: its full method path and its request headers."""


class InterceptorContext:
    """A call's grpc context as a user's interceptor sees it (see the module's doc)."""

    __slots__ = ("_context", "_ending")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._ending: A2AError | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def ending_with(self, error: A2AError) -> None:
        """`error` is the servicer's, on its way out through the user's interceptors (`_abort`): an abort with its
        status raises it as it is, not one read back from its already escaped status."""
        self._ending = error

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata | None = ()) -> None:
        trailing_metadata = trailing_metadata or ()
        self.set_trailing_metadata([(key, value) for key, value in trailing_metadata if key != STATUS_DETAILS_KEY])
        ending, self._ending = self._ending, None
        if ending is not None and ending.code == code and status_message(ending) == details:
            raise ending
        raise error_from_status(code, details, trailing_metadata)

    def set_trailing_metadata(self, trailing_metadata: Metadata) -> None:
        if trailing_metadata:
            self._context.set_trailing_metadata((*(self._context.trailing_metadata() or ()), *trailing_metadata))


def load_interceptor(spec: str) -> grpc.aio.ServerInterceptor:
    """The interceptor `--interceptor MODULE:ATTR` names: a class or factory (called with no arguments) or an
    instance; ValueError when it is not a `grpc.aio.ServerInterceptor`."""
    interceptor = load_object(spec, "--interceptor", "interceptor", is_interceptor)
    return checked_interceptor(interceptor, spec)


def checked_interceptor(interceptor: Any, name: str) -> grpc.aio.ServerInterceptor:
    if is_interceptor(interceptor):
        return interceptor
    if isinstance(interceptor, grpc.ServerInterceptor):
        raise ValueError(f"{name} is a sync grpc.ServerInterceptor: this server takes grpc.aio.ServerInterceptor")
    raise ValueError(f"{name} is not a grpc.aio.ServerInterceptor (its type is {type(interceptor).__name__})")


def is_interceptor(target: Any) -> bool:
    return isinstance(target, grpc.aio.ServerInterceptor)


class UserInterceptors:
    """Wraps a method's last two steps (the preparation and the servicer) in the user's interceptors."""

    def __init__(self, interceptors: Sequence[grpc.aio.ServerInterceptor]) -> None:
        self._interceptors = tuple(interceptors)

    async def _handler(self, index: int, innermost: grpc.RpcMethodHandler, details: Any) -> Any:
        if index == len(self._interceptors):
            return innermost
        return await self._interceptors[index].intercept_service(partial(self._handler, index + 1, innermost), details)

    async def _intercepted(self, path: str, call: CallContext, innermost: grpc.RpcMethodHandler) -> Any:
        handler = await self._handler(0, innermost, HandlerCallDetails(path, call.metadata))
        if handler is None:
            raise UnimplementedError(f"an interceptor of this server left {path} without a handler")
        return handler

    def unary(self, path: str, prepare: Prepare, behave: Behave[Any]) -> tuple[Prepare, Behave[Any]]:
        async def intercepted(prepared: tuple[Any, Any], call: CallContext) -> Any:
            request, context = prepared
            ours = InterceptorContext(context)

            async def serve(request: Any, context: Any) -> Any:
                try:
                    return await behave(request, call)
                except A2AError as error:
                    await _abort(context, ours, error)
                    raise

            handler = await self._intercepted(path, call, grpc.unary_unary_rpc_method_handler(serve))
            return await handler.unary_unary(request, ours)

        return _keeping_context(prepare), intercepted

    def stream(
        self, path: str, prepare: Prepare, open_stream: Behave[AsyncIterator[Any]]
    ) -> tuple[Prepare, Behave[AsyncIterator[Any]]]:
        """As `unary`, for a stream, whose preparation holds its slot (request, release): given back when the
        stream ends, or at once when an interceptor refuses it before it opened."""

        async def intercepted(prepared: tuple[Any, Any], call: CallContext) -> AsyncIterator[Any]:
            (request, release), context = prepared
            ours = InterceptorContext(context)
            try:

                async def serve(request: Any, context: Any) -> AsyncIterator[Any]:
                    try:
                        async for event in await open_stream((request, release), call):
                            yield event
                    except A2AError as error:
                        await _abort(context, ours, error)
                        raise

                handler = await self._intercepted(path, call, grpc.unary_stream_rpc_method_handler(serve))
                events = handler.unary_stream(request, ours)
            except BaseException:
                release()
                raise
            return released_when_done(events, release)

        return _keeping_context(prepare), intercepted


async def _abort(context: Any, ours: InterceptorContext, error: A2AError) -> None:
    """End the call with `error` the way grpc's servicers do, through the context the user's interceptors gave the
    servicer, so that they see its status (OpenTelemetry's records the code from it); `ours`, the InterceptorContext
    underneath, raises `error` itself again, for the chain's errors guard."""
    ours.ending_with(error)
    await context.abort(error.code, status_message(error), status_trailers(error))


def _keeping_context(prepare: Prepare) -> Prepare:
    """`prepare`, handing the grpc context on with what it made: the servicer's step takes none, a user's
    interceptor needs it."""

    async def prepared(request: bytes, call: CallContext, context: Any) -> tuple[Any, CallContext]:
        made, call = await prepare(request, call, context)
        return (made, context), call

    return prepared
