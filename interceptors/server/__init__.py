"""The server interceptor chain, composed in one place.

grpc.aio runs the list outermost first: errors (so every failure below becomes a proper status),
authentication, version, then extension negotiation, which is the order the spec gives for checks.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.interceptors.server.auth import BearerTokenInterceptor
from a2a_grpc.interceptors.server.errors import ErrorInterceptor
from a2a_grpc.interceptors.server.extensions import ExtensionInterceptor, HeaderMergingContext
from a2a_grpc.interceptors.server.version import VersionInterceptor

__all__ = [
    "BearerTokenInterceptor",
    "ErrorInterceptor",
    "ExtensionInterceptor",
    "HeaderMergingContext",
    "VersionInterceptor",
    "server_interceptors",
]


def server_interceptors(
    registry: ExtensionRegistry,
    *,
    missing_version_means: str = "0.3",
    bearer_tokens: Mapping[str, str] | None = None,
    negotiate_extensions: bool = True,
    echo_unary_headers: bool = False,
) -> list[grpc.aio.ServerInterceptor]:
    chain: list[grpc.aio.ServerInterceptor] = [ErrorInterceptor()]
    if bearer_tokens:
        chain.append(BearerTokenInterceptor(bearer_tokens))
    chain.append(VersionInterceptor(missing_means=missing_version_means))
    if negotiate_extensions:
        chain.append(ExtensionInterceptor(registry, unary_headers=echo_unary_headers))
    return chain
