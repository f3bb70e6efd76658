"""The client interceptors, one class per RPC kind.

grpc.aio registers an interceptor object for only the first RPC kind its class inherits (grpc issues
31442 and 43512): a class that is both UnaryUnary and UnaryStream silently skips streaming calls.
So each kind has its own class, and both share one `A2ACallPolicy`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from a2a_grpc.errors import error_from_rpc_error
from a2a_grpc.interceptors.client.echo import ResponseExtensions, ResponseObserver, current_observer
from a2a_grpc.interceptors.client.parameters import is_a2a_method, method_name, with_service_parameters

Continuation = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class A2ACallPolicy:
    """What every A2A call gets: the service parameters, the echo read, typed errors."""

    version: str = "1.0"
    extensions: tuple[str, ...] = ()
    typed_errors: bool = True
    on_response: ResponseObserver | None = None

    def prepare(self, details: Any) -> Any:
        return details._replace(metadata=with_service_parameters(details.metadata, self.version, self.extensions))

    def publish(self, record: ResponseExtensions) -> None:
        for observer in (self.on_response, current_observer()):
            if observer is not None:
                observer(record)

    def failure(self, error: grpc.aio.AioRpcError, record: ResponseExtensions) -> BaseException:
        record.read(error.trailing_metadata(), "trailers")
        return error_from_rpc_error(error) if self.typed_errors else error


class A2AUnaryUnaryInterceptor(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_unary(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        call = await continuation(self.policy.prepare(client_call_details), request)
        record = ResponseExtensions(method_name(client_call_details.method))
        try:
            await call
        except grpc.aio.AioRpcError as error:
            failure = self.policy.failure(error, record)
            self.policy.publish(record)
            if failure is error:
                raise
            raise failure from error
        if not record.read(await call.initial_metadata(), "headers"):
            record.read(await call.trailing_metadata(), "trailers")
        self.policy.publish(record)
        return call


class A2AUnaryStreamInterceptor(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, policy: A2ACallPolicy) -> None:
        self.policy = policy

    async def intercept_unary_stream(self, continuation: Continuation, client_call_details: Any, request: Any) -> Any:
        if not is_a2a_method(client_call_details.method):
            return await continuation(client_call_details, request)
        call = await continuation(self.policy.prepare(client_call_details), request)
        record = ResponseExtensions(method_name(client_call_details.method))
        record.read(await call.initial_metadata(), "headers")  # waits for headers only, no message is read
        self.policy.publish(record)
        return self._events(call, record)

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
