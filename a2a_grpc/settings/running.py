"""The settings of how `a2a-grpc serve` runs: its limits, its store, push delivery, its processes and logs."""

from __future__ import annotations

from a2a_grpc import setting_types
from a2a_grpc.push.service import PushSettings
from a2a_grpc.push.worker import DeliverySettings
from a2a_grpc.settings.setting import Kind, Setting
from a2a_grpc.telemetry import LOG_FORMATS, log_format

LIMITS = "Limits"
STORE = "Store and replicas"
PUSH = "Push notifications"
PROCESSES = "Processes, logs and tracing"
RESOURCE_EXHAUSTED = "`RESOURCE_EXHAUSTED` (`TOO_MANY_STREAMS`) with a `RetryInfo`"
_PUSH = PushSettings()
_DELIVERY = DeliverySettings()

LIMIT_SETTINGS = (
    Setting(
        "max_list_page_bytes",
        field="max_list_page_bytes",
        convert=setting_types.byte_count,
        default_note="3 MiB",
        help="a ListTasks page ends early, with a next page token, past this many bytes",
        doc="a ListTasks page ends early, with a next page token, once its tasks pass this size, so every page fits "
        "a client with gRPC's default 4 MiB receive limit (a single larger task still comes alone)",
    ),
    Setting(
        "max_subscriber_buffer_bytes",
        field="max_subscriber_buffer_bytes",
        convert=setting_types.byte_count,
        default_note="8 MiB",
        help="a stream this far behind its task reads the task's event log until it has caught up",
        doc="a stream that falls this many bytes of events behind its task stops buffering them and reads the "
        "task's event log instead, until it has caught up",
    ),
    Setting(
        "max_extension_payload_bytes",
        field="max_extension_payload_bytes",
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
        convert=setting_types.rate,
        help="failed authentications per second from one address (bursts up to one second's worth) before its "
        "next calls are RESOURCE_EXHAUSTED with a RetryInfo, unread; 0 for no limit",
        doc="failed authentications per second from one address before its next calls are refused unread "
        "(`RESOURCE_EXHAUSTED`, `RATE_LIMITED`, a `RetryInfo`); `0` for no limit: see [Limits](#limits)",
    ),
    Setting(
        "max_streams_per_caller",
        field="max_streams_per_caller",
        convert=setting_types.positive_count,
        help="open streams per caller; one more is RESOURCE_EXHAUSTED with a RetryInfo",
        doc=f"streams one caller may have open at once; one more is {RESOURCE_EXHAUSTED}",
    ),
    Setting(
        "max_streams",
        field="max_streams",
        convert=setting_types.positive_count,
        help="open streams in all; one more is RESOURCE_EXHAUSTED with a RetryInfo",
        doc=f"streams open at once on one server process, all callers together; one more is {RESOURCE_EXHAUSTED}",
    ),
    Setting(
        "max_connections",
        field="max_connections",
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
        convert=setting_types.seconds,
        help="seconds a gRPC connection has to finish its handshake (TLS, the HTTP/2 preface and SETTINGS) before "
        "it is closed",
        doc="seconds a gRPC connection has to finish its handshake (TLS, then the client's HTTP/2 preface and "
        "SETTINGS) before it is closed",
    ),
    Setting(
        "connection_idle_seconds",
        field="connection_idle_seconds",
        convert=setting_types.seconds_or_never,
        help="seconds a gRPC connection without a call stays open (then a GOAWAY closes it; clients reconnect); "
        "0 for ever",
        doc="seconds a gRPC connection without a call stays open; then a GOAWAY closes it, and clients open a new "
        "one for their next call; `0` for ever",
    ),
    Setting(
        "max_parts",
        field="max_parts",
        convert=setting_types.positive_count,
        help="parts of one message; more are INVALID_ARGUMENT",
        doc="parts of one message; more are `INVALID_ARGUMENT` with a `BadRequest` naming `message.parts`",
    ),
    Setting(
        "max_extensions_per_call",
        field="max_extensions_per_call",
        convert=setting_types.positive_count,
        help="distinct a2a-extensions of one call; more are INVALID_ARGUMENT",
        doc="distinct extensions one call names in `a2a-extensions`; more are `INVALID_ARGUMENT` with a "
        "`BadRequest` naming the header",
    ),
    Setting(
        "max_history_per_task",
        field="max_history_per_task",
        convert=setting_types.positive_count,
        help="messages kept in a task's history; older ones are dropped",
        doc="messages a task's history keeps; older ones are dropped, oldest first, in every store",
    ),
    Setting(
        "max_push_configs_per_task",
        field="max_push_configs_per_task",
        convert=setting_types.positive_count,
        help="push notification configs one task keeps; one more is RESOURCE_EXHAUSTED",
        doc="push notification configs one task keeps; creating one more is `RESOURCE_EXHAUSTED` with reason "
        "`TOO_MANY_PUSH_CONFIGS` (replacing one of them is not)",
    ),
    Setting(
        "max_artifact_bytes_per_task",
        field="max_artifact_bytes_per_task",
        convert=setting_types.byte_count,
        default_note="64 MiB",
        help="bytes a task's artifacts may take; the agent's publish past them fails (and, unhandled, the task)",
        doc="bytes a task's artifacts may take (a replaced artifact counts at its new size); the agent's publish "
        "past them raises `TaskLimitError` and, unhandled, fails the task saying why",
    ),
)

STORE_SETTINGS = (
    Setting(
        "store",
        field="store_url",
        help="memory, sqlite:///PATH or postgresql://USER@HOST:PORT/DB",
        doc="`memory`, `sqlite:///relative/path`, `sqlite:////absolute/path` or `postgresql://USER@HOST:PORT/DB` "
        "(needs asyncpg, which `scripts/serve` installs, or the `postgres` extra; any number of servers may share "
        "one database: see [Replicas](replicas.md))",
    ),
    Setting(
        "store_pool_size",
        field="store_pool_size",
        convert=setting_types.positive_count,
        help="connections to a postgresql:// store, per process",
        doc="connections each server process keeps to a `postgresql://` store",
    ),
    Setting(
        "lease_seconds",
        field="lease_seconds",
        convert=setting_types.seconds,
        help="with a shared store: a replica silent this long has died, and the tasks it ran are FAILED",
        doc="with a `postgresql://` store: a server whose heartbeat is this old has died, and the tasks it ran are "
        "FAILED",
    ),
    Setting(
        "poll_interval",
        field="poll_seconds",
        convert=setting_types.seconds,
        help="with a shared store: how often to poll for other replicas' events while notifications are down",
        doc="with a `postgresql://` store: how often (seconds) a server polls for other servers' events and cancels "
        "while its notification connection is down",
    ),
    Setting(
        "event_retention",
        field="event_retention_seconds",
        convert=setting_types.duration,
        default_note="a day",
        help="seconds a final task's events are kept for resumed streams, replicas and push delivery; then only "
        "the task is",
        doc="seconds a task's event log is kept once the task is final (checked at start-up and every 5 minutes, in "
        "every store); after that a resumed stream, or a webhook still behind, gets the task as it is now instead "
        "of the events",
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
        default_value=_PUSH.allow_http,
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
        default_value=_DELIVERY.status_only,
        help="notify status changes only, not artifact updates",
        doc="notify status changes only, not artifact updates",
    ),
    Setting(
        "push_max_attempts",
        default_value=_DELIVERY.max_attempts,
        convert=setting_types.positive_count,
        help="attempts at one notification before it is given up on",
        doc="attempts at one notification before it is given up on",
    ),
    Setting(
        "push_max_age",
        default_value=_DELIVERY.max_age_seconds,
        convert=setting_types.seconds,
        help="seconds after its first attempt that a notification is given up on",
        doc="seconds after its first attempt that a notification is given up on",
    ),
    Setting(
        "push_timeout",
        default_value=_PUSH.timeout_seconds,
        convert=setting_types.seconds,
        help="seconds one delivery attempt may take",
        doc="seconds one delivery attempt may take",
    ),
)

PROCESS_SETTINGS = (
    Setting(
        "workers",
        default_value=1,
        convert=setting_types.positive_count,
        help="server processes sharing the ports, restarted when they die; more than 1 needs a postgresql:// store",
        doc="server processes on this machine sharing both ports; more than one needs a `postgresql://` store "
        "([replicas](replicas.md))",
    ),
    Setting(
        "log_level",
        default_value="INFO",
        convert=setting_types.log_level,
        help="DEBUG, INFO, WARNING or ERROR",
        doc="`DEBUG`, `INFO`, `WARNING` or `ERROR`",
    ),
    Setting(
        "log_format",
        default_value="text",
        convert=log_format,
        choices=LOG_FORMATS,
        help="text lines, or json: one JSON object per line, for the access log and every other line",
        doc="`text`, or `json`: every line the server logs is one JSON object (`time`, `level`, `logger`, then "
        "`message`, or an access line's fields as keys, and `exception` with a traceback)",
    ),
    Setting(
        "access_log",
        field="access_log",
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
