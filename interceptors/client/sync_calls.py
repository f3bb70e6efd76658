"""The client interceptor for plain sync gRPC stubs: `grpc.intercept_channel(channel, *sync_client_interceptors())`.

One object serves both RPC kinds A2A uses (unary and server-streaming): sync `grpc.intercept_channel` asks an
interceptor for each kind it implements, unlike grpc.aio. It applies the asyncio interceptors' `A2ACallPolicy`
(the service parameters, the echo read, typed errors) to each call and hands back the call wrapped, so that:

- `stub.Method(request)` and `stub.Method.with_call(request)` raise the typed error of `a2a_grpc.errors`
  (with `typed_errors=True`), as `.future(request).result()` does;
- `response_extensions(call)` gives the call's `ResponseExtensions` (`.with_call` returns the call; a stream
  is its own call, complete once it ended), and `observe_extensions()` collects them in a `with` block.

Sync stubs are called from many threads: nothing here is shared between calls. A call's record is its own,
and `observe_extensions()` lives in a contextvar, which is the calling thread's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import grpc

from a2a_grpc.interceptors.client.calls import A2ACallPolicy, PolicedCall
from a2a_grpc.interceptors.client.echo import ResponseExtensions
from a2a_grpc.interceptors.client.parameters import is_a2a_method

Continuation = Callable[[Any, Any], Any]


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _ClientCallDetails(_CallDetails, grpc.ClientCallDetails):  # type: ignore[misc]
    """grpc's details with the service parameters added (grpc only reads the six fields)."""


class A2ASyncClientInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    def _started(self, details: Any) -> tuple[PolicedCall, _ClientCallDetails]:
        plain = _ClientCallDetails(
            details.method,
            details.timeout,
            details.metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )
        policed, prepared = self.policy.start(plain)
        return policed, prepared._replace(metadata=tuple(prepared.metadata))

    def intercept_unary_unary(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return continuation(client_call_details, request)
        policed, details = self._started(client_call_details)
        return A2AUnaryCall(continuation(details, request), policed)

    def intercept_unary_stream(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return continuation(client_call_details, request)
        policed, details = self._started(client_call_details)
        return A2AStreamCall(continuation(details, request), policed)


def response_extensions(call: Any) -> ResponseExtensions:
    """What `call` (returned by `.with_call`, or a stream) said about extensions: its record when it went through
    the sync interceptor, else read from its headers, then its trailers."""
    record = getattr(call, "extensions", None)
    if isinstance(record, ResponseExtensions):
        return record
    record = ResponseExtensions("")
    if not record.read(call.initial_metadata(), "headers"):
        record.read(call.trailing_metadata(), "trailers")
    return record


class _WrappedCall(grpc.Call, grpc.Future):  # type: ignore[misc]
    """A call of grpc's (a `grpc.Call` and `grpc.Future`), under the policy (`PolicedCall`): its `extensions`."""

    def __init__(self, inner: Any, policed: PolicedCall) -> None:
        self._inner = inner
        self._policed = policed
        self.extensions = policed.record

    def initial_metadata(self) -> Any:
        return self._inner.initial_metadata()

    def trailing_metadata(self) -> Any:
        return self._inner.trailing_metadata()

    def code(self) -> grpc.StatusCode:
        return self._inner.code()

    def details(self) -> str:
        return self._inner.details()  # type: ignore[no-any-return]

    def is_active(self) -> bool:
        return self._inner.is_active()  # type: ignore[no-any-return]

    def time_remaining(self) -> float | None:
        return self._inner.time_remaining()  # type: ignore[no-any-return]

    def cancel(self) -> bool:
        return self._inner.cancel()  # type: ignore[no-any-return]

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return self._inner.add_callback(callback)  # type: ignore[no-any-return]

    def cancelled(self) -> bool:
        return self._inner.cancelled()  # type: ignore[no-any-return]

    def running(self) -> bool:
        return self._inner.running()  # type: ignore[no-any-return]

    def done(self) -> bool:
        return self._inner.done()  # type: ignore[no-any-return]

    def traceback(self, timeout: float | None = None) -> Any:
        return self._inner.traceback(timeout)


class A2AUnaryCall(_WrappedCall):
    """A unary call: its `result()` returns the response or raises the call's (typed) error; its record is
    complete, and published, once the call is done, in the thread that finds it done."""

    def __init__(self, inner: Any, policed: PolicedCall) -> None:
        super().__init__(inner, policed)
        self._failure: BaseException | None = None
        self._settled = False
        # reentrant: an observer that asks the call for its result, in the thread that settles it
        self._lock = threading.RLock()
        inner.add_done_callback(lambda _: self._settle())

    def _settle(self) -> BaseException | None:
        """End the call under the policy, once; the error to raise, None when the call succeeded."""
        with self._lock:
            if not self._settled:
                self._settled = True
                inner = self._inner
                error = inner.exception()
                if isinstance(error, grpc.RpcError):
                    self._failure = self._policed.failed(error)
                elif error is not None:
                    self._policed.abandoned()
                else:
                    if not self.extensions.read(inner.initial_metadata(), "headers"):
                        self.extensions.read(inner.trailing_metadata(), "trailers")
                    self._policed.ok(inner.result())
            return self._failure

    def result(self, timeout: float | None = None) -> Any:
        try:
            response = self._inner.result(timeout)
        except grpc.RpcError as error:
            failure = self._settle()
            if failure is None or failure is error:
                raise
            raise failure from error
        self._settle()  # a future's done callbacks may run after its result is out
        return response

    def exception(self, timeout: float | None = None) -> BaseException | None:
        error = self._inner.exception(timeout)
        return self._settle() if error is not None else None

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self._inner.add_done_callback(lambda _: fn(self))


class A2AStreamCall(_WrappedCall, Iterator[Any]):
    """A stream: iterate it for its events; an error status is raised typed. Its record is published when its
    first event arrives, with the echo of its headers, else at its end (PolicedCall), and completed from its
    trailers at its end."""

    def __iter__(self) -> A2AStreamCall:
        return self

    def __next__(self) -> Any:
        policed = self._policed
        try:
            event = next(self._inner)
        except StopIteration:
            self.extensions.read(self._inner.trailing_metadata(), "trailers")
            policed.ok(None)
            raise
        except grpc.RpcError as error:
            failure = policed.failed(error)
            if failure is error:
                raise
            raise failure from error
        except BaseException:
            policed.abandoned()
            raise
        if not policed.published:
            self.extensions.read(self._inner.initial_metadata(), "headers")
            policed.publish()
        return event

    def result(self, timeout: float | None = None) -> Any:
        return self._inner.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._inner.exception(timeout)  # type: ignore[no-any-return]

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self._inner.add_done_callback(lambda _: fn(self))
