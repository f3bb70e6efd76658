"""The layer of the interceptor chain that sees every A2A call end, for the access log and the metrics.

It runs just inside the errors guard and around everything else, admission included, so it sees the
status each call leaves with and the A2A reason of a refusal, and the call's CallContext once admitted, then
as the preparation bound it to the request's tenant.
A stream's events are counted as they are yielded; the stream is logged when it ends, however it ends
(a client that goes away closes it: CANCELLED). An unexpected exception is logged once, by the access
log at ERROR with its traceback, and passed on as the generic InternalError the guard would have made
of it (so the guard does not log it again); without an access log the guard logs it as before.
With tracing on, each call also has its server span (a2a_grpc.telemetry.tracing): started before
admission, carried by the call's CallContext once admitted, ended with the rest of the call's records.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from a2a_grpc.arrival import Arrival
from a2a_grpc.call import CallContext
from a2a_grpc.errors import A2AError, InternalError
from a2a_grpc.telemetry.access_log import AccessLog
from a2a_grpc.telemetry.metrics import MethodMetrics, Metrics
from a2a_grpc.telemetry.outcome import OK, outcome_of

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import ServerSpan, Tracing

# (method, what the call arrived with, grpc context) -> the call's context, or raises its refusal (awaited:
# authentication may fetch keys)
Admit = Callable[[str, Arrival, Any], Awaitable[CallContext]]
# (request, call, grpc context) -> (what `Behave` takes: the parsed request, say; the call bound to its tenant).
# What it returns may hold a resource (a stream's slot) that only `Behave` hands on: call `Behave` with it at
# once, with no await or anything that may raise in between.
Prepare = Callable[[bytes, CallContext, Any], Awaitable[tuple[Any, CallContext]]]
Served = TypeVar("Served")
Answer = TypeVar("Answer")  # what a handler answers: a unary call's response, a stream's counted events
# (what `Prepare` made, call) -> the response, or the stream's events
Behave = Callable[[Any, CallContext], Awaitable[Served]]
Handler = Callable[[bytes, Any], Awaitable[Any]]
Translate = Callable[[A2AError], A2AError]  # an error as the callers of a face read it (A2A 0.3)
StreamOpener = Callable[[bytes, Any], Awaitable[AsyncIterator[Any]]]


class CallObserver:
    def __init__(self, access_log: AccessLog | None, metrics: Metrics | None, tracing: Tracing | None = None) -> None:
        self._access_log = access_log
        self._metrics = metrics
        self._tracing = tracing

    def unary(
        self, method: str, admit: Admit, prepare: Prepare, behave: Behave[Any], translate: Translate | None = None
    ) -> Handler:
        """A unary handler that admits each call, prepares and serves it, and records how it ended (with the
        call as `prepare` bound it to its tenant, once it did; an error as `translate` renders it)."""
        end = _Ending(method, self._access_log, self._metrics, translate, None)
        return self._observed(end, admit, prepare, behave, end.ok)

    def stream(
        self,
        method: str,
        admit: Admit,
        prepare: Prepare,
        open_stream: Behave[AsyncIterator[Any]],
        translate: Translate | None = None,
    ) -> StreamOpener:
        """A stream opener that admits each call, prepares it and opens its stream, whose events are counted, and
        records how it ended (with the call as `prepare` bound it to its tenant, once it did)."""
        end = _Ending(method, self._access_log, self._metrics, translate, 0)
        metrics = end.metrics

        async def counted(
            events: AsyncIterator[Any], arrival: Arrival, call: CallContext, started: float, span: ServerSpan | None
        ) -> AsyncIterator[Any]:
            if metrics is not None:
                metrics.streams.inc()
            count = 0
            first = None
            try:
                async for event in events:
                    if count == 0:
                        first = event
                    count += 1
                    if metrics is not None:
                        metrics.events.inc()
                    yield event
            except BaseException as error:
                replacement = end.failed(error, arrival, call, started, first, count, span)
                if replacement is None:
                    raise
                raise replacement from error
            finally:
                if metrics is not None:
                    metrics.streams.dec()
            end.ok(first, arrival, call, started, span, count)

        return self._observed(end, admit, prepare, open_stream, counted)

    def _observed(
        self,
        end: _Ending,
        admit: Admit,
        prepare: Prepare,
        behave: Behave[Served],
        served: Callable[[Served, Arrival, CallContext, float, ServerSpan | None], Answer],
    ) -> Callable[[bytes, Any], Awaitable[Answer]]:
        """The one admission path of both kinds of call: admitted, bound to its span, prepared and served by
        `behave`; what `behave` gave is then `served`: a unary call's response recorded, a stream's events
        counted, and recorded when they end. A call that fails on the way is recorded with what it reached."""
        method = end.method
        clock = time.perf_counter
        tracing = self._tracing

        async def observed(request: bytes, context: Any) -> Answer:
            started = clock()
            arrival = Arrival.of(context)
            span = tracing.server_span(method, arrival) if tracing is not None else None
            call = None
            try:
                call = await admit(method, arrival, context)
                if span is not None:
                    call = span.bind(call)
                prepared, call = await prepare(request, call, context)
                behaved = await behave(prepared, call)
            except BaseException as error:
                replacement = end.failed(error, arrival, call, started, None, end.events_unserved, span)
                if replacement is None:
                    raise
                raise replacement from error
            return served(behaved, arrival, call, started, span)

        return observed


class _Ending:
    """What happens when a call of one method ends: its metrics are counted and its line logged."""

    __slots__ = ("access_log", "events_unserved", "method", "metrics", "translate")

    def __init__(
        self,
        method: str,
        access_log: AccessLog | None,
        metrics: Metrics | None,
        translate: Translate | None,
        events_unserved: int | None,
    ) -> None:
        self.method = method
        self.events_unserved = events_unserved  # a call that failed before it was served: a stream had 0 events
        self.translate = translate
        self.access_log = access_log
        self.metrics: MethodMetrics | None = metrics.method(method) if metrics is not None else None

    def ok(
        self,
        response: Served,
        arrival: Arrival,
        call: CallContext,
        started: float,
        span: ServerSpan | None,
        events: int | None = None,
    ) -> Served:
        """Record a call that ended well with `response` (a stream's first event, and its `events`); returns
        `response`."""
        seconds = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.finished(OK, seconds, call)
        if self.access_log is not None:
            self.access_log.write(self.method, arrival, call, OK, seconds, response, events)
        if span is not None:
            span.end(OK, call, response, events)
        return response

    def failed(
        self,
        error: BaseException,
        arrival: Arrival,
        call: CallContext | None,
        started: float,
        response: Any,
        events: int | None,
        span: ServerSpan | None,
    ) -> BaseException | None:
        """Record a call that raised `error`; returns the exception to raise instead, if any."""
        seconds = time.perf_counter() - started
        if self.translate is not None and isinstance(error, A2AError):
            error = self.translate(error)
        outcome = outcome_of(error, arrival)
        if self.metrics is not None:
            self.metrics.finished(outcome, seconds, call)
        if span is not None:
            span.end(outcome, call, response, events)
        logged = self.access_log is not None and self.access_log.write(
            self.method, arrival, call, outcome, seconds, response, events
        )
        if outcome.unexpected and logged:
            return InternalError("internal error")
        return None
