"""The default of every `a2a-grpc serve` setting, named once: the settings table's rows, ServerSettings' fields
and the parts that take the setting (the limits, the interceptor chain, the servicer, the task manager, the
store) all read it from here. This module imports nothing of the server."""

from __future__ import annotations

from typing import Final

LISTEN: Final = "127.0.0.1:50051"
HTTP_LISTEN: Final = "127.0.0.1:8080"  # "" serves no HTTP card
STORE_URL: Final = "sqlite:///.a2a-grpc/tasks.db"
APP_DIR: Final = "."
GRACE_SECONDS: Final = 10.0
MISSING_VERSION_MEANS: Final = "0.3"  # the spec's reading of a call without a2a-version
UNARY_ECHO: Final[str] = "trailers"  # where unary calls echo a2a-extensions: "trailers", or "headers" and trailers
ECHO_UNARY_HEADERS: Final = UNARY_ECHO == "headers"
NEGOTIATE_EXTENSIONS: Final = True
SERVE_V03: Final = True
# Off, as in the reference SDK: a card whose modes do not spell what its clients send would start refusing them
ENFORCE_INPUT_MODES: Final = False
V03_CARD: Final = False
BINDINGS: Final = "grpc,jsonrpc,http+json"  # what the agent is served over (gRPC always; the rest on the HTTP port)

# Limits
MAX_LIST_PAGE_BYTES: Final = 3 * 1024 * 1024  # every ListTasks page fits gRPC's default 4 MiB receive limit
MAX_SUBSCRIBER_BUFFER_BYTES: Final = 8 * 1024 * 1024  # a stream this far behind reads the event log instead
# Schema validation costs about 0.5 µs a byte for the traceability schema, so this bounds one payload to
# ~35 ms of CPU; what extensions carry in a request is far smaller.
MAX_EXTENSION_PAYLOAD_BYTES: Final = 64 * 1024
MAX_REQUESTS_PER_SECOND: Final = 0.0  # no rate limit
MAX_AUTH_FAILURES_PER_SECOND: Final = 10.0
MAX_STREAMS_PER_CALLER: Final = 100
MAX_STREAMS: Final = 10_000
MAX_PARTS: Final = 256
MAX_EXTENSIONS_PER_CALL: Final = 32
MAX_HISTORY_PER_TASK: Final = 1000
MAX_PUSH_CONFIGS_PER_TASK: Final = 10
MAX_ARTIFACT_BYTES_PER_TASK: Final = 64 * 1024 * 1024
# Sixteen requests of gRPC's default 4 MiB, or thousands of ordinary messages; a message past them is refused
# (RESOURCE_EXHAUSTED, TASK_HISTORY_FULL), an agent's publish fails.
MAX_HISTORY_BYTES_PER_TASK: Final = 64 * 1024 * 1024

# Connections to the gRPC port (a2a_grpc.connections); 0 connections: half what the open-file limit leaves
MAX_CONNECTIONS: Final = 0
MAX_CONNECTIONS_PER_ADDRESS: Final = 0  # no cap per address
HANDSHAKE_SECONDS: Final = 10.0  # grpc's own default is 120 s
CONNECTION_IDLE_SECONDS: Final = 600.0

# Store and replicas
STORE_POOL_SIZE: Final = 10  # connections to a PostgreSQL store, per process
LEASE_SECONDS: Final = 10.0  # a replica whose heartbeat is older has died
POLL_SECONDS: Final = 1.0  # how often a replica polls while notifications are down
# Longer than push delivery's default max age (an hour), so a final task's deliveries have normally finished.
EVENT_RETENTION_SECONDS: Final = 86_400.0
# A week: long past any caller polling GetTask for a result (and past the event retention), yet a store keeps
# only a week of finished work, not all it ever did. 0 keeps tasks forever.
TASK_RETENTION_SECONDS: Final = 7 * 86_400.0
# ~220 MB of the echo agent's tasks (2.2 KB each); past it the tasks final the longest are evicted. 0: no bound.
MEMORY_STORE_MAX_TASKS: Final = 100_000

# Push notifications
PUSH_ALLOW_HTTP: Final = False
PUSH_STATUS_ONLY: Final = False
PUSH_MAX_ATTEMPTS: Final = 10
PUSH_MAX_AGE_SECONDS: Final = 3600.0
PUSH_TIMEOUT_SECONDS: Final = 10.0

# Authentication
JWT_LEEWAY_SECONDS: Final = 60.0

# Processes and logs
WORKERS: Final = 1
LOG_LEVEL: Final = "INFO"
LOG_FORMAT: Final = "text"
ACCESS_LOG: Final = True
TRACING: Final = False
