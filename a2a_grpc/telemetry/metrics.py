"""Prometheus metrics of one server, in a registry of its own, served over HTTP at `/metrics`.

Per call (through `CallObserver`): calls by method and status code, latency by method, streams open and
the events they sent, extension activations and refusals by URI. Calls and latency are plain counts of
each method's, read at scrape time (`_Calls`); label children are looked up once (a method's at start-up,
a URI's the first time it occurs), so a call costs a few dictionary reads and additions. Read at scrape
time: tasks by state, from the task manager's own counts (`count_tasks`). Fed by hooks: push deliveries (`push_delivery`, called by the push worker),
and store commits (`store_commit`, for a store to call with each group commit; registered on its first
call, so a store that does not call it shows no empty histogram).

Label values are bounded: methods and codes are fixed sets, extension URIs are the ones the agent
declares (activated, or required and missing), never what a client merely requested.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from itertools import accumulate
from typing import TYPE_CHECKING, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from a2a_grpc.errors import ExtensionSupportRequiredError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.telemetry.outcome import Outcome

if TYPE_CHECKING:
    from a2a_grpc.call import CallContext

METRICS_PATH = "/metrics"
# Seconds: unary calls take around a millisecond, streams as long as their task.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_le = cast(Callable[[float], str], floatToGoString)  # a bucket's bound as Histogram labels it
_DURATION_LE = (*(_le(bound) for bound in DURATION_BUCKETS), "+Inf")
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
        self._calls = _Calls()
        registry.register(self._calls)
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
        methods = self._calls.methods
        if name not in methods:
            methods[name] = MethodMetrics(self, name)
        return methods[name]

    def count_tasks(self, counts: TaskCounts) -> None:
        """Report `a2a_live_tasks{state}` at each scrape, from `counts()`."""
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
    """One method's calls and latency, counted in plain numbers (see `_Calls`), and its label children of
    the stream metrics."""

    __slots__ = ("_metrics", "buckets", "by_code", "created", "events", "seconds", "streams")

    def __init__(self, metrics: Metrics, method: str) -> None:
        self._metrics = metrics
        self.by_code: dict[str, int] = {}  # calls that ended with each status code, by its name
        self.created: dict[str | None, float] = {None: time.time()}  # when each count began (None: latency)
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # calls by the first bucket their latency fits, +Inf last
        self.seconds = 0.0  # the latencies' sum
        self.streams = metrics._streams.labels(method)
        self.events = metrics._events.labels(method)

    def finished(self, outcome: Outcome, seconds: float, call: CallContext | None) -> None:
        """A call ended: `call` is None when it was refused before it was admitted."""
        code = outcome.code_name
        by_code = self.by_code
        if code in by_code:
            by_code[code] += 1
        else:
            by_code[code] = 1
            self.created[code] = time.time()
        self.buckets[bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.seconds += seconds
        if call is not None and call.activated_extensions:
            self._metrics.activated(call.activated_extensions)
        if outcome.reason == _REFUSED and (missing := outcome.details.get("missingExtensions")):
            self._metrics.refused(missing.split(","))


class _Calls:
    """`a2a_calls{method,code}` and `a2a_call_duration_seconds{method}`, as a Counter and a Histogram would
    show them, read at each scrape from the methods' plain counts: a call then costs a few additions, where
    prometheus-client's children take a lock for each. The counts change on the event loop's thread only."""

    CALLS = ("a2a_calls", "A2A calls handled, by method and gRPC status code.")
    DURATION = ("a2a_call_duration_seconds", "How long A2A calls took, by method (a stream: until it ended).")

    def __init__(self) -> None:
        self.methods: dict[str, MethodMetrics] = {}  # by method name

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> list[Metric]:
        calls, duration = self._families()
        created = f"{duration.name}_created"
        for name, method in list(self.methods.items()):
            for code, count in list(method.by_code.items()):
                calls.add_metric((name, code), count, created=method.created[code])
            buckets = list(zip(_DURATION_LE, accumulate(method.buckets), strict=True))
            duration.add_metric((name,), buckets, method.seconds)
            duration.add_sample(created, {"method": name}, method.created[None])
        return [calls, duration]

    def _families(self) -> tuple[CounterMetricFamily, HistogramMetricFamily]:
        return (
            CounterMetricFamily(*self.CALLS, labels=("method", "code")),
            HistogramMetricFamily(*self.DURATION, labels=("method",)),
        )


class _TaskStates:
    """`a2a_live_tasks{state}`, every state listed (0 included), read from the task manager at each scrape."""

    NAME = "a2a_live_tasks"
    HELP = "Tasks this server process holds in memory (worked on or watched), by state; not the tasks in the store."

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
