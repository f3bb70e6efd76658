"""Checks the `a2a-version` service parameter of every A2A call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from a2a_grpc.call import begin_call
from a2a_grpc.errors import VersionNotSupportedError
from a2a_grpc.interceptors.server.handlers import first_value, is_a2a_method, rejecting_handler

VERSION_HEADER = "a2a-version"
SUPPORTED_VERSIONS = ("1.0",)


def major_minor(value: str) -> str | None:
    """`Major.Minor` of a version string ("1.0.1" -> "1.0"), None when it is not a version."""
    parts = value.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() and len(p) <= 9 for p in parts):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


class VersionInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a version this server does not speak with VersionNotSupportedError.

    A missing or empty header means 0.3 (the spec's rule) unless `missing_means` says otherwise.
    """

    def __init__(self, supported: tuple[str, ...] = SUPPORTED_VERSIONS, missing_means: str = "0.3") -> None:
        self._supported = supported
        self._missing_means = missing_means
        self._verdicts: dict[str, str | VersionNotSupportedError] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if not is_a2a_method(method):
            return await continuation(handler_call_details)
        value = first_value(handler_call_details, VERSION_HEADER)
        verdict = self._verdicts.get(value)
        if verdict is None:
            verdict = self._judge(value)
            if len(self._verdicts) < 64:  # the common values only; a flood of odd ones is not cached
                self._verdicts[value] = verdict
        if isinstance(verdict, VersionNotSupportedError):
            return rejecting_handler(method, verdict)
        begin_call().version = verdict
        return await continuation(handler_call_details)

    def _judge(self, value: str) -> str | VersionNotSupportedError:
        version = major_minor(value) if value.strip() else self._missing_means
        if version in self._supported:
            return version
        send = f"{VERSION_HEADER}: {self._supported[-1]}"
        if not value.strip():
            message = f"no {VERSION_HEADER} header, which means version 0.3; this agent speaks " + (
                f"{', '.join(self._supported)}: send '{send}'"
            )
        else:
            shown = value if len(value) <= 32 else value[:32] + "..."
            message = (
                f"A2A version {shown!r} is not supported; this agent speaks {', '.join(self._supported)}: send '{send}'"
            )
        return VersionNotSupportedError(
            message, metadata={"requestedVersion": value[:32], "supportedVersions": ",".join(self._supported)}
        )
