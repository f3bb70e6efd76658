"""The layer of the interceptor chain that sees every A2A call end, for the access log and the metrics.

It runs just inside the errors guard and around everything else, admission included, so it sees the
status each call leaves with and the A2A reason of a refusal, and the call's CallContext once admitted.
A stream's events are counted as they are yielded; the stream is logged when it ends, however it ends
(a client that goes away closes it: CANCELLED). An unexpected exception is logged once, by the access
log at ERROR with its traceback, and passed on as the generic InternalError the guard would have made
of it (so the guard does not log it again); without an access log the guard logs it as before.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from a2a_grpc.call import CallContext
from a2a_grpc.errors import InternalError
from a2a_grpc.telemetry.access_log import AccessLog
from a2a_grpc.telemetry.metrics import MethodMetrics, Metrics
from a2a_grpc.telemetry.outcome import OK, outcome_of

Admit = Callable[[str, Any], CallContext]  # (method, grpc context) -> the call's context, or raises its refusal
Serve = Callable[[bytes, CallContext, Any], Awaitable[Any]]  # (request, call, grpc context) -> the response
OpenStream = Callable[[bytes, CallContext, Any], Awaitable[AsyncIterator[Any]]]  # ... -> the stream's events
Handler = Callable[[bytes, Any], Awaitable[Any]]
StreamOpener = Callable[[bytes, Any], Awaitable[AsyncIterator[Any]]]


class CallObserver:
    def __init__(self, access_log: AccessLog | None, metrics: Metrics | None) -> None:
        self._access_log = access_log
        self._metrics = metrics

    def unary(self, method: str, admit: Admit, serve: Serve) -> Handler:
        """A unary handler that admits each call, serves it, and records how it ended."""
        end = _Ending(method, self._access_log, self._metrics)
        clock = time.perf_counter

        async def observed(request: bytes, context: Any) -> Any:
            started = clock()
            call = None
            try:
                call = admit(method, context)
                response = await serve(request, call, context)
            except BaseException as error:
                replacement = end.failed(error, context, call, started, None)
                if replacement is None:
                    raise
                raise replacement from error
            end.ok(context, call, started, response, None)
            return response

        return observed

    def stream(self, method: str, admit: Admit, open_stream: OpenStream) -> StreamOpener:
        """A stream opener that admits each call and opens its stream, whose events are counted, and
        records how it ended."""
        end = _Ending(method, self._access_log, self._metrics)
        metrics = end.metrics
        clock = time.perf_counter

        async def counted(
            events: AsyncIterator[Any], context: Any, call: CallContext, started: float
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
                replacement = end.failed(error, context, call, started, first, count)
                if replacement is None:
                    raise
                raise replacement from error
            finally:
                if metrics is not None:
                    metrics.streams.dec()
            end.ok(context, call, started, first, count)

        async def observed(request: bytes, context: Any) -> AsyncIterator[Any]:
            started = clock()
            call = None
            try:
                call = admit(method, context)
                events = await open_stream(request, call, context)
            except BaseException as error:
                replacement = end.failed(error, context, call, started, None, 0)
                if replacement is None:
                    raise
                raise replacement from error
            return counted(events, context, call, started)

        return observed


class _Ending:
    """What happens when a call of one method ends: its metrics are counted and its line logged."""

    __slots__ = ("access_log", "method", "metrics")

    def __init__(self, method: str, access_log: AccessLog | None, metrics: Metrics | None) -> None:
        self.method = method
        self.access_log = access_log
        self.metrics: MethodMetrics | None = metrics.method(method) if metrics is not None else None

    def ok(self, context: Any, call: CallContext, started: float, response: Any, events: int | None) -> None:
        seconds = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.finished(OK, seconds, call)
        if self.access_log is not None:
            self.access_log.write(self.method, context, call, OK, seconds, response, events)

    def failed(
        self,
        error: BaseException,
        context: Any,
        call: CallContext | None,
        started: float,
        response: Any,
        events: int | None = None,
    ) -> BaseException | None:
        """Record a call that raised `error`; returns the exception to raise instead, if any."""
        seconds = time.perf_counter() - started
        outcome = outcome_of(error, context)
        if self.metrics is not None:
            self.metrics.finished(outcome, seconds, call)
        logged = self.access_log is not None and self.access_log.write(
            self.method, context, call, outcome, seconds, response, events
        )
        if outcome.unexpected and logged:
            return InternalError("internal error")
        return None
