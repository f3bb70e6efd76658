"""Checks the `a2a-version` service parameter of every A2A call: `VersionCheck` on the 1.0 service, `V03Version` on
the 0.3 one."""

from __future__ import annotations

from a2a_grpc.errors import Metadata, VersionNotSupportedError
from a2a_grpc.interceptors.server.metadata import first_value
from a2a_grpc.settings.defaults import MISSING_VERSION_MEANS
from a2a_grpc.wire import SERVICE_NAME, V03_SERVICE_NAME, VERSION_HEADER

SUPPORTED_VERSIONS = ("1.0",)
_CACHED_VERDICTS = 64  # the common header values; a flood of odd ones is not cached


def major_minor(value: str) -> str | None:
    """`Major.Minor` of a version string ("1.0.1" -> "1.0"), None when it is not a version."""
    parts = value.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() and len(p) <= 9 for p in parts):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


class VersionCheck:
    """The version a call speaks; VersionNotSupportedError for one this server does not speak.

    A missing or empty header means 0.3 (the spec's rule) unless `missing_means` says otherwise.
    """

    def __init__(
        self, supported: tuple[str, ...] = SUPPORTED_VERSIONS, missing_means: str = MISSING_VERSION_MEANS
    ) -> None:
        self._supported = supported
        self._missing_means = missing_means
        self._verdicts: dict[str, str | VersionNotSupportedError] = {}

    def __call__(self, metadata: Metadata) -> str:
        value = first_value(metadata, VERSION_HEADER)
        verdict = self._verdicts.get(value)
        if verdict is None:
            verdict = self._judge(value)
            if len(self._verdicts) < _CACHED_VERDICTS:
                self._verdicts[value] = verdict
        if isinstance(verdict, VersionNotSupportedError):
            raise VersionNotSupportedError(verdict.message, metadata=verdict.metadata)
        return verdict

    def _judge(self, value: str) -> str | VersionNotSupportedError:
        version = major_minor(value) if value.strip() else self._missing_means
        if version in self._supported:
            return version
        speaks = ", ".join(self._supported)
        send = f"{VERSION_HEADER}: {self._supported[-1]}"
        if not value.strip():
            message = f"no {VERSION_HEADER} header, which means version 0.3; this agent speaks {speaks}: send '{send}'"
        else:
            shown = value if len(value) <= 32 else value[:32] + "..."
            message = f"A2A version {shown!r} is not supported; this agent speaks {speaks}: send '{send}'"
        return VersionNotSupportedError(
            message, metadata={"requestedVersion": value[:32], "supportedVersions": ",".join(self._supported)}
        )


class V03Version:
    """A call to the 0.3 service speaks 0.3 whatever its `a2a-version` says, but for an explicit 1.0: that caller
    wants the 1.0 service, and is told its name."""

    def __call__(self, metadata: Metadata) -> str:
        value = first_value(metadata, VERSION_HEADER)
        if value and major_minor(value) == "1.0":
            raise VersionNotSupportedError(
                f"{V03_SERVICE_NAME} is A2A 0.3; A2A 1.0 is served as {SERVICE_NAME} on this port",
                metadata={"requestedVersion": value[:32], "service": SERVICE_NAME},
            )
        return "0.3"
