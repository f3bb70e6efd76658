"""The settings of how `a2a-grpc serve` runs: its limits, its store, push delivery, its processes and logs."""

from __future__ import annotations

from a2a_grpc import setting_types
from a2a_grpc.settings import defaults
from a2a_grpc.settings.setting import Kind, Setting

LIMITS = "Limits"
STORE = "Store and replicas"
PUSH = "Push notifications"
PROCESSES = "Processes, logs and tracing"
RESOURCE_EXHAUSTED = "`RESOURCE_EXHAUSTED` (`TOO_MANY_STREAMS`) with a `RetryInfo`"

LIMIT_SETTINGS = (
    Setting(
        "max_list_page_bytes",
        field="max_list_page_bytes",
        default_value=defaults.MAX_LIST_PAGE_BYTES,
        convert=setting_types.byte_count,
        default_note="3 MiB",
        help="a ListTasks page ends early, with a next page token, past this many bytes",
        doc="a ListTasks page ends early, with a next page token, once its tasks pass this size, so every page fits "
        "a client with gRPC's default 4 MiB receive limit (a single larger task comes alone, trimmed to fit: see "
        "[Limits](#limits))",
    ),
    Setting(
        "max_subscriber_buffer_bytes",
        field="max_subscriber_buffer_bytes",
        default_value=defaults.MAX_SUBSCRIBER_BUFFER_BYTES,
        convert=setting_types.byte_count,
        default_note="8 MiB",
        help="a stream this far behind its task reads the task's event log until it has caught up",
        doc="a stream that falls this many bytes of events behind its task stops buffering them and reads the "
        "task's event log instead, until it has caught up",
    ),
    Setting(
        "max_extension_payload_bytes",
        field="max_extension_payload_bytes",
        default_value=defaults.MAX_EXTENSION_PAYLOAD_BYTES,
        convert=setting_types.byte_count,
        default_note="64 KiB",
        help="a larger extension payload is INVALID_ARGUMENT",
        doc="the data of an activated extension with a `payload_schema` (request, `Message` or `Part` metadata, "
        "serialized) larger than this is `INVALID_ARGUMENT` with a `BadRequest` naming its key, before any schema "
        "check; validating 64 KiB of a traceability trace takes ~35 ms, which runs in a worker thread (as do all "
        "payloads of 2 KiB or more)",
    ),
    Setting(
        "max_requests_per_second",
        field="max_requests_per_second",
        default_value=defaults.MAX_REQUESTS_PER_SECOND,
        convert=setting_types.rate,
        default_note="no limit",
        help="A2A calls per second per caller (its principal, or its address when anonymous), bursts up to one "
        "second's worth; more are RESOURCE_EXHAUSTED with a RetryInfo; 0 for no limit",
        doc="A2A calls per second per caller, in bursts of up to one second's worth; more are `RESOURCE_EXHAUSTED` "
        "(`RATE_LIMITED`) with a `RetryInfo`: see [Limits](#limits)",
    ),
    Setting(
        "max_auth_failures_per_second",
        field="max_auth_failures_per_second",
        default_value=defaults.MAX_AUTH_FAILURES_PER_SECOND,
        convert=setting_types.rate,
        help="failed authentications per second from one address (bursts up to one second's worth); its further "
        "failures are RESOURCE_EXHAUSTED with a RetryInfo, while valid credentials pass; 0 for no limit",
        doc="failed authentications per second from one address; its further failures are `RESOURCE_EXHAUSTED` "
        "(`RATE_LIMITED`, a `RetryInfo`) in place of `UNAUTHENTICATED`, and a valid credential always passes; "
        "`0` for no limit: see [Limits](#limits)",
    ),
    Setting(
        "max_streams_per_caller",
        field="max_streams_per_caller",
        default_value=defaults.MAX_STREAMS_PER_CALLER,
        convert=setting_types.positive_count,
        help="open streams per caller; one more is RESOURCE_EXHAUSTED with a RetryInfo",
        doc=f"streams one caller may have open at once; one more is {RESOURCE_EXHAUSTED}",
    ),
    Setting(
        "max_streams",
        field="max_streams",
        default_value=defaults.MAX_STREAMS,
        convert=setting_types.positive_count,
        help="open streams in all; one more is RESOURCE_EXHAUSTED with a RetryInfo",
        doc=f"streams open at once on one server process, all callers together; one more is {RESOURCE_EXHAUSTED}",
    ),
    Setting(
        "max_connections",
        field="max_connections",
        default_value=defaults.MAX_CONNECTIONS,
        convert=setting_types.count,
        default_note="from the open-file limit",
        help="connections the gRPC port keeps open at once, all addresses together; one more is closed as soon as "
        "it is accepted; 0 for half of what the open-file limit (ulimit -n) leaves after the HTTP port's 512 "
        "connections, at least a quarter of the limit",
        doc="connections the gRPC port keeps open at once, all addresses together; one more is closed as soon as "
        "it is accepted; `0` for half of what the open-file limit (`ulimit -n`) leaves after the HTTP port's 512 "
        "connections, at least a quarter of it (1,024 files: 256 connections): see [Limits](#limits)",
    ),
    Setting(
        "max_connections_per_address",
        field="max_connections_per_address",
        default_value=defaults.MAX_CONNECTIONS_PER_ADDRESS,
        convert=setting_types.count,
        default_note="no cap",
        help="connections one address may hold open on the gRPC port; one more is closed as soon as it is "
        "accepted; the server then accepts for grpc and relays to it on loopback; 0 for no cap",
        doc="connections one address (the peer's IP) may hold open on the gRPC port; one more is closed as soon "
        "as it is accepted. The server then accepts for grpc and relays each connection to it on loopback "
        "(two more file descriptors a connection, no measurable cost per call); `0` for no cap: see "
        "[Limits](#limits)",
    ),
    Setting(
        "handshake_seconds",
        field="handshake_seconds",
        default_value=defaults.HANDSHAKE_SECONDS,
        convert=setting_types.seconds,
        help="seconds a gRPC connection has to finish its handshake (TLS, the HTTP/2 preface and SETTINGS) before "
        "it is closed",
        doc="seconds a gRPC connection has to finish its handshake (TLS, then the client's HTTP/2 preface and "
        "SETTINGS) before it is closed",
    ),
    Setting(
        "connection_idle_seconds",
        field="connection_idle_seconds",
        default_value=defaults.CONNECTION_IDLE_SECONDS,
        convert=setting_types.seconds_or_never,
        help="seconds a gRPC connection without a call stays open (then a GOAWAY closes it; clients reconnect); "
        "0 for ever",
        doc="seconds a gRPC connection without a call stays open; then a GOAWAY closes it, and clients open a new "
        "one for their next call; `0` for ever",
    ),
    Setting(
        "max_parts",
        field="max_parts",
        default_value=defaults.MAX_PARTS,
        convert=setting_types.positive_count,
        help="parts of one message; more are INVALID_ARGUMENT",
        doc="parts of one message; more are `INVALID_ARGUMENT` with a `BadRequest` naming `message.parts`",
    ),
    Setting(
        "max_extensions_per_call",
        field="max_extensions_per_call",
        default_value=defaults.MAX_EXTENSIONS_PER_CALL,
        convert=setting_types.positive_count,
        help="distinct a2a-extensions of one call; more are INVALID_ARGUMENT",
        doc="distinct extensions one call names in `a2a-extensions`; more are `INVALID_ARGUMENT` with a "
        "`BadRequest` naming the header",
    ),
    Setting(
        "max_history_per_task",
        field="max_history_per_task",
        default_value=defaults.MAX_HISTORY_PER_TASK,
        convert=setting_types.positive_count,
        help="messages kept in a task's history; older ones are dropped",
        doc="messages a task's history keeps; older ones are dropped, oldest first, in every store",
    ),
    Setting(
        "max_push_configs_per_task",
        field="max_push_configs_per_task",
        default_value=defaults.MAX_PUSH_CONFIGS_PER_TASK,
        convert=setting_types.positive_count,
        help="push notification configs one task keeps; one more is RESOURCE_EXHAUSTED",
        doc="push notification configs one task keeps; creating one more is `RESOURCE_EXHAUSTED` with reason "
        "`TOO_MANY_PUSH_CONFIGS` (replacing one of them is not)",
    ),
    Setting(
        "max_artifact_bytes_per_task",
        field="max_artifact_bytes_per_task",
        default_value=defaults.MAX_ARTIFACT_BYTES_PER_TASK,
        convert=setting_types.byte_count,
        default_note="64 MiB",
        help="bytes a task's artifacts may take; the agent's publish past them fails (and, unhandled, the task)",
        doc="bytes a task's artifacts may take (a replaced artifact counts at its new size); the agent's publish "
        "past them raises `TaskLimitError` and, unhandled, fails the task saying why",
    ),
    Setting(
        "max_history_bytes_per_task",
        field="max_history_bytes_per_task",
        default_value=defaults.MAX_HISTORY_BYTES_PER_TASK,
        convert=setting_types.byte_count,
        default_note="64 MiB",
        help="bytes a task's history may take; a message past them is RESOURCE_EXHAUSTED, the agent's publish fails",
        doc="bytes a task's history may take (sixteen 4 MiB requests, or thousands of ordinary messages); a message "
        "that would pass them is `RESOURCE_EXHAUSTED` with reason `TASK_HISTORY_FULL` (continue in a new task), and "
        "the agent's publish raises `TaskLimitError`. With the artifact bytes it bounds a task's answer: see "
        "[Limits](#limits)",
    ),
)

STORE_SETTINGS = (
    Setting(
        "store",
        field="store_url",
        default_value=defaults.STORE_URL,
        help="memory, sqlite:///PATH or postgresql://USER@HOST:PORT/DB",
        doc="`memory`, `sqlite:///relative/path`, `sqlite:////absolute/path` or `postgresql://USER@HOST:PORT/DB` "
        "(needs asyncpg, which `scripts/serve` installs, or the `postgres` extra; any number of servers may share "
        "one database: see [Replicas](replicas.md))",
    ),
    Setting(
        "store_pool_size",
        field="store_pool_size",
        default_value=defaults.STORE_POOL_SIZE,
        convert=setting_types.positive_count,
        help="connections to a postgresql:// store, per process",
        doc="connections each server process keeps to a `postgresql://` store",
    ),
    Setting(
        "lease_seconds",
        field="lease_seconds",
        default_value=defaults.LEASE_SECONDS,
        convert=setting_types.seconds,
        help="with a shared store: a replica silent this long has died, and the tasks it ran are FAILED",
        doc="with a `postgresql://` store: a server whose heartbeat is this old has died, and the tasks it ran are "
        "FAILED",
    ),
    Setting(
        "poll_interval",
        field="poll_seconds",
        default_value=defaults.POLL_SECONDS,
        convert=setting_types.seconds,
        help="with a shared store: how often to poll for other replicas' events while notifications are down",
        doc="with a `postgresql://` store: how often (seconds) a server polls for other servers' events and cancels "
        "while its notification connection is down",
    ),
    Setting(
        "event_retention",
        field="event_retention_seconds",
        default_value=defaults.EVENT_RETENTION_SECONDS,
        convert=setting_types.duration,
        default_note="a day",
        help="seconds a final task's events are kept for resumed streams, replicas and push delivery; then only "
        "the task is",
        doc="seconds a task's event log is kept once the task is final (checked at start-up and every 5 minutes, in "
        "every store); after that a resumed stream, or a webhook still behind, gets the task as it is now instead "
        "of the events",
    ),
    Setting(
        "task_retention",
        field="task_retention_seconds",
        default_value=defaults.TASK_RETENTION_SECONDS,
        convert=setting_types.retention,
        default_note="a week",
        help="seconds a task is kept once final (COMPLETED, FAILED, CANCELED, REJECTED); then it is removed with "
        "all it holds and GetTask is TASK_NOT_FOUND; 0 keeps tasks forever",
        doc="seconds a task is kept once final (`COMPLETED`, `FAILED`, `CANCELED`, `REJECTED`); then it is removed "
        "with its history, artifacts, events and push configs, and a `GetTask` of it is `TASK_NOT_FOUND` (checked "
        "at start-up and every 5 minutes, in every store; `0` keeps tasks forever; a task waiting for input is "
        "kept): see [Retention](operations.md#retention)",
    ),
    Setting(
        "memory_store_max_tasks",
        field="memory_store_max_tasks",
        default_value=defaults.MEMORY_STORE_MAX_TASKS,
        convert=setting_types.count,
        help="tasks the memory store holds at most: one more evicts the task final the longest, or is "
        "RESOURCE_EXHAUSTED when none is final; 0 for no bound",
        doc="tasks the `memory` store holds at most: a new task past them evicts the task final the longest "
        "(whatever `--task-retention` says), and is `RESOURCE_EXHAUSTED` (`TOO_MANY_TASKS`) with a `RetryInfo` "
        "when none is final; a task not final is never evicted; `0` for no bound",
    ),
)

PUSH_SETTINGS = (
    Setting(
        "push_allow",
        kind=Kind.LIST,
        convert=setting_types.host_or_network,
        help="HOST or CIDR webhooks may reach although it is private, loopback or link-local; repeat or comma-join",
        doc="`HOST` or `CIDR` that webhooks may reach although it is loopback, private or link-local (repeat or "
        "comma-join); see [Push notifications](push.md)",
        unset="none: only public addresses",
    ),
    Setting(
        "push_allow_http",
        kind=Kind.FLAG,
        default_value=defaults.PUSH_ALLOW_HTTP,
        help="webhooks may be plain http:// URLs",
        doc="webhooks may be plain `http://` URLs",
    ),
    Setting(
        "push_signing_key",
        kind=Kind.LIST,
        help="PEM private key (RSA or EC P-256) that signs notifications; repeat to publish the next key too, "
        "the first signs",
        doc="PEM private key (EC P-256, or RSA of 2048 bits or more) that signs each notification; repeat to "
        "publish a second key in `/.well-known/jwks.json` (the first signs)",
        unset="none: notifications are not signed",
    ),
    Setting(
        "push_status_only",
        kind=Kind.FLAG,
        default_value=defaults.PUSH_STATUS_ONLY,
        help="notify status changes only, not artifact updates",
        doc="notify status changes only, not artifact updates",
    ),
    Setting(
        "push_max_attempts",
        default_value=defaults.PUSH_MAX_ATTEMPTS,
        convert=setting_types.positive_count,
        help="attempts at one notification before it is given up on",
        doc="attempts at one notification before it is given up on",
    ),
    Setting(
        "push_max_age",
        default_value=defaults.PUSH_MAX_AGE_SECONDS,
        convert=setting_types.seconds,
        help="seconds after its first attempt that a notification is given up on",
        doc="seconds after its first attempt that a notification is given up on",
    ),
    Setting(
        "push_timeout",
        default_value=defaults.PUSH_TIMEOUT_SECONDS,
        convert=setting_types.seconds,
        help="seconds one delivery attempt may take",
        doc="seconds one delivery attempt may take",
    ),
)

PROCESS_SETTINGS = (
    Setting(
        "workers",
        default_value=defaults.WORKERS,
        convert=setting_types.positive_count,
        help="server processes sharing the ports, restarted when they die; more than 1 needs a postgresql:// store",
        doc="server processes on this machine sharing both ports; more than one needs a `postgresql://` store "
        "([replicas](replicas.md))",
    ),
    Setting(
        "log_level",
        default_value=defaults.LOG_LEVEL,
        convert=setting_types.log_level,
        help="DEBUG, INFO, WARNING or ERROR",
        doc="`DEBUG`, `INFO`, `WARNING` or `ERROR`",
    ),
    Setting(
        "log_format",
        default_value=defaults.LOG_FORMAT,
        convert=setting_types.log_format,
        choices=setting_types.LOG_FORMATS,
        help="text lines, or json: one JSON object per line, for the access log and every other line",
        doc="`text`, or `json`: every line the server logs is one JSON object (`time`, `level`, `logger`, then "
        "`message`, or an access line's fields as keys, and `exception` with a traceback)",
    ),
    Setting(
        "access_log",
        field="access_log",
        default_value=defaults.ACCESS_LOG,
        kind=Kind.ON_OFF,
        help="one line per A2A call (method, peer, principal, status, duration...) on the a2a_grpc.access logger",
        doc="one line per A2A call on the `a2a_grpc.access` logger: method, status code and A2A reason, "
        "`duration_ms`, peer, principal, tenant, `a2a-version`, requested and activated extensions, task and "
        "context ids when known, a stream's event count, an error's ErrorInfo metadata; never message contents or "
        "credentials. Refusals log at INFO, calls the server failed (INTERNAL) at ERROR with the traceback",
    ),
    Setting(
        "tracing",
        field="tracing",
        default_value=defaults.TRACING,
        kind=Kind.ON_OFF,
        help="OpenTelemetry spans of every A2A call, agent run and store write, continuing the callers' W3C "
        "traceparent; needs a2a-grpc[otel], and exports as the OTEL_* environment says (OTEL_TRACES_EXPORTER: "
        "otlp, console or none) unless opentelemetry-instrument set a tracer provider",
        doc="OpenTelemetry spans of every A2A call, agent run and store write, continuing the caller's W3C "
        "`traceparent`; needs the `otel` extra (`.venv/bin/pip install -e '.[otel]'` in the checkout): see "
        "[Tracing](operations.md#tracing)",
    ),
)

RUNNING_SECTIONS = {LIMITS: LIMIT_SETTINGS, STORE: STORE_SETTINGS, PUSH: PUSH_SETTINGS, PROCESSES: PROCESS_SETTINGS}
