"""The client interceptors, one class per RPC kind.

grpc.aio registers an interceptor object for only the first RPC kind its class inherits (grpc issues
31442 and 43512): a class that is both UnaryUnary and UnaryStream silently skips streaming calls.
So each kind has its own class, and both share one `A2ACallPolicy`; every call, these two's and the sync
interceptor's (a2a_grpc.interceptors.client.sync_calls), starts and ends through the policy's `PolicedCall`, so
that all end alike. With a `tracer` (tracing on), each call is a CLIENT span whose `traceparent` the call
carries (a2a_grpc.telemetry.tracing).
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

    def start(self, details: Any) -> tuple[PolicedCall, Any]:
        """A call of `details.method` starting: its record, span and observers, and the details it is sent with."""
        policed = PolicedCall(self, method_name(details.method))
        return policed, self.prepare(details, policed.span)

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


class PolicedCall:
    """One A2A call under the policy, from its start to its end: the one path of every kind of call, unary and
    stream, asyncio and sync. Its `record` of the echo is published once, to the observers there were when the
    call started: as soon as the echo or the response (a stream's first event) is there, else when the call
    ends, however it ends (an error status's trailers read first); a call its caller abandons (cancelled) only
    ends its span. `response`, `events`: a unary call's response, a stream's first event and count."""

    __slots__ = ("_observers", "_policy", "published", "record", "span")

    def __init__(self, policy: A2ACallPolicy, method: str) -> None:
        self._policy = policy
        self.record = ResponseExtensions(method)
        self.span = policy.tracer.start(method) if policy.tracer is not None else None
        self._observers = policy.observers()
        self.published = False

    def publish(self) -> None:
        if not self.published:
            self.published = True
            self._policy.publish(self.record, self._observers)

    def ok(self, response: Any, events: int | None = None) -> None:
        self.publish()
        if self.span is not None:
            self.span.ok(self.record.activated, response, events)

    def failed(self, error: grpc.RpcError, response: Any = None, events: int | None = None) -> BaseException:
        """The exception to raise for `error`, the status the call ended with (typed, with `typed_errors`)."""
        failure = self._policy.failure(error, self.record)
        self.publish()
        if self.span is not None:
            reason = failure.reason if isinstance(failure, A2AError) else ""
            self.span.failed(error.code(), reason, self.record.activated, response, events)
        return failure

    def abandoned(self, response: Any = None, events: int | None = None) -> None:
        if self.span is not None:
            self.span.failed(grpc.StatusCode.CANCELLED, "", self.record.activated, response, events)


class A2AUnaryUnaryInterceptor(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_unary(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        policed, details = self.policy.start(client_call_details)
        try:
            call = await continuation(details, request)
            response = await call
        except grpc.aio.AioRpcError as error:
            failure = policed.failed(error)
            if failure is error:
                raise
            raise failure from error
        except BaseException:
            policed.abandoned()
            raise
        if not policed.record.read(await call.initial_metadata(), "headers"):
            policed.record.read(await call.trailing_metadata(), "trailers")
        policed.ok(response)
        return call


class A2AUnaryStreamInterceptor(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_stream(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        policed, details = self.policy.start(client_call_details)
        try:
            call = await continuation(details, request)
            # waits for headers only, no message is read (a stream that fails without headers ends here)
            if policed.record.read(await call.initial_metadata(), "headers"):
                policed.publish()
        except BaseException:
            policed.abandoned()
            raise
        return self._events(call, policed)

    async def _events(self, call: Any, policed: PolicedCall) -> AsyncIterator[Any]:
        """The stream's events, its record published with the first (a stream its reader leaves is CANCELLED)."""
        first = None
        count = 0
        try:
            async for event in call:
                if count == 0:
                    first = event
                    policed.publish()
                count += 1
                yield event
        except grpc.aio.AioRpcError as error:
            failure = policed.failed(error, first, count)
            if failure is error:
                raise
            raise failure from error
        except BaseException:
            policed.abandoned(first, count)
            raise
        policed.record.read(await call.trailing_metadata(), "trailers")
        policed.ok(first, count)
