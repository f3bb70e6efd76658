"""The builder: a server's parts made from its settings, each from the parts it needs, so none is read before it
exists. Building checks every setting (a bad one raises here, in one line, before anything runs) and starts nothing;
a2a_grpc.assembly.lifecycle starts and stops what it built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.assembly.cards import api_key_headers
from a2a_grpc.assembly.grpc_port import GrpcPort
from a2a_grpc.assembly.http_port import HttpPort
from a2a_grpc.assembly.readiness import Readiness
from a2a_grpc.assembly.served import Served, served_by
from a2a_grpc.assembly.services import Services, Telemetry, a2a_services
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.faces import HttpFaces
from a2a_grpc.ids import new_id
from a2a_grpc.interceptors.server import Limits
from a2a_grpc.push.service import PushService
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.store import TaskStore, open_store
from a2a_grpc.tasks import TaskLimits, TaskManager
from a2a_grpc.telemetry import AccessLog, Metrics, load_tracing

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import Tracing  # opentelemetry, an extra: imported only with tracing on


@dataclass(frozen=True)
class Assembly:
    """Every part of one server, made and not started."""

    settings: ServerSettings
    served: Served
    store: TaskStore
    telemetry: Telemetry
    push: PushService | None
    task_limits: TaskLimits
    readiness: Readiness
    manager: TaskManager
    limits: Limits
    services: Services
    grpc_port: GrpcPort
    http_port: HttpPort | None  # None: no HTTP card


def assemble(
    settings: ServerSettings,
    agent: AgentExecutor | None,
    store: TaskStore | None,
    *,
    tracer_provider: Any,
    interceptors: Sequence[grpc.aio.ServerInterceptor],
) -> Assembly:
    """The parts `settings` make, around `agent` (None: settings.agent's) and `store` (None: settings.store_url's)."""
    _, _, http_port = settings.http_listen.rpartition(":")
    if settings.http_listen and not http_port.isdigit():
        raise ValueError(f"the HTTP listen address takes HOST:PORT, got {settings.http_listen!r}")
    # TracingUnavailable (an ImportError) without the otel extra
    tracing: Tracing | None = load_tracing(tracer_provider) if settings.tracing else None
    served = served_by(settings, agent, interceptors)
    card, extended_card = served.card, served.extended_card
    if store is None:
        store = open_store(settings.store_url, settings.store_pool_size, settings.memory_store_max_tasks)
    metrics = Metrics() if settings.metrics else None  # a registry per server
    telemetry = Telemetry(AccessLog() if settings.access_log else None, metrics, tracing)
    push = _push_service(settings, store, metrics) if card.capabilities.push_notifications else None
    task_limits = TaskLimits(
        settings.max_history_per_task,
        settings.max_artifact_bytes_per_task,
        settings.max_push_configs_per_task,
        settings.max_history_bytes_per_task,
    )
    readiness = Readiness(store, settings.readiness_interval_seconds, settings.readiness_timeout_seconds)
    manager = _task_manager(settings, store, served, readiness, push, task_limits)
    limits = Limits(  # ValueError for a rate no token bucket can hold
        requests_per_second=settings.max_requests_per_second,
        max_streams_per_caller=settings.max_streams_per_caller,
        max_streams=settings.max_streams,
        auth_failures_per_second=settings.max_auth_failures_per_second,
    )
    if metrics is not None:
        metrics.count_tasks(manager.task_counts)
        store.on_commit = metrics.store_commit
    servicer = A2AServicer(
        manager,
        card,
        served.registry,
        extended_card,
        settings.max_list_page_bytes,
        max_extension_payload_bytes=settings.max_extension_payload_bytes,
        check_webhook=push.check_webhook if push is not None else None,
        max_parts=settings.max_parts,
        max_answer_bytes=task_limits.max_answer_bytes,
        enforce_input_modes=settings.enforce_input_modes,
    )
    services = a2a_services(settings, servicer, served, limits, telemetry, readiness.health)
    send_bytes = task_limits.max_send_bytes(settings.max_list_page_bytes)
    grpc_port = GrpcPort(settings, services, served.tls, send_bytes)
    http = (
        HttpPort(settings, served.tls, metrics, _http_faces(settings, services, servicer))
        if settings.http_listen
        else None
    )
    return Assembly(
        settings, served, store, telemetry, push, task_limits, readiness, manager, limits, services, grpc_port, http
    )


def _http_faces(settings: ServerSettings, services: Services, servicer: A2AServicer) -> HttpFaces:
    """The JSON-RPC and HTTP+JSON faces `settings.bindings` names, over chains like the gRPC faces'."""
    return HttpFaces(
        settings.bindings.split(","),
        services.chain_of,
        servicer,
        max_body_bytes=settings.max_message_bytes,
        io_seconds=settings.http_head_seconds,
    )


def _task_manager(
    settings: ServerSettings,
    store: TaskStore,
    served: Served,
    readiness: Readiness,
    push: PushService | None,
    task_limits: TaskLimits,
) -> TaskManager:
    return TaskManager(
        store,
        served.agent,
        on_storage_writable=readiness.report_storage,
        subscriber_buffer_bytes=settings.max_subscriber_buffer_bytes,
        lease_seconds=settings.lease_seconds,
        poll_seconds=settings.poll_seconds,
        on_push_due=push.wake if push is not None else None,
        limits=task_limits,
        event_retention_seconds=settings.event_retention_seconds,
        task_retention_seconds=settings.task_retention_seconds,
        credential_headers=api_key_headers(served.card, served.extended_card),
    )


def _push_service(settings: ServerSettings, store: TaskStore, metrics: Metrics | None) -> PushService:
    shared = store.shared
    claimer = (shared.replica_id if shared is not None else "") or new_id()  # replicas claim webhooks as themselves
    on_delivery = metrics.push_delivery if metrics is not None else None
    return PushService(settings.push, store, claimer, on_delivery=on_delivery)
