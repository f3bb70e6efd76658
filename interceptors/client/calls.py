"""The client interceptors, one class per RPC kind.

grpc.aio registers an interceptor object for only the first RPC kind its class inherits (grpc issues
31442 and 43512): a class that is both UnaryUnary and UnaryStream silently skips streaming calls.
So each kind has its own class, and both share one `A2ACallPolicy`. With a `tracer` (tracing on), each
call is a CLIENT span whose `traceparent` the call carries (a2a_grpc.telemetry.tracing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from a2a_grpc.errors import A2AError, error_from_rpc_error
from a2a_grpc.interceptors.client.echo import ResponseExtensions, ResponseObserver, current_observer
from a2a_grpc.interceptors.client.parameters import is_a2a_method, method_name, with_service_parameters

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import ClientSpan, ClientTracer

Continuation = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class A2ACallPolicy:
    """What every A2A call gets: the service parameters, the echo read, typed errors; a span with a `tracer`."""

    version: str = "1.0"
    extensions: tuple[str, ...] = ()
    typed_errors: bool = True
    on_response: ResponseObserver | None = None
    tracer: ClientTracer | None = None

    def prepare(self, details: Any, span: ClientSpan | None = None) -> Any:
        metadata = with_service_parameters(details.metadata, self.version, self.extensions)
        if span is not None:
            span.inject(metadata)
        return details._replace(metadata=metadata)

    def observers(self) -> tuple[ResponseObserver, ...]:
        """Who hears of a call's response, taken as the call starts: a sync call may complete in another thread."""
        return tuple(observer for observer in (self.on_response, current_observer()) if observer is not None)

    def publish(self, record: ResponseExtensions, observers: tuple[ResponseObserver, ...] | None = None) -> None:
        for observer in self.observers() if observers is None else observers:
            observer(record)

    def failure(self, error: grpc.RpcError, record: ResponseExtensions) -> BaseException:
        record.read(error.trailing_metadata(), "trailers")
        return error_from_rpc_error(error) if self.typed_errors else error


class A2AUnaryUnaryInterceptor(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_unary(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        policy = self.policy
        method = method_name(client_call_details.method)
        span = policy.tracer.start(method) if policy.tracer is not None else None
        record = ResponseExtensions(method)
        try:
            call = await continuation(policy.prepare(client_call_details, span), request)
            response = await call
        except grpc.aio.AioRpcError as error:
            failure = policy.failure(error, record)
            policy.publish(record)
            if span is not None:
                _failed(span, error, failure, record)
            if failure is error:
                raise
            raise failure from error
        except BaseException:
            if span is not None:
                span.failed(grpc.StatusCode.CANCELLED, "", record.activated, None)
            raise
        if not record.read(await call.initial_metadata(), "headers"):
            record.read(await call.trailing_metadata(), "trailers")
        policy.publish(record)
        if span is not None:
            span.ok(record.activated, response)
        return call


class A2AUnaryStreamInterceptor(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_stream(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        policy = self.policy
        method = method_name(client_call_details.method)
        span = policy.tracer.start(method) if policy.tracer is not None else None
        call = await continuation(policy.prepare(client_call_details, span), request)
        record = ResponseExtensions(method)
        record.read(await call.initial_metadata(), "headers")  # waits for headers only, no message is read
        policy.publish(record)
        return self._events(call, record) if span is None else self._traced_events(call, record, span)

    async def _events(self, call: Any, record: ResponseExtensions) -> AsyncIterator[Any]:
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as error:
            failure = self.policy.failure(error, record)
            if failure is error:
                raise
            raise failure from error
        record.read(await call.trailing_metadata(), "trailers")

    async def _traced_events(self, call: Any, record: ResponseExtensions, span: ClientSpan) -> AsyncIterator[Any]:
        """`_events`, ending the call's span with the stream (a stream its reader leaves is CANCELLED)."""
        first = None
        count = 0
        try:
            async for event in self._events(call, record):
                if first is None:
                    first = event
                count += 1
                yield event
        except A2AError as error:
            span.failed(error.code, error.reason, record.activated, first, count)
            raise
        except grpc.aio.AioRpcError as error:
            span.failed(error.code(), "", record.activated, first, count)
            raise
        except BaseException:
            span.failed(grpc.StatusCode.CANCELLED, "", record.activated, first, count)
            raise
        span.ok(record.activated, first, count)


def _failed(span: ClientSpan, error: grpc.aio.AioRpcError, failure: BaseException, record: ResponseExtensions) -> None:
    reason = failure.reason if isinstance(failure, A2AError) else ""
    span.failed(error.code(), reason, record.activated, None)
