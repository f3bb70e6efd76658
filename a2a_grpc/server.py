"""The server: the A2A gRPC service behind its interceptor chain, health, reflection and the HTTP agent card."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from aiohttp.log import server_logger
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from a2a_grpc import resume
from a2a_grpc.agent import AgentExecutor, check_agent, declared_extensions
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.auth import AuthSettings, Verifiers, secure_cards
from a2a_grpc.auth.card_security import API_KEY, kind_of
from a2a_grpc.card.http import CACHE_CONTROL, CardDocument
from a2a_grpc.card.model import GRPC_BINDING, CardError, complete_card, load_card, register_card_extensions
from a2a_grpc.card.signing import CardSigner, check_signed_as_served
from a2a_grpc.connection_front import INNER_HOST, ConnectionFront
from a2a_grpc.connections import GRPC_INT_MAX, connection_options, default_max_connections
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.faces import HttpFaces
from a2a_grpc.faces import advertise as advertise_faces
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.http_guard import ConnectionGuard
from a2a_grpc.ids import new_id
from a2a_grpc.interceptors.server import Limits, ServerChain
from a2a_grpc.interceptors.server.faces import V03_FACE, V10_FACE, Face
from a2a_grpc.interceptors.server.services import GuardedServices
from a2a_grpc.interceptors.server.tenants import TenantCheck
from a2a_grpc.interceptors.server.unknown import UnknownMethods
from a2a_grpc.interceptors.server.user import checked_interceptor, load_interceptor
from a2a_grpc.loading import load_object
from a2a_grpc.network_logs import HttpServerLog, quiet_grpc_client_logs
from a2a_grpc.protocol import AGENT_CARD_PATH, SERVICE_NAME
from a2a_grpc.push.service import JWKS_PATH, PushService, PushSettings
from a2a_grpc.reflection import add_reflection
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.settings import defaults
from a2a_grpc.signing_keys import jwks_document
from a2a_grpc.store import TaskStore, open_store
from a2a_grpc.tasks import TaskLimits, TaskManager
from a2a_grpc.telemetry import METRICS_PATH, AccessLog, Metrics, load_tracing
from a2a_grpc.telemetry.worker_metrics import WorkerMetrics
from a2a_grpc.tls import ServerFiles, ServerTLS
from a2a_grpc.v0_3.card import add_v03_interfaces, is_v03
from a2a_grpc.v0_3.servicer import V03Servicer

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]  # of an HTTP route

DEFAULT_STORE_URL = defaults.STORE_URL
SHUTDOWN_SETTLE_SHARE = 0.8  # of the grace period, spent waiting for calls before running tasks are failed
# grpc.health.v1 service names: "" and SERVICE_NAME say whether this server can take calls now (readiness:
# NOT_SERVING while the store is unreachable or full, and while draining); LIVENESS_SERVICE only whether the
# process answers at all (SERVING from the moment the port is bound until the drain), for a liveness probe
# that must not restart a server whose database is down.
READINESS_SERVICES = ("", SERVICE_NAME)
LIVENESS_SERVICE = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class ServerSettings:
    # A field that a setting of `a2a-grpc serve` sets defaults to that setting's (a2a_grpc.settings.defaults).
    listen: str = defaults.LISTEN
    http_listen: str = defaults.HTTP_LISTEN  # "" serves no HTTP card
    card_path: str | None = None  # None: the demo card
    extended_card_path: str | None = None
    # PEM private keys that sign both cards (a2a_grpc.card.signing): the first signs, all are in the JWKS
    card_signing_keys: tuple[str, ...] = ()
    store_url: str = defaults.STORE_URL
    agent: str | None = None  # MODULE:ATTR; None: the echo agent
    interceptors: tuple[str, ...] = ()  # MODULE:ATTR of grpc.aio.ServerInterceptors (a2a_grpc.interceptors.server.user)
    grace_seconds: float = defaults.GRACE_SECONDS
    missing_version_means: str = defaults.MISSING_VERSION_MEANS
    bearer_tokens: dict[str, str] = field(default_factory=dict)
    auth: AuthSettings = field(default_factory=AuthSettings)  # JWTs and API keys (a2a_grpc.auth)
    max_message_bytes: int = 4 * 1024 * 1024  # the largest request accepted (answers: TaskLimits.max_answer_bytes)
    max_metadata_bytes: int = 16 * 1024  # request headers; larger ones get RESOURCE_EXHAUSTED from the transport
    negotiate_extensions: bool = defaults.NEGOTIATE_EXTENSIONS
    # A2A 0.3 clients' service (a2a.v1.A2AService) beside 1.0's, and the 0.3 fields in the card (a2a_grpc.v0_3)
    serve_v03: bool = defaults.SERVE_V03
    # the A2A bindings served (a2a_grpc.faces): gRPC always, JSON-RPC and HTTP+JSON on the HTTP port with http_listen
    bindings: str = defaults.BINDINGS
    # Where unary calls echo a2a-extensions besides the trailers: grpc.aio sends unary response headers
    # in a transport operation of their own (its cost: docs/performance.md). Streams always echo in
    # their headers (before the first event) and trailers.
    echo_unary_headers: bool = defaults.ECHO_UNARY_HEADERS
    max_list_page_bytes: int = defaults.MAX_LIST_PAGE_BYTES  # a ListTasks page ends early past this size
    max_subscriber_buffer_bytes: int = defaults.MAX_SUBSCRIBER_BUFFER_BYTES  # a stream this far behind reads the log
    # one payload, serialized; larger: INVALID_ARGUMENT
    max_extension_payload_bytes: int = defaults.MAX_EXTENSION_PAYLOAD_BYTES
    # Limits (a2a_grpc.interceptors.server.limits), per process: a caller is its principal, or its peer's
    # address when anonymous. Past them: RESOURCE_EXHAUSTED with a RetryInfo. 0 requests per second: no rate limit.
    max_requests_per_second: float = defaults.MAX_REQUESTS_PER_SECOND
    # failed authentications a second per peer address; past it, a failure is RATE_LIMITED (a valid credential
    # always passes; 0: no limit)
    max_auth_failures_per_second: float = defaults.MAX_AUTH_FAILURES_PER_SECOND
    max_streams_per_caller: int = defaults.MAX_STREAMS_PER_CALLER
    max_streams: int = defaults.MAX_STREAMS
    max_parts: int = defaults.MAX_PARTS  # parts of one message; more: INVALID_ARGUMENT
    # distinct a2a-extensions of one call; more: INVALID_ARGUMENT
    max_extensions_per_call: int = defaults.MAX_EXTENSIONS_PER_CALL
    max_history_per_task: int = defaults.MAX_HISTORY_PER_TASK  # messages a task keeps; older ones are dropped
    max_artifact_bytes_per_task: int = defaults.MAX_ARTIFACT_BYTES_PER_TASK  # past it, the agent's publish fails
    max_push_configs_per_task: int = defaults.MAX_PUSH_CONFIGS_PER_TASK  # one more: RESOURCE_EXHAUSTED
    max_history_bytes_per_task: int = defaults.MAX_HISTORY_BYTES_PER_TASK  # past it, a message is RESOURCE_EXHAUSTED
    # One of the processes of `a2a-grpc serve --workers N`: both ports are shared with the others
    # (SO_REUSEPORT), and every A2A call's trailers name this process.
    worker_mode: bool = False
    # In a worker of `--workers N`: its index and the directory where the workers share their metrics.
    worker_metrics: tuple[int, str] | None = None
    store_pool_size: int = defaults.STORE_POOL_SIZE  # connections to a PostgreSQL store
    lease_seconds: float = defaults.LEASE_SECONDS  # with a shared store: a replica silent this long has died
    poll_seconds: float = defaults.POLL_SECONDS  # with a shared store: polling while notifications are down
    event_retention_seconds: float = defaults.EVENT_RETENTION_SECONDS  # a task final this long loses its event log
    task_retention_seconds: float = defaults.TASK_RETENTION_SECONDS  # a task final this long is removed (0: never)
    memory_store_max_tasks: int = defaults.MEMORY_STORE_MAX_TASKS  # the memory store's bound (0: none)
    push: PushSettings = field(default_factory=PushSettings)  # for a card that declares pushNotifications
    access_log: bool = defaults.ACCESS_LOG  # one line per A2A call on the a2a_grpc.access logger
    metrics: bool = True  # Prometheus metrics at /metrics on the HTTP port (with http_listen)
    tracing: bool = defaults.TRACING  # OpenTelemetry spans of calls, agent runs and store writes (the otel extra)
    # While serving, the store is asked for a trivial read this often; no answer within the timeout (or an
    # error) turns readiness NOT_SERVING until an answer comes again.
    # The HTTP port (a2a_grpc.http_guard): connections open at most, and the seconds a connection is given to
    # send a request's head (from its opening, or its last response; idle keep-alive ones close after as long).
    http_max_connections: int = 512
    http_head_seconds: float = 10.0
    # The gRPC port (a2a_grpc.connections): connections open at most (0: half of what the open-file limit leaves
    # after the HTTP port's, at least a quarter of it), the seconds a connection has to finish its handshake, and
    # those without a call it may stay open (0: for ever).
    max_connections: int = defaults.MAX_CONNECTIONS
    max_connections_per_address: int = (
        defaults.MAX_CONNECTIONS_PER_ADDRESS
    )  # 0: no cap per address (a2a_grpc.connection_front accepts for grpc)
    handshake_seconds: float = defaults.HANDSHAKE_SECONDS
    connection_idle_seconds: float = defaults.CONNECTION_IDLE_SECONDS
    readiness_interval_seconds: float = 2.0
    readiness_timeout_seconds: float = 3.0
    # TLS on both ports (a2a_grpc.tls), reloaded by reload_certificates(): the PEM certificate chain and its
    # key; with tls_client_ca, clients must present a certificate one of its CAs signed. None: plaintext.
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None


def load_agent(spec: str | None) -> AgentExecutor:
    """The agent named `MODULE:ATTR`: a class or factory (called with no arguments) or an instance."""
    if spec is None:
        return EchoAgent()
    agent = check_agent(load_object(spec, "--agent", "agent", lambda target: hasattr(target, "execute")), spec)
    if not callable(getattr(agent, "cancel", None)):
        log.warning(
            "agent %s has no cancel(context, events) method: CancelTask interrupts its execute() and marks "
            "the task canceled without asking it",
            spec,
        )
    return agent


def _serving_cards(
    settings: ServerSettings, registry: ExtensionRegistry
) -> tuple[a2a_pb2.AgentCard, a2a_pb2.AgentCard | None]:
    """The public and the extended card, each listing every extension either card or the agent declares,
    and this server's stream-resume extension; a card without a GRPC interface gets this server's."""
    paths = [settings.card_path, *([settings.extended_card_path] if settings.extended_card_path else [])]
    cards = [load_card(path) for path in paths]
    for card in cards:
        register_card_extensions(card, registry)
    if resume.EXTENSION.uri not in registry:
        registry.add(resume.EXTENSION)
    for path, card in zip(paths, cards, strict=True):
        try:
            complete_card(card, settings.listen, registry)
        except CardError as error:  # name the file: with an extended card there are two
            raise CardError(f"{path or 'the demo card'}: {error}") from None
        if settings.serve_v03:
            add_v03_interfaces(card)
    return cards[0], cards[1] if len(cards) > 1 else None


def _api_key_headers(*cards: a2a_pb2.AgentCard | None) -> list[str]:
    """The request headers the cards' API-key schemes name: credentials, which agents do not see."""
    return [
        scheme.api_key_security_scheme.name
        for card in cards
        if card is not None
        for scheme in card.security_schemes.values()
        if kind_of(scheme) == API_KEY
    ]


def _check_not_in_use(listen: str) -> None:
    """Raise OSError when every address `listen` (HOST:PORT) resolves to is in use. gRPC would refuse it
    too, but only after its C core has logged a line of its own to stderr."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        addresses = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return  # gRPC reports it
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    continue
            return  # bindable, or failing for a reason gRPC reports itself
    raise OSError(f"cannot listen on {listen}: address already in use")


class A2AServer:
    """One agent served over gRPC (and its card over HTTP). `start`, then `stop`."""

    def __init__(
        self,
        settings: ServerSettings,
        agent: AgentExecutor | None = None,
        store: TaskStore | None = None,
        *,
        tracer_provider: Any = None,  # with settings.tracing: its spans' provider (None: the global one)
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),  # then settings.interceptors': around the servicer
    ):
        self.settings = settings
        _, _, http_port = settings.http_listen.rpartition(":")
        if settings.http_listen and not http_port.isdigit():
            raise ValueError(f"the HTTP listen address takes HOST:PORT, got {settings.http_listen!r}")
        # TracingUnavailable (an ImportError) without the otel extra
        self.tracing = load_tracing(tracer_provider) if settings.tracing else None
        self.agent = check_agent(agent) if agent is not None else load_agent(settings.agent)
        self.interceptors = [
            *(checked_interceptor(given, repr(given)) for given in interceptors),
            *(load_interceptor(spec) for spec in settings.interceptors),
        ]
        self.registry = ExtensionRegistry(declared_extensions(self.agent))
        files = ServerFiles.from_settings(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        self.tls = ServerTLS(files) if files is not None else None
        self.card, self.extended_card = _serving_cards(settings, self.registry)
        # the cards declare the schemes the settings configure; what the public card requires is enforced
        mtls = self.tls is not None and self.tls.client_certificates_required
        self._verifiers = Verifiers.configure(settings.auth, settings.bearer_tokens, mtls=mtls)
        self.authenticator = secure_cards(self.card, self.extended_card, self._verifiers)
        check_signed_as_served(settings.card_path, self.card)
        check_signed_as_served(settings.extended_card_path, self.extended_card)
        self.card_signer = CardSigner.from_pem_files(settings.card_signing_keys) if settings.card_signing_keys else None
        self.store = (
            store
            if store is not None
            else open_store(settings.store_url, settings.store_pool_size, settings.memory_store_max_tasks)
        )
        self.metrics = Metrics() if settings.metrics else None  # a registry per server
        self._access_log: AccessLog | None = None  # made at start, flushed at stop
        self._worker_metrics: WorkerMetrics | None = None
        self.push = self._push_service() if self.card.capabilities.push_notifications else None
        self.task_limits = TaskLimits(
            settings.max_history_per_task,
            settings.max_artifact_bytes_per_task,
            settings.max_push_configs_per_task,
            settings.max_history_bytes_per_task,
        )
        self.manager = TaskManager(
            self.store,
            self.agent,
            on_storage_writable=self._report_storage,
            subscriber_buffer_bytes=settings.max_subscriber_buffer_bytes,
            lease_seconds=settings.lease_seconds,
            poll_seconds=settings.poll_seconds,
            on_push_due=self.push.wake if self.push is not None else None,
            limits=self.task_limits,
            event_retention_seconds=settings.event_retention_seconds,
            task_retention_seconds=settings.task_retention_seconds,
            credential_headers=_api_key_headers(self.card, self.extended_card),
        )
        self.limits = Limits(  # ValueError for a rate no token bucket can hold
            requests_per_second=settings.max_requests_per_second,
            max_streams_per_caller=settings.max_streams_per_caller,
            max_streams=settings.max_streams,
            auth_failures_per_second=settings.max_auth_failures_per_second,
        )
        if self.metrics is not None:
            self.metrics.count_tasks(self.manager.task_counts)
            self.store.on_commit = self.metrics.store_commit
        self.health = health.aio.HealthServicer()
        self._health_updates: set[asyncio.Future[None]] = set()
        self._accepting = False  # started and not draining: readiness may say SERVING
        self._storage_writable = True  # False while the store refuses writes for want of space
        self._store_reachable = True  # False while the store does not answer the readiness check
        self._store_watch: asyncio.Task[None] | None = None
        self.port = 0
        self.http_port = 0
        self._server: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._http_server: asyncio.Server | None = None
        self._card_document: CardDocument | None = None  # what the HTTP port serves, made once the card is signed
        self._front: ConnectionFront | None = None  # accepting for grpc, with --max-connections-per-address

    def _push_service(self) -> PushService:
        claimer = getattr(self.store, "replica_id", "") or new_id()  # replicas claim webhooks as themselves
        on_delivery = self.metrics.push_delivery if self.metrics is not None else None
        return PushService(self.settings.push, self.store, claimer, on_delivery=on_delivery)

    async def start(self) -> None:
        """Serve: the store open, the task manager started, both ports bound, then health SERVING. A start that
        fails undoes all it had started, leaving no thread or task behind (and `stop` nothing to do)."""
        async with contextlib.AsyncExitStack() as undo:
            await self._start(undo)
            undo.pop_all()  # started: `stop` undoes it all, in its own order

    async def _start(self, undo: contextlib.AsyncExitStack) -> None:
        """`start`, each part it starts telling `undo` how to stop it."""
        # First: a key set or discovery document that cannot be had stops start-up before anything runs.
        undo.push_async_callback(self._verifiers.close)
        await self._verifiers.start()
        undo.push_async_callback(self.store.close)
        await self.store.open()
        undo.push_async_callback(self.manager.close)
        orphans = await self.manager.start()
        if orphans:
            log.warning("failed %d task(s) left running by a previous server process", orphans)
        settings = self.settings
        self._access_log = AccessLog() if settings.access_log else None
        quiet_grpc_client_logs()
        others = settings.http_max_connections if settings.http_listen else 0
        per_address = settings.max_connections_per_address
        max_connections = settings.max_connections or default_max_connections(others, 3 if per_address else 1)
        front = ConnectionFront(per_address=per_address, max_connections=max_connections) if per_address else None
        # Nothing larger than a task within its limits leaves (with room for a 0.3 client's form of it), nor larger
        # than grpc core's C int holds (2 GiB, protobuf's own bound on a message).
        send_bytes = min(GRPC_INT_MAX, self.task_limits.max_send_bytes(settings.max_list_page_bytes))
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", settings.max_message_bytes),
                ("grpc.max_send_message_length", send_bytes),
                # soft = hard limit: gRPC otherwise refuses headers between 8 and 16 KiB at random
                ("grpc.max_metadata_size", settings.max_metadata_bytes),
                ("grpc.absolute_max_metadata_size", settings.max_metadata_bytes),
                ("grpc.so_reuseport", int(settings.worker_mode)),
                *connection_options(max_connections, settings.handshake_seconds, settings.connection_idle_seconds),
            ],
        )
        undo.push_async_callback(server.stop, 0)
        servicer = A2AServicer(
            self.manager,
            self.card,
            self.registry,
            self.extended_card,
            settings.max_list_page_bytes,
            max_extension_payload_bytes=settings.max_extension_payload_bytes,
            check_webhook=self.push.check_webhook if self.push is not None else None,
            max_parts=settings.max_parts,
            max_answer_bytes=self.task_limits.max_answer_bytes,
        )
        self._servicer = servicer  # the HTTP faces' too
        faces = [(V10_FACE, servicer), *([(V03_FACE, V03Servicer(servicer))] if self._serves_v03 else [])]
        chains = [self._chain(face) for face, _ in faces]
        for (face, face_servicer), chain in zip(faces, chains, strict=True):
            handlers = chain.method_handlers(face_servicer)
            name = face.service.full_name
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
            server.add_registered_method_handlers(name, handlers)
        guarded = GuardedServices(server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, guarded)
        add_reflection((*(face.service.full_name for face, _ in faces), health.SERVICE_NAME), guarded)
        spoken = [(face.service.full_name, face.version) for face, _ in faces]
        server.add_generic_rpc_handlers(
            (UnknownMethods(spoken, self._access_log, self.metrics, chains[0].admit_caller),)
        )
        if not settings.worker_mode:  # a worker's port is held by its parent, which checked it
            _check_not_in_use(settings.listen)
        listen = f"{INNER_HOST}:0" if front is not None else settings.listen  # behind the front: on loopback
        try:
            if self.tls is None:
                self.port = server.add_insecure_port(listen)
            else:
                self.port = server.add_secure_port(listen, self.tls.grpc_credentials())
            if front is not None:
                self._front = front
                undo.callback(front.close)
                inner_port, self.port = self.port, await front.bind(settings.listen, reuse_port=settings.worker_mode)
        except (RuntimeError, OSError):  # grpcio raises RuntimeError when nothing could be bound
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot listen on {settings.listen}: address in use or not valid")
        self._advertise_bound_port()
        if self.push is not None:
            self.push.start(next(i.url for i in self.card.supported_interfaces if i.protocol_binding == GRPC_BINDING))
            undo.push_async_callback(self.push.stop)
        if settings.http_listen:
            undo.push_async_callback(self._close_http)
            try:
                await self._bind_http(settings.http_listen)
            except OSError as error:
                raise OSError(f"cannot serve the agent card on {settings.http_listen}: {error.strerror}") from None
        else:
            advertise_faces(self._cards, (), "")  # no HTTP port: the card lists no HTTP binding
        self._sign_cards()  # both ports are bound: the cards name them, the signatures the JWKS's URL
        await self._set_health(NOT_SERVING)  # the servicer starts with "" SERVING: not before all is up
        await self.health.set(LIVENESS_SERVICE, SERVING)
        await server.start()
        self._server = server
        if front is not None:
            await front.start(inner_port)
        if self._http_server is not None:
            self._card_document = CardDocument.of(self.card, with_v03=self._serves_v03)
            await self._http_server.start_serving()
        self._accepting = True  # the store is open and migrated, both ports are up
        await self._apply_health()
        self._store_watch = asyncio.create_task(self._watch_store(), name="a2a-grpc-store-readiness")
        scheme = "http" if self.tls is None else "https"
        card_at = f"{scheme}://{self.http_target}{AGENT_CARD_PATH}" if settings.http_listen else "-"
        over_tls = " over TLS" if self.tls is not None else ""
        log.info("serving A2A on %s%s (card on %s)", self.grpc_target, over_tls, card_at)
        if self.tls is not None:
            required = "; client certificates required" if self.tls.client_certificates_required else ""
            log.info("TLS certificate %s%s", self.tls.summary, required)
        if self.authenticator is None:
            log.warning("open server: the agent card has no security requirements, every caller is anonymous")

    def _chain(self, face: Face) -> ServerChain:
        """The interceptor chain of one face's service; the faces share the limits, the authenticator and the
        telemetry."""
        settings = self.settings
        return ServerChain(
            self.registry,
            missing_version_means=settings.missing_version_means,
            authenticator=self.authenticator,
            negotiate_extensions=settings.negotiate_extensions,
            echo_unary_headers=settings.echo_unary_headers,
            worker_pid=os.getpid() if settings.worker_mode else None,
            access_log=self._access_log,
            metrics=self.metrics,
            tracing=self.tracing,
            limits=self.limits,
            max_extensions_per_call=settings.max_extensions_per_call,
            tenants=TenantCheck(interface.tenant for interface in self.card.supported_interfaces),
            face=face,
            interceptors=self.interceptors,
        )

    def reload_certificates(self) -> bool:
        """Read the TLS files again (SIGHUP): new connections on both ports get them, open ones keep theirs.
        False when there is no TLS, or the files cannot be used (then the ones loaded before stay)."""
        if self.tls is None:
            log.info("no TLS certificates to reload: the server speaks plaintext")
            return False
        return self.tls.reload()

    def _report_storage(self, writable: bool) -> None:
        """grpc.health.v1 says NOT_SERVING while the store refuses writes for want of space."""
        self._storage_writable = writable
        update = asyncio.ensure_future(self._apply_health())
        self._health_updates.add(update)
        update.add_done_callback(self._health_updates.discard)

    @property
    def _serves_v03(self) -> bool:
        """Whether the A2A 0.3 face is served (and the card document carries its fields): not for a card whose
        every interface names a tenant, since 0.3 calls carry none."""
        return self.settings.serve_v03 and any(is_v03(i) for i in self.card.supported_interfaces)

    @property
    def ready(self) -> bool:
        """What readiness reports: serving, not draining, and the store reachable and not full."""
        return self._accepting and self._storage_writable and self._store_reachable

    async def _apply_health(self) -> None:
        """Set readiness from the current state (each update reads it afresh, so the last one run wins)."""
        await self._set_health(SERVING if self.ready else NOT_SERVING)

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        for service in READINESS_SERVICES:
            await self.health.set(service, status)  # ignored once draining has begun

    async def _watch_store(self) -> None:
        """Ask the store for a trivial read every readiness interval, bounded by the readiness timeout:
        readiness goes NOT_SERVING when it fails (PostgreSQL down or unreachable), SERVING when it answers again."""
        settings = self.settings
        while True:
            await asyncio.sleep(settings.readiness_interval_seconds)
            try:
                async with asyncio.timeout(settings.readiness_timeout_seconds):
                    await self.store.ping()
            except TimeoutError:
                reachable, reason = False, f"no answer within {settings.readiness_timeout_seconds:g}s"
            except Exception as error:  # whatever the store raised: it cannot serve calls now
                reachable, reason = False, str(error) or type(error).__name__
            else:
                reachable, reason = True, ""
            if reachable == self._store_reachable:
                continue
            self._store_reachable = reachable
            if reachable:
                log.info("the task store answers again%s", "" if self._storage_writable else " (but it is full)")
            else:
                log.warning("the task store failed its readiness check (%s): NOT_SERVING until it answers", reason)
            await self._apply_health()

    def _advertise_bound_port(self) -> None:
        """With `--listen HOST:0` the card's gRPC interface gets the port actually bound."""
        if not self.settings.listen.endswith(":0"):
            return
        configured, bound = self.settings.listen, self.grpc_target
        for card in (self.card, self.extended_card):
            for interface in card.supported_interfaces if card is not None else ():
                if interface.protocol_binding == GRPC_BINDING and interface.url == configured:
                    interface.url = bound

    @property
    def _cards(self) -> tuple[a2a_pb2.AgentCard, a2a_pb2.AgentCard | None]:
        return self.card, self.extended_card

    @property
    def grpc_target(self) -> str:
        host = self.settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def http_target(self) -> str:
        host = self.settings.http_listen.rsplit(":", 1)[0]
        return f"{host}:{self.http_port}"

    async def _metrics_handler(self, registry: CollectorRegistry) -> Handler:
        """What serves `/metrics`: this server's registry, or in a worker every worker's metrics."""
        if self.settings.worker_metrics is None:
            return make_aiohttp_handler(registry)
        index, directory = self.settings.worker_metrics
        self._worker_metrics = WorkerMetrics(registry, Path(directory), index)
        await self._worker_metrics.start()
        return self._worker_metrics.handle

    def _sign_cards(self) -> None:
        """Sign both cards (once: a card is signed after every change the server makes to it, none comes later)."""
        if self.card_signer is None:
            return
        scheme = "http" if self.tls is None else "https"
        jku = f"{scheme}://{self.http_target}{JWKS_PATH}" if self.settings.http_listen else None
        for card in (self.card, self.extended_card):
            if card is not None:
                self.card_signer.sign(card, jku)

    def _published_keys(self) -> dict[str, Any] | None:
        """The JWKS of every key that signs push notifications or cards (None: no key signs anything)."""
        push_keys = self.push.signer.keys if self.push is not None and self.push.signer is not None else ()
        card_keys = self.card_signer.keys if self.card_signer is not None else ()
        return jwks_document((*push_keys, *card_keys)) if push_keys or card_keys else None

    async def _bind_http(self, listen: str) -> None:
        """Bind the HTTP port (its routes ready); it accepts connections once the card document is made."""

        async def agent_card(request: web.Request) -> web.Response:
            assert self._card_document is not None  # made before the port accepts connections
            return self._card_document.respond(request)

        guard = ConnectionGuard(
            max_connections=self.settings.http_max_connections, head_seconds=self.settings.http_head_seconds
        )
        app = web.Application(middlewares=[guard.middleware])
        app.router.add_get(AGENT_CARD_PATH, agent_card)
        settings = self.settings
        faces = HttpFaces(
            settings.bindings.split(","),
            self._chain,
            self._servicer,
            max_body_bytes=settings.max_message_bytes,
            io_seconds=settings.http_head_seconds,
        )
        faces.add_routes(app)
        jwks = self._published_keys()
        if jwks is not None:

            async def signing_keys(request: web.Request) -> web.Response:
                return web.json_response(jwks, headers={"Cache-Control": CACHE_CONTROL})

            app.router.add_get(JWKS_PATH, signing_keys)
        if self.metrics is not None:
            app.router.add_get(METRICS_PATH, await self._metrics_handler(self.metrics.registry))
        runner = web.AppRunner(
            app,
            access_log=None,
            logger=HttpServerLog(server_logger),
            keepalive_timeout=self.settings.http_head_seconds,
            handler_cancellation=True,  # a client gone ends its call, as on gRPC (and a stream gives back its slot)
        )
        await runner.setup()
        guard.protocols = runner.server
        self._http = runner
        host, _, port = listen.rpartition(":")
        tls = self.tls.ssl_context() if self.tls is not None else None
        self._http_server = await asyncio.get_running_loop().create_server(
            guard,
            host.strip("[]") or "127.0.0.1",
            int(port),
            ssl=tls,
            ssl_handshake_timeout=self.settings.http_head_seconds if tls is not None else None,
            reuse_port=self.settings.worker_mode,
            start_serving=False,
        )
        self.http_port = self._http_server.sockets[0].getsockname()[1]
        faces.advertise(self._cards, f"{'http' if tls is None else 'https'}://{self.http_target}")

    async def _close_http(self) -> None:
        """Close the HTTP port and what serves it, as far as they were made."""
        if self._http_server is not None:
            self._http_server.close()
            self._http_server = None
        if self._http is not None:
            await self._http.cleanup()
            self._http = None
        if self._worker_metrics is not None:
            await self._worker_metrics.close()
            self._worker_metrics = None

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving: health NOT_SERVING, drain calls for `grace` seconds, then close everything."""
        if self._server is None:
            return
        grace = self.settings.grace_seconds if grace is None else grace
        log.info("draining: new calls are refused, calls in flight get %gs to finish", grace)
        failed = await self._shutdown(self._server, grace)
        log.info("stopped: %d task(s) still running were failed", failed)

    async def _shutdown(self, server: grpc.aio.Server, grace: float) -> int:
        """`stop` without its log lines; returns how many running tasks were failed."""
        self._accepting = False
        if self._front is not None:
            self._front.close()
        watch, self._store_watch = self._store_watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.wait({watch})
        await self.health.enter_graceful_shutdown()
        stopping = asyncio.ensure_future(server.stop(grace))
        # Shortly before the grace period ends, tasks still running are failed and waiting streams
        # ended, so their callers get that answer instead of UNAVAILABLE when gRPC cancels the calls.
        done, _ = await asyncio.wait({stopping}, timeout=grace * SHUTDOWN_SETTLE_SHARE)
        failed = 0 if done else await self.manager.close()
        await stopping
        if self._access_log is not None:  # the lines of the last calls, which it writes in batches
            self._access_log.flush()
        self._server = None
        await self._close_http()
        try:
            failed += await self.manager.close()
        finally:
            if self.push is not None:
                await self.push.stop()
            await self._verifiers.close()
            await self.store.close()
        return failed
