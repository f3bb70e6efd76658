"""Turning tracing on: the only way in to `a2a_grpc.telemetry.tracing`, which imports opentelemetry.

With tracing off none of this runs, so the package works without the `otel` extra and pays nothing for
tracing. With tracing on and the extra missing, `TracingUnavailable` (an ImportError) says so in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import ClientTracer, Tracing
    from a2a_grpc.trace_context import TraceContext

OTEL_EXTRA = "pip install 'a2a-grpc[otel]'"


class TracingUnavailable(ImportError):
    """Tracing is on, but OpenTelemetry (the `otel` extra) or an exporter it names is not installed."""


def load_tracing(tracer_provider: Any = None) -> Tracing:
    """The tracer of a server or a client: `tracer_provider`'s, else the global TracerProvider's."""
    try:
        from a2a_grpc.telemetry.tracing import Tracing
    except ImportError as error:
        raise _unavailable(error) from None
    return Tracing(tracer_provider)


def client_tracer(tracing: bool | None, tracer_provider: Any, forwarded: TraceContext | None) -> ClientTracer | None:
    """The spans of a client's calls, or None. `tracing=None` traces when given a `tracer_provider` or when
    it forwards a traced call (`forwarded`, whose tracer it then uses too); True always, False never."""
    if tracing is False or (tracing is None and tracer_provider is None and forwarded is None):
        return None
    if tracer_provider is None and forwarded is not None:
        from a2a_grpc.telemetry.tracing import tracing_of  # tracing is on where a call carries a trace

        return tracing_of(forwarded).client(forwarded)
    return load_tracing(tracer_provider).client(forwarded)


def use_sdk_unless_configured() -> None:
    """For `a2a-grpc serve --tracing`: the SDK's TracerProvider, exporting as OTEL_TRACES_EXPORTER says,
    becomes the global one unless one is set already (a2a_grpc.telemetry.tracing)."""
    try:
        from a2a_grpc.telemetry.tracing import use_sdk_unless_configured as use_sdk
    except ImportError as error:
        raise _unavailable(error) from None
    try:
        use_sdk()
    except ImportError as error:
        raise _unavailable(error) from None


def _unavailable(error: ImportError) -> TracingUnavailable:
    if error.name is not None and error.name.startswith("opentelemetry"):
        return TracingUnavailable(f"tracing needs OpenTelemetry: {OTEL_EXTRA} (no module named {error.name})")
    return TracingUnavailable(f"tracing: {error}")
