"""The trace a call's work belongs to, as the layers that carry it see it: the call's context holds it, the task
manager makes its spans under it, a forwarding client continues it. Only a2a_grpc.telemetry.tracing, which
imports OpenTelemetry, makes one (with tracing off there is none); this module names what it offers."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class AgentSpan(Protocol):
    """The span of an agent's run."""

    @property
    def trace(self) -> TraceContext:
        """The trace the run's own work (its store writes, its clients' calls) belongs to."""
        ...

    def ended(self, state: int, replied: bool, error: BaseException | None) -> None:
        """The run is over: the task is in `state`, or the agent `replied` with a Message; `error` is what the
        agent raised."""
        ...


class WriteSpan(Protocol):
    """The span of one store write."""

    def end(self, error: BaseException | None) -> None: ...


class TraceContext(Protocol):
    """Where spans belong: a served call's span, or an agent run's."""

    def agent_span(self, task_id: str, context_id: str) -> AbstractContextManager[AgentSpan]:
        """The span of an agent's run on a task, current within the block."""
        ...

    def store_write(self, task_id: str, version: int, events: int) -> WriteSpan:
        """The span of a write of version `version` of a task, with `events` events."""
        ...
