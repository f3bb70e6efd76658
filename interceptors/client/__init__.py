"""The client interceptors for calling A2A agents, over grpc.aio and plain sync channels, composed in one place.

    channel = grpc.aio.insecure_channel(target, interceptors=client_interceptors(extensions=[URI]))
    channel = grpc.intercept_channel(grpc.insecure_channel(target), *sync_client_interceptors(extensions=[URI]))

Every `lf.a2a.v1.A2AService` call then carries `a2a-version` and the requested `a2a-extensions`
(one comma-joined entry), the server's echo of the activated set is read from the response headers
(or the trailers), and an error status is raised as the typed error of `a2a_grpc.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import grpc

from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.interceptors.client.calls import A2ACallPolicy, A2AUnaryStreamInterceptor, A2AUnaryUnaryInterceptor
from a2a_grpc.interceptors.client.echo import ResponseExtensions, ResponseObserver, observe_extensions
from a2a_grpc.interceptors.client.parameters import use_extensions
from a2a_grpc.interceptors.client.sync_calls import (
    A2AStreamCall,
    A2ASyncClientInterceptor,
    A2AUnaryCall,
    response_extensions,
)

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import ClientTracer

__all__ = [
    "A2ACallPolicy",
    "A2AStreamCall",
    "A2ASyncClientInterceptor",
    "A2AUnaryCall",
    "A2AUnaryStreamInterceptor",
    "A2AUnaryUnaryInterceptor",
    "ResponseExtensions",
    "ResponseObserver",
    "client_interceptors",
    "observe_extensions",
    "response_extensions",
    "sync_client_interceptors",
    "use_extensions",
]


def client_interceptors(
    extensions: Iterable[str] = (),
    *,
    version: str = "1.0",
    typed_errors: bool = True,
    on_response: ResponseObserver | None = None,
    tracer: ClientTracer | None = None,
) -> list[grpc.aio.ClientInterceptor]:
    """One interceptor per RPC kind A2A uses (unary and server-streaming), sharing one policy.

    `extensions` are requested on every call; a call adds its own with `a2a-extensions` entries in
    its metadata, and `use_extensions(...)` replaces the set for the calls started in a block.
    `on_response` sees each response's `ResponseExtensions`, as does `observe_extensions()`. With a
    `tracer` (a2a_grpc.telemetry.tracing_setup.client_tracer), each call is a CLIENT span and carries
    its `traceparent`.
    """
    policy = A2ACallPolicy(
        version=version,
        extensions=parse_extension_values(extensions),
        typed_errors=typed_errors,
        on_response=on_response,
        tracer=tracer,
    )
    return [A2AUnaryUnaryInterceptor(policy), A2AUnaryStreamInterceptor(policy)]


def sync_client_interceptors(
    extensions: Iterable[str] = (),
    *,
    version: str = "1.0",
    typed_errors: bool = True,
    on_response: ResponseObserver | None = None,
) -> list[grpc.UnaryUnaryClientInterceptor | grpc.UnaryStreamClientInterceptor]:
    """`client_interceptors` for plain sync channels and stubs: `grpc.intercept_channel(channel, *these)`.

    The same policy, per call: `a2a-version` and the requested `a2a-extensions` sent, the echo read, an error
    status raised as its typed error. `response_extensions(call)` reads a call's echo (the call `.with_call`
    returns, or a stream); `observe_extensions()` and `use_extensions(...)` work per thread.
    """
    policy = A2ACallPolicy(
        version=version,
        extensions=parse_extension_values(extensions),
        typed_errors=typed_errors,
        on_response=on_response,
    )
    return [A2ASyncClientInterceptor(policy)]
