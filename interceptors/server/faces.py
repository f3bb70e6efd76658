"""The protocol versions the server speaks, each a service of its own on the one port: a face.

A face says what the interceptor chain needs to serve its service: the methods, how a call's version is
decided, which headers carry the extensions (and their echo), how its errors read, and a request's tenant.
A2A 1.0 is `lf.a2a.v1.A2AService`; A2A 0.3 is `a2a.v1.A2AService` (a2a_grpc.v0_3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import ServiceDescriptor

from a2a_grpc.errors import A2AError, Metadata, VersionNotSupportedError
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03_pb2
from a2a_grpc.interceptors.server.metadata import first_value
from a2a_grpc.interceptors.server.version import VersionCheck, major_minor
from a2a_grpc.protocol import A2A_SERVICE, EXTENSIONS_HEADER, SERVICE_NAME, V03_EXTENSIONS_HEADER, VERSION_HEADER
from a2a_grpc.v0_3.errors import translator

V03_SERVICE = v03_pb2.DESCRIPTOR.services_by_name["A2AService"]
V03_SERVICE_NAME = V03_SERVICE.full_name  # a2a.v1.A2AService

VersionOf = Callable[[Metadata], str]  # the version a call speaks, or raises VersionNotSupportedError
Translate = Callable[[A2AError], A2AError]


@dataclass(frozen=True)
class Face:
    """`version_check(missing_means)` makes the face's version check; `errors(method)`, when set, how the errors
    of a method read to its callers; `log_name(method)` the name the access log and the metrics give a method;
    `extensions_not_required` the methods a caller may call without the card's required extensions: the ones
    it learns them from."""

    service: ServiceDescriptor
    version: str  # the A2A version the service speaks
    version_check: Callable[[str], VersionOf]
    extension_headers: tuple[str, ...]
    tenant_of: Callable[[Any], str]
    log_name: Callable[[str], str]
    errors: Callable[[str], Translate] | None = None
    extensions_not_required: frozenset[str] = frozenset()


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


def _no_tenant(request: Any) -> str:
    return ""


def _tenant(request: Any) -> str:
    return str(request.tenant)


V10_FACE = Face(
    service=A2A_SERVICE,
    version="1.0",
    version_check=lambda missing_means: VersionCheck(missing_means=missing_means),
    extension_headers=(EXTENSIONS_HEADER,),
    tenant_of=_tenant,
    log_name=lambda method: method,
)
V03_FACE = Face(
    service=V03_SERVICE,
    version="0.3",
    version_check=lambda missing_means: V03Version(),
    extension_headers=(V03_EXTENSIONS_HEADER, EXTENSIONS_HEADER),
    tenant_of=_no_tenant,
    log_name=lambda method: f"{V03_SERVICE_NAME}/{method}",
    errors=translator,
    # a gRPC-only 0.3 client learns the card, and so the required extensions, from this call alone (as a 1.0
    # client does from the card over HTTP, which nothing negotiates)
    extensions_not_required=frozenset({"GetAgentCard"}),
)
