"""What the gRPC port serves: each face's A2A service behind its interceptor chain, health, reflection, and the
answer to methods no service has. Built once, when the server is built; registered on the port's server."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from a2a_grpc.assembly.served import Served
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.interceptors.server import Limits, ServerChain
from a2a_grpc.interceptors.server.faces import V03_FACE, V10_FACE, Face
from a2a_grpc.interceptors.server.services import GuardedServices
from a2a_grpc.interceptors.server.tenants import TenantCheck
from a2a_grpc.interceptors.server.unknown import UnknownMethods
from a2a_grpc.reflection import add_reflection
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.telemetry import AccessLog, Metrics
from a2a_grpc.v0_3.servicer import V03Servicer

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import Tracing  # opentelemetry, an extra: imported only with tracing on


@dataclass(frozen=True)
class Telemetry:
    """Where every call ends (a2a_grpc.telemetry); the faces share them."""

    access_log: AccessLog | None
    metrics: Metrics | None
    tracing: Tracing | None


@dataclass(frozen=True)
class Services:
    faces: Sequence[tuple[Face, Any, ServerChain]]  # the face, its servicer, its chain
    unknown: UnknownMethods
    health: health.aio.HealthServicer
    chain_of: Callable[[Face], ServerChain]  # a chain for another face (the HTTP faces'), sharing the faces' parts

    def chain(self, face: Face) -> ServerChain:
        return next(chain for served, _, chain in self.faces if served == face)

    def register(self, server: grpc.aio.Server) -> None:
        for face, servicer, chain in self.faces:
            handlers = chain.method_handlers(servicer)
            name = face.service.full_name
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
            server.add_registered_method_handlers(name, handlers)
        guarded = GuardedServices(server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, guarded)
        add_reflection((*(face.service.full_name for face, _, _ in self.faces), health.SERVICE_NAME), guarded)
        server.add_generic_rpc_handlers((self.unknown,))


def a2a_services(
    settings: ServerSettings,
    servicer: A2AServicer,
    served: Served,
    limits: Limits,
    telemetry: Telemetry,
    health_servicer: health.aio.HealthServicer,
) -> Services:
    """The 1.0 face (and when the card speaks 0.3, the 0.3 one over the same servicer), each behind a chain of its
    own; the chains share the limits, the authenticator and the telemetry."""
    tenants = [interface.tenant for interface in served.card.supported_interfaces]

    def chain(face: Face) -> ServerChain:
        return ServerChain(
            served.registry,
            missing_version_means=settings.missing_version_means,
            authenticator=served.authenticator,
            negotiate_extensions=settings.negotiate_extensions,
            echo_unary_headers=settings.echo_unary_headers,
            worker_pid=os.getpid() if settings.worker_mode else None,
            access_log=telemetry.access_log,
            metrics=telemetry.metrics,
            tracing=telemetry.tracing,
            limits=limits,
            max_extensions_per_call=settings.max_extensions_per_call,
            tenants=TenantCheck(tenants),
            face=face,
            interceptors=served.interceptors,
        )

    servicers: list[tuple[Face, Any]] = [
        (V10_FACE, servicer),
        *([(V03_FACE, V03Servicer(servicer))] if served.serves_v03 else []),
    ]
    faces = [(face, face_servicer, chain(face)) for face, face_servicer in servicers]
    spoken = [(face.service.full_name, face.version) for face, _, _ in faces]
    first = faces[0][2]
    unknown = UnknownMethods(spoken, telemetry.access_log, telemetry.metrics, first.admit_caller)
    return Services(faces, unknown, health_servicer, chain)
