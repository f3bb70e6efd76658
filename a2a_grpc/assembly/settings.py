"""What an A2AServer is made from: every field that a setting of `a2a-grpc serve` sets (a2a_grpc.settings), and the
few an application sets in code."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a_grpc.auth import AuthSettings
from a2a_grpc.push.service import PushSettings
from a2a_grpc.settings import defaults


@dataclass
class ServerSettings:
    # A field that a setting of `a2a-grpc serve` sets defaults to that setting's (a2a_grpc.settings.defaults).
    listen: str = defaults.LISTEN
    http_listen: str = defaults.HTTP_LISTEN  # "" serves no HTTP card
    card_path: str | None = None  # None: the card built from the agent (a2a_grpc.card.from_agent)
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
    # A2A 0.3 clients' service (a2a.v1.A2AService) beside 1.0's, and its interface in the card (a2a_grpc.v0_3)
    serve_v03: bool = defaults.SERVE_V03
    # the A2A bindings served (a2a_grpc.faces): gRPC always, JSON-RPC and HTTP+JSON on the HTTP port with http_listen
    bindings: str = defaults.BINDINGS
    v03_card: bool = defaults.V03_CARD  # with serve_v03: the 0.3 fields merged into the card served over HTTP
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
    # a part whose media_type no input mode of the card accepts: ContentTypeNotSupportedError (a2a_grpc.input_modes)
    enforce_input_modes: bool = defaults.ENFORCE_INPUT_MODES
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
    # While serving, the store is asked for a trivial read this often; no answer within the timeout (or an
    # error) turns readiness NOT_SERVING until an answer comes again.
    readiness_interval_seconds: float = 2.0
    readiness_timeout_seconds: float = 3.0
    # TLS on both ports (a2a_grpc.tls), reloaded by reload_certificates(): the PEM certificate chain and its
    # key; with tls_client_ca, clients must present a certificate one of its CAs signed. None: plaintext.
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
