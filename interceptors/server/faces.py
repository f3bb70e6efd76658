"""The protocol versions the server speaks, each a service of its own on the one port: a face.

A face says what the interceptor chain needs to serve its service: the methods, how a call's version is
decided, which headers carry the extensions (and their echo), how its errors read, and a request's tenant.
A2A 1.0 is `lf.a2a.v1.A2AService`; A2A 0.3 is `a2a.v1.A2AService` (a2a_grpc.v0_3). The rules a call is checked
against come from a2a_grpc.interceptors.server.face_rules, which the standard interceptors share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import ServiceDescriptor

from a2a_grpc.generated.v0_3 import a2a_pb2 as v03_pb2
from a2a_grpc.interceptors.server.face_rules import V03_RULES, V10_RULES, VersionOf
from a2a_grpc.interceptors.server.face_rules import Translate as Translate
from a2a_grpc.protocol import A2A_SERVICE
from a2a_grpc.wire import V03_SERVICE_NAME

V03_SERVICE = v03_pb2.DESCRIPTOR.services_by_name["A2AService"]  # named V03_SERVICE_NAME (a2a_grpc.wire)


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


def _no_tenant(request: Any) -> str:
    return ""


def _tenant(request: Any) -> str:
    return str(request.tenant)


V10_FACE = Face(
    service=A2A_SERVICE,
    version="1.0",
    version_check=V10_RULES.version_check,
    extension_headers=V10_RULES.extension_headers,
    tenant_of=_tenant,
    log_name=lambda method: method,
)
V03_FACE = Face(
    service=V03_SERVICE,
    version="0.3",
    version_check=V03_RULES.version_check,
    extension_headers=V03_RULES.extension_headers,
    tenant_of=_no_tenant,
    log_name=lambda method: f"{V03_SERVICE_NAME}/{method}",
    errors=V03_RULES.errors,
    extensions_not_required=V03_RULES.extensions_not_required,
)
