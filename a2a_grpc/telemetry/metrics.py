"""Prometheus metrics of one server, in a registry of its own, served over HTTP at `/metrics`.

Per call (through `CallObserver`): calls by method and status code, latency by method, streams open and
the events they sent, extension activations and refusals by URI. Label children are looked up once
(a method's at start-up, a status code's or a URI's the first time it occurs), so a call costs a few
dictionary reads and increments. Read at scrape time: tasks by state, from the task manager's own
counts (`count_tasks`). Fed by hooks: push deliveries (`push_delivery`, called by the push worker),
and store commits (`store_commit`, for a store to call with each group commit; registered on its first
call, so a store that does not call it shows no empty histogram).

Label values are bounded: methods and codes are fixed sets, extension URIs are the ones the agent
declares (activated, or required and missing), never what a client merely requested.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from a2a_grpc.errors import ExtensionSupportRequiredError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.telemetry.outcome import Outcome

if TYPE_CHECKING:
    from a2a_grpc.call import CallContext

METRICS_PATH = "/metrics"
# Seconds: unary calls take around a millisecond, streams as long as their task.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
STORE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
PUSH_OUTCOMES = ("delivered", "retried", "failed")  # an attempt that will be tried again; given up on
_REFUSED = ExtensionSupportRequiredError.reason
# TaskState value -> its label: "working", "input_required"...
TASK_STATES = {
    value: a2a_pb2.TaskState.Name(value).removeprefix("TASK_STATE_").lower()
    for value in a2a_pb2.TaskState.values()
    if value != a2a_pb2.TASK_STATE_UNSPECIFIED
}

TaskCounts = Callable[[], Mapping[int, int]]  # TaskState value -> how many tasks are in it


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self._calls = Counter(
            "a2a_calls", "A2A calls handled, by method and gRPC status code.", ("method", "code"), registry=registry
        )
        self._duration = Histogram(
            "a2a_call_duration_seconds",
            "How long A2A calls took, by method (a stream: until it ended).",
            ("method",),
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._streams = Gauge("a2a_streams_active", "Streams open, by method.", ("method",), registry=registry)
        self._events = Counter(
            "a2a_stream_events_sent", "Events streams sent, by method.", ("method",), registry=registry
        )
        self._activations = Counter(
            "a2a_extension_activations", "Calls that activated an extension, by URI.", ("uri",), registry=registry
        )
        self._refusals = Counter(
            "a2a_extension_refusals",
            "Calls refused for not activating a required extension, by URI.",
            ("uri",),
            registry=registry,
        )
        push = Counter(
            "a2a_push_deliveries",
            "Push notification attempts: delivered, retried (failed, tried again), failed (given up on).",
            ("outcome",),
            registry=registry,
        )
        self._push = {outcome: push.labels(outcome) for outcome in PUSH_OUTCOMES}
        self._activated: dict[str, Counter] = {}
        self._refused: dict[str, Counter] = {}
        self._store: tuple[Histogram, Histogram] | None = None

    def method(self, name: str) -> MethodMetrics:
        """The metrics of one A2A method, for its handler to keep."""
        return MethodMetrics(self, name)

    def count_tasks(self, counts: TaskCounts) -> None:
        """Report `a2a_tasks{state}` at each scrape, from `counts()`."""
        self.registry.register(_TaskStates(counts))

    def activated(self, uris: Iterable[str]) -> None:
        for uri in uris:
            counter = self._activated.get(uri)
            if counter is None:
                counter = self._activated[uri] = self._activations.labels(uri)
            counter.inc()

    def refused(self, uris: Iterable[str]) -> None:
        for uri in uris:
            counter = self._refused.get(uri)
            if counter is None:
                counter = self._refused[uri] = self._refusals.labels(uri)
            counter.inc()

    def push_delivery(self, outcome: str) -> None:
        """The push worker's hook: one attempt at a notification went `outcome` (one of PUSH_OUTCOMES)."""
        counter = self._push.get(outcome)
        if counter is not None:
            counter.inc()

    def store_commit(self, seconds: float, writes: int) -> None:
        """A store's hook: one commit took `seconds` and carried `writes` task writes (its group-commit batch)."""
        store = self._store
        if store is None:
            store = self._store = (
                Histogram(
                    "a2a_store_commit_seconds",
                    "How long the store took to commit a batch of task writes.",
                    buckets=STORE_BUCKETS,
                    registry=self.registry,
                ),
                Histogram(
                    "a2a_store_commit_writes",
                    "Task writes per store commit (group commit batch size).",
                    buckets=BATCH_BUCKETS,
                    registry=self.registry,
                ),
            )
        store[0].observe(seconds)
        store[1].observe(writes)


class MethodMetrics:
    """One method's label children; a status code's is added the first time a call ends with it."""

    __slots__ = ("_by_code", "_calls", "_metrics", "duration", "events", "method", "streams")

    def __init__(self, metrics: Metrics, method: str) -> None:
        self._metrics = metrics
        self._calls = metrics._calls
        self.method = method
        self._by_code: dict[grpc.StatusCode, Counter] = {}
        self.duration = metrics._duration.labels(method)
        self.streams = metrics._streams.labels(method)
        self.events = metrics._events.labels(method)

    def finished(self, outcome: Outcome, seconds: float, call: CallContext | None) -> None:
        """A call ended: `call` is None when it was refused before it was admitted."""
        counter = self._by_code.get(outcome.code)
        if counter is None:
            counter = self._by_code[outcome.code] = self._calls.labels(self.method, outcome.code.name)
        counter.inc()
        self.duration.observe(seconds)
        if call is not None and call.activated_extensions:
            self._metrics.activated(call.activated_extensions)
        if outcome.reason == _REFUSED and (missing := outcome.details.get("missingExtensions")):
            self._metrics.refused(missing.split(","))


class _TaskStates:
    """`a2a_tasks{state}`, every state listed (0 included), read from the task manager at each scrape."""

    NAME = "a2a_tasks"
    HELP = "Tasks this server process holds (worked on or watched), by state."

    def __init__(self, counts: TaskCounts) -> None:
        self._counts = counts

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=("state",))]

    def collect(self) -> list[Metric]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=("state",))
        counts = self._counts()
        for state, label in TASK_STATES.items():
            family.add_metric((label,), counts.get(state, 0))
        return [family]
