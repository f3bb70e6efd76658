"""What the server tells its operators: an access log line and Prometheus metrics for every A2A call.

`CallObserver` is the one layer of the interceptor chain that sees every call end (the chain composes
it, in `a2a_grpc.interceptors.server`); it hands each finished call to the `AccessLog` and the `Metrics`.
`logs` renders the server's log records as text or as JSON lines. With tracing on (the `otel` extra),
the same layer makes each call's OpenTelemetry span: `tracing_setup.load_tracing`, then `tracing`.
"""

from a2a_grpc.telemetry.access_log import ACCESS_LOGGER, AccessLog
from a2a_grpc.telemetry.calls import CallObserver
from a2a_grpc.telemetry.logs import LOG_FORMATS, JsonFormatter, TextFormatter, configure_logs, log_format
from a2a_grpc.telemetry.metrics import METRICS_PATH, Metrics
from a2a_grpc.telemetry.outcome import Outcome
from a2a_grpc.telemetry.tracing_setup import TracingUnavailable, load_tracing

__all__ = [
    "ACCESS_LOGGER",
    "LOG_FORMATS",
    "METRICS_PATH",
    "AccessLog",
    "CallObserver",
    "JsonFormatter",
    "Metrics",
    "Outcome",
    "TextFormatter",
    "TracingUnavailable",
    "configure_logs",
    "load_tracing",
    "log_format",
]
