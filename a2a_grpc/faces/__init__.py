"""The HTTP faces of the A2A service: JSON-RPC 2.0 and HTTP+JSON, beside gRPC on the HTTP port.

gRPC is the contract; these are faces of it, as grpc-gateway puts REST in front of a gRPC service from the
same proto. A face translates an HTTP request into the method's request message and hands it, in process, to
the handler the interceptor chain builds for the gRPC port (`ServerChain.method_handlers`), with the HTTP
request standing in for the grpc context (a2a_grpc.faces.call). So an HTTP call passes every check a gRPC call
passes, in the same order, from the same code (authentication, the limits, the version, the extensions, the
tenant, then the servicer's validation), and nothing below the chain knows which face a call came through;
the access log and the metrics name the method `jsonrpc/Name` or `http+json/Name`.
Why in process and not a loopback gRPC channel: see docs/bindings.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from a2a_grpc.faces.guard import guarded
from a2a_grpc.faces.http_json import HttpJsonFace
from a2a_grpc.faces.invoke import face_methods
from a2a_grpc.faces.jsonrpc import JsonRpcFace
from a2a_grpc.faces.routes import service_routes
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server.chain import ServerChain
from a2a_grpc.interceptors.server.faces import V10_FACE, Face
from a2a_grpc.setting_types import BINDING_NAMES

GRPC, JSONRPC, HTTP_JSON = BINDING_NAMES  # as --bindings names them
PROTOCOL_BINDING = {GRPC: "GRPC", JSONRPC: "JSONRPC", HTTP_JSON: "HTTP+JSON"}  # as the card names them
JSONRPC_PATH = "/"

__all__ = ["JSONRPC_PATH", "HttpFaces", "advertise", "served_interfaces"]


class HttpFaces:
    """The HTTP faces `bindings` names, each over a chain `chain_of` makes (sharing the gRPC port's limits,
    authenticator and telemetry) around `servicer`."""

    def __init__(
        self,
        bindings: Iterable[str],
        chain_of: Callable[[Face], ServerChain],
        servicer: Any,
        *,
        max_body_bytes: int,
        io_seconds: float,
    ) -> None:
        self.bindings = tuple(binding for binding in bindings if binding in (JSONRPC, HTTP_JSON))
        self._chain_of = chain_of
        self._servicer = servicer
        self._max_body_bytes = max_body_bytes
        self._io_seconds = io_seconds

    def add_routes(self, app: web.Application) -> None:
        max_body_bytes, io_seconds = self._max_body_bytes, self._io_seconds
        if JSONRPC in self.bindings:
            face = JsonRpcFace(self._methods(JSONRPC), max_body_bytes=max_body_bytes, io_seconds=io_seconds)
            app.router.add_post(JSONRPC_PATH, guarded("jsonrpc", face.handle, face.internal_error))
        if HTTP_JSON in self.bindings:
            rest = HttpJsonFace(self._methods(HTTP_JSON), max_body_bytes=max_body_bytes, io_seconds=io_seconds)
            rest.add_routes(app, service_routes(V10_FACE.service))

    def _methods(self, binding: str) -> Any:
        face = dataclasses.replace(V10_FACE, log_name=lambda method: f"{binding}/{method}")
        return face_methods(face.service, self._chain_of(face).method_handlers(self._servicer))

    def advertise(self, cards: Iterable[a2a_pb2.AgentCard | None], base_url: str) -> None:
        """List the served faces in each card, at `base_url` (the HTTP port's)."""
        advertise(cards, self.bindings, base_url)


def advertise(cards: Iterable[a2a_pb2.AgentCard | None], bindings: Iterable[str], base_url: str) -> None:
    """Make each card's interfaces the served ones (served_interfaces); no `bindings`: the HTTP side is off."""
    served = tuple(bindings)
    for card in cards:
        if card is not None:
            served_interfaces(card, served, base_url)


def served_interfaces(card: a2a_pb2.AgentCard, bindings: Iterable[str], base_url: str) -> None:
    """Make `card`'s interfaces the served ones: its gRPC interfaces first; then, for each HTTP face served,
    the card's own interfaces of that binding (its author knows the public address) or else one beside each
    1.0 gRPC interface (its tenant) at `base_url`; interfaces of a binding not served are dropped, others kept."""
    served = {PROTOCOL_BINDING[binding] for binding in bindings}
    http = {PROTOCOL_BINDING[JSONRPC]: base_url + JSONRPC_PATH, PROTOCOL_BINDING[HTTP_JSON]: base_url}
    interfaces = list(card.supported_interfaces)
    grpc_ones = [i for i in interfaces if i.protocol_binding == PROTOCOL_BINDING[GRPC]]
    listed: list[a2a_pb2.AgentInterface] = [*grpc_ones]
    for binding, url in http.items():
        if binding not in served:
            continue
        own = [i for i in interfaces if i.protocol_binding == binding]
        listed.extend(own or _beside(grpc_ones, binding, url))
    listed.extend(i for i in interfaces if i.protocol_binding not in (*http, PROTOCOL_BINDING[GRPC]))
    copies = [_copy(i) for i in listed]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(copies)


def _beside(grpc_ones: list[a2a_pb2.AgentInterface], binding: str, url: str) -> list[a2a_pb2.AgentInterface]:
    return [
        a2a_pb2.AgentInterface(url=url, protocol_binding=binding, protocol_version=i.protocol_version, tenant=i.tenant)
        for i in grpc_ones
        if i.protocol_version != "0.3"
    ]


def _copy(interface: a2a_pb2.AgentInterface) -> a2a_pb2.AgentInterface:
    copy = a2a_pb2.AgentInterface()
    copy.CopyFrom(interface)
    return copy
