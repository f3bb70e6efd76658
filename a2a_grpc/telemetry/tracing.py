"""OpenTelemetry tracing of A2A calls, with the `otel` extra (`pip install a2a-grpc[otel]`).

Imported only once tracing is turned on (`a2a_grpc.telemetry.tracing_setup`): with tracing off, nothing
here runs and opentelemetry is never imported. Every span is made by one `Tracing`, the tracer of a
server or a client: from the TracerProvider it was given, else the global one.

  server   `lf.a2a.v1.A2AService/<Method>`, SERVER: one per A2A call, started by the chain's telemetry
           layer (a2a_grpc.telemetry.calls) before admission, so refusals have theirs too, and continuing
           the trace of the call's W3C `traceparent`/`tracestate` headers. Attributes: rpc.system,
           rpc.service, rpc.method, rpc.grpc.status_code, a2a.version, a2a.extensions.activated,
           a2a.tenant on a server with tenants, a2a.task_id and a2a.context_id when the response (or the
           error) names them, a stream's a2a.stream.events, an error's a2a.error.reason. Status ERROR for the codes that mean the server
           failed (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS), with an
           unexpected exception recorded; a refusal (NOT_FOUND, FAILED_PRECONDITION...) is the caller's.
  agent    `a2a.agent.execute`: the agent's run on one message, a child of the server span of the call
           that started it. The run is an asyncio task of its own, so that span reaches it explicitly, as
           `CallContext.trace_context`; the agent span is the current span while the agent runs, so the
           agent's own spans and its calls through `A2AClient` are its children. ERROR when the task FAILED.
  store    `a2a.store.write`: one write to the task store (a task's changes of one event-loop turn), from
           handing it to the store to the store's answer; for the tasks an agent runs for a traced call.
  client   `lf.a2a.v1.A2AService/<Method>`, CLIENT: one per call of our client, from its interceptors,
           which inject `traceparent` into the call's metadata; ERROR for any status but OK.

A server's span of a call a relay agent makes downstream is then the child of the relay's client span,
itself the child of the relay's agent span: an agent chain is one trace.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from a2a_grpc.arrival import Arrival
from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import SERVICE_NAME
from a2a_grpc.telemetry.call_ids import response_ids
from a2a_grpc.telemetry.outcome import Outcome
from a2a_grpc.trace_context import TraceContext

TRACER_NAME = "a2a_grpc"
AGENT_SPAN = "a2a.agent.execute"
STORE_WRITE_SPAN = "a2a.store.write"
# gRPC codes that make a server span an error (OpenTelemetry's semantic conventions for gRPC)
SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
DEFAULT_SERVICE_NAME = "a2a-grpc"


class _MetadataGetter(Getter[Sequence[tuple[str, Any]]]):
    """Reads propagation headers from a call's metadata, a sequence of (key, value) pairs."""

    def get(self, carrier: Sequence[tuple[str, Any]], key: str) -> list[str] | None:
        values = [value for name, value in carrier if name == key and isinstance(value, str)]
        return values or None

    def keys(self, carrier: Sequence[tuple[str, Any]]) -> list[str]:
        return [name for name, _ in carrier]


class _MetadataSetter(Setter[grpc.aio.Metadata]):
    def set(self, carrier: grpc.aio.Metadata, key: str, value: str) -> None:
        carrier[key] = value  # replaces a header of that name the call set itself


METADATA_GETTER = _MetadataGetter()
METADATA_SETTER = _MetadataSetter()


@dataclass(frozen=True, slots=True)
class SpanParent:
    """Where a span belongs (a TraceContext): the OpenTelemetry context whose current span is its parent (a
    call's server span, an agent's execute span), and the `Tracing` that made it, for the spans made under it."""

    context: Context
    tracing: Tracing

    def agent_span(self, task_id: str, context_id: str) -> AbstractContextManager[AgentSpan]:
        return self.tracing.agent_span(self, task_id, context_id)

    def store_write(self, task_id: str, version: int, events: int) -> WriteSpan:
        return self.tracing.store_write(self, task_id, version, events)

    @property
    def span(self) -> Span:
        return trace.get_current_span(self.context)


class Tracing:
    """The tracer of one server or client: `tracer_provider`'s, else the global TracerProvider's."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.tracer_provider = tracer_provider
        self.tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)

    def _under(self, span: Span, parent: Context | None) -> SpanParent:
        return SpanParent(trace.set_span_in_context(span, parent), self)

    # ---- server ------------------------------------------------------------------------------

    def server_span(self, method: str, arrival: Arrival) -> ServerSpan:
        """The span of the call of `method` that arrived with `arrival` (its headers carry the parent). `method`
        is an A2A 1.0 method's name, or `SERVICE/METHOD` for a method of another service (A2A 0.3's)."""
        parent = propagate.extract(arrival.metadata, getter=METADATA_GETTER)
        service, _, name = method.rpartition("/")
        service = service or SERVICE_NAME
        span = self.tracer.start_span(
            f"{service}/{name}",
            parent,
            SpanKind.SERVER,
            {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
        )
        return ServerSpan(span, self._under(span, parent))

    # ---- the agent and the store -------------------------------------------------------------

    @contextmanager
    def agent_span(self, parent: SpanParent, task_id: str, context_id: str) -> Iterator[AgentSpan]:
        """The span of an agent's run on `task`, current within the block (which runs in the run's own
        asyncio task, so attaching it there leaks to nothing else)."""
        attributes = {"a2a.task_id": task_id, "a2a.context_id": context_id}
        span = self.tracer.start_span(AGENT_SPAN, parent.context, attributes=attributes)
        agent = AgentSpan(span, self._under(span, parent.context))
        token = otel_context.attach(agent.trace.context)
        try:
            yield agent
        finally:
            otel_context.detach(token)
            span.end()

    def store_write(self, parent: SpanParent, task_id: str, version: int, events: int) -> WriteSpan:
        attributes: dict[str, str | int] = {
            "a2a.task_id": task_id,
            "a2a.store.version": version,
            "a2a.store.events": events,
        }
        return WriteSpan(self.tracer.start_span(STORE_WRITE_SPAN, parent.context, attributes=attributes))

    # ---- client ------------------------------------------------------------------------------

    def client(self, fallback: TraceContext | None = None) -> ClientTracer:
        """The spans of a client's calls; `fallback` parents them when no span is current (a client that
        forwards a served call's extensions continues that call's trace even from outside its agent's run)."""
        return ClientTracer(self, fallback)


class ServerSpan:
    """The span of one served call, ended with the call's outcome."""

    __slots__ = ("span", "trace")

    def __init__(self, span: Span, trace: SpanParent) -> None:
        self.span = span
        self.trace = trace

    def bind(self, call: CallContext) -> CallContext:
        """The call's context, carrying this span to what serves it (the agent's run)."""
        return dataclasses.replace(call, trace_context=self.trace)

    def end(self, outcome: Outcome, call: CallContext | None, response: Any, events: int | None) -> None:
        span = self.span
        code = outcome.code
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if call is not None:
            span.set_attribute("a2a.version", call.version)
            span.set_attribute("a2a.extensions.activated", call.activated_extensions)
            if call.tenant:
                span.set_attribute("a2a.tenant", call.tenant)
        task_id, context_id = response_ids(response) if response is not None else ("", "")
        _record_ids(span, task_id or outcome.details.get("taskId", ""), context_id, events)
        if outcome.reason:
            span.set_attribute("a2a.error.reason", outcome.reason)
        if code in SERVER_ERRORS:
            span.set_status(Status(StatusCode.ERROR, f"{code.name}: {outcome.reason}" if outcome.reason else code.name))
            if outcome.unexpected and outcome.error is not None:
                span.record_exception(outcome.error)
        span.end()


class AgentSpan:
    __slots__ = ("span", "trace")

    def __init__(self, span: Span, trace: SpanParent) -> None:
        self.span = span
        self.trace = trace

    def ended(self, state: int, replied: bool, error: BaseException | None) -> None:
        """The run is over: the task is in `state`, or the agent `replied` with a Message; `error` is what
        the agent raised."""
        span = self.span
        if replied:
            span.set_attribute("a2a.agent.replied", True)
        else:
            span.set_attribute("a2a.task.state", a2a_pb2.TaskState.Name(state))
        if error is not None and isinstance(error, Exception):
            span.record_exception(error)
        if not replied and state == a2a_pb2.TASK_STATE_FAILED:
            span.set_status(Status(StatusCode.ERROR, "the task FAILED"))


class WriteSpan:
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def end(self, error: BaseException | None) -> None:
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.end()


class ClientTracer:
    """Starts the CLIENT span of each call of one client: a child of the current span, else of `fallback`."""

    __slots__ = ("fallback", "tracing")

    def __init__(self, tracing: Tracing, fallback: TraceContext | None) -> None:
        self.tracing = tracing
        self.fallback = fallback if isinstance(fallback, SpanParent) else None

    def start(self, path: str) -> ClientSpan:
        """The span of a call of the method at `path` (/SERVICE/METHOD)."""
        parent: Context | None = None
        if self.fallback is not None and not trace.get_current_span().get_span_context().is_valid:
            parent = self.fallback.context
        name = path.lstrip("/")
        service, _, method = name.rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        span = self.tracing.tracer.start_span(name, parent, SpanKind.CLIENT, attributes)
        return ClientSpan(span, trace.set_span_in_context(span, parent))


class ClientSpan:
    """The span of one call of our client, injected into the call's metadata and ended with its status."""

    __slots__ = ("context", "span")

    def __init__(self, span: Span, context: Context) -> None:
        self.span = span
        self.context = context

    def inject(self, metadata: grpc.aio.Metadata) -> None:
        propagate.inject(metadata, self.context, setter=METADATA_SETTER)

    def ok(self, activated: tuple[str, ...], response: Any, events: int | None = None) -> None:
        span = self.span
        span.set_attribute("rpc.grpc.status_code", grpc.StatusCode.OK.value[0])
        self._ids(activated, response, events)
        span.end()

    def failed(
        self, code: grpc.StatusCode, reason: str, activated: tuple[str, ...], response: Any, events: int | None = None
    ) -> None:
        span = self.span
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if reason:
            span.set_attribute("a2a.error.reason", reason)
        self._ids(activated, response, events)
        span.set_status(Status(StatusCode.ERROR, f"{code.name}: {reason}" if reason else code.name))
        span.end()

    def _ids(self, activated: tuple[str, ...], response: Any, events: int | None) -> None:
        span = self.span
        span.set_attribute("a2a.extensions.activated", activated)
        task_id, context_id = response_ids(response) if response is not None else ("", "")
        _record_ids(span, task_id, context_id, events)


def _record_ids(span: Span, task_id: str, context_id: str, events: int | None) -> None:
    """A call's task and context ids and a stream's event count, those that are known."""
    if task_id:
        span.set_attribute("a2a.task_id", task_id)
    if context_id:
        span.set_attribute("a2a.context_id", context_id)
    if events is not None:
        span.set_attribute("a2a.stream.events", events)


def use_sdk_unless_configured() -> None:
    """Make the SDK's TracerProvider the global one, unless the application (or `opentelemetry-instrument`)
    already set one: its resource, sampler and limits come from the OTEL_* environment as usual (the
    service name defaults to a2a-grpc), its exporters are the ones OTEL_TRACES_EXPORTER names (otlp
    unless it says otherwise; `console` and `none` need nothing more, each other one its package).
    ImportError naming what is missing, in one line."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    named = os.environ.get(EXPORTER_ENV, "").strip()
    exporters: list[SpanExporter] = []
    for name in (part.strip() for part in (named or "otlp").split(",")):
        if not name or name == "none":
            continue
        found = entry_points(group="opentelemetry_traces_exporter", name=name)
        if not found:
            said = f"{EXPORTER_ENV}={name}" if named else f"{EXPORTER_ENV} (otlp by default)"
            raise ImportError(
                f"{said}: no such span exporter is installed (otlp needs `pip install opentelemetry-exporter-otlp`; "
                "console and none need nothing)"
            )
        exporters.append(next(iter(found)).load()())
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME_KEY, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME_KEY: DEFAULT_SERVICE_NAME}))
    provider = SdkTracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


def tracing_of(parent: TraceContext) -> Tracing:
    """The tracer that made `parent`: a served call's trace, which a client forwarding that call continues."""
    if not isinstance(parent, SpanParent):
        raise TypeError(f"not a trace made by a2a_grpc.telemetry.tracing: {type(parent).__name__}")
    return parent.tracing
