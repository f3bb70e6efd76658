"""How each kind of case is measured: server processes, the load pool, measurement windows, records."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from bench.loadgen import READY, RESULT, V10, LoadPool, Metadata, SendServer, Slice, split
from bench.procs import ServerProcess, cpu_seconds, machine_busy_seconds, rss_bytes, tree_cpu_seconds
from bench.protocol import CHUNKS_TEXT, ECHO_EVENTS, ECHO_TEXT, HOLD_TEXT
from bench.push import PushReceiver

V1: Metadata = (("a2a-version", "1.0"),)
V03: Metadata = ()  # a 0.3 caller sends no a2a-version
START_SLACK_SECONDS = 0.3  # workers pick up the job and connect before the warm-up counts
SETTLE_SECONDS = 0.1  # at the start of each slice: calls still in flight to the previous server end
RESULT_MARGIN_SECONDS = 120.0
MAX_FANOUT_ROUNDS = 1000

WorkerTally = dict[str, Any]  # what loadgen.Tally.as_dict() returns


@dataclass
class Settings:
    duration: float
    warmup: float
    rpc_timeout: float = 60.0
    channels: int = 1  # connections per load process
    slice: float = 0.5  # measured seconds of one server's turn in measure_send
    cycles: int = 1  # turns of each server in measure_send


@dataclass
class Window:
    seconds: float
    server_cpu: float
    load_cpu: float
    machine_cpu: float = 0.0  # every process on the machine, these two included
    db_cpu: float = 0.0  # the database server's processes (PostgreSQL), when the bench knows them
    receiver_cpu: float = 0.0  # the push.* cases' webhook receiver, when one runs

    def __add__(self, other: Window) -> Window:
        return Window(
            self.seconds + other.seconds,
            self.server_cpu + other.server_cpu,
            self.load_cpu + other.load_cpu,
            self.machine_cpu + other.machine_cpu,
            self.db_cpu + other.db_cpu,
            self.receiver_cpu + other.receiver_cpu,
        )

    @property
    def other_cpu(self) -> float:
        """CPU time of everything else on the machine: a busy neighbour makes every figure noisier."""
        return max(0.0, self.machine_cpu - self.server_cpu - self.load_cpu - self.db_cpu - self.receiver_cpu)


class Mark(NamedTuple):
    """The clocks at the start of a window."""

    at: float
    server_cpu: float
    load_cpu: float
    machine_cpu: float
    db_cpu: dict[int, float]  # by process: the database server's processes come and go
    receiver_cpu: float = 0.0


class Sampler:
    """CPU time of the servers (each a process, or a supervisor and its workers), of the load workers, of
    the database server the servers use (when known) and of the push receiver (when one runs) over a window."""

    def __init__(
        self, servers: ServerProcess | Sequence[ServerProcess], pool: LoadPool, receiver_pids: Sequence[int] = ()
    ) -> None:
        self.servers = [servers] if isinstance(servers, ServerProcess) else list(servers)
        self.pool = pool
        self.db_pids = sorted({s.db_pid for s in self.servers if s.db_pid is not None})
        self.receiver_pids = list(receiver_pids)

    @property
    def counts_db(self) -> bool:
        return bool(self.db_pids)

    def _server_cpu(self) -> float:
        return sum(cpu_seconds(pid) for server in self.servers for pid in server.pids)

    def _load_cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pool.pids)

    def _db_cpu(self) -> dict[int, float]:
        return {pid: cpu for root in self.db_pids for pid, cpu in tree_cpu_seconds(root).items()}

    def _receiver_cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.receiver_pids)

    def start(self) -> Mark:
        return Mark(
            time.monotonic(),
            self._server_cpu(),
            self._load_cpu(),
            machine_busy_seconds(),
            self._db_cpu(),
            self._receiver_cpu(),
        )

    def since(self, start: Mark) -> Window:
        db_now = self._db_cpu()
        return Window(
            time.monotonic() - start.at,
            self._server_cpu() - start.server_cpu,
            self._load_cpu() - start.load_cpu,
            machine_busy_seconds() - start.machine_cpu,
            sum(cpu - start.db_cpu.get(pid, 0.0) for pid, cpu in db_now.items()),
            self._receiver_cpu() - start.receiver_cpu,
        )

    def over(self, measure_from: float, measure_to: float) -> Window:
        _sleep_until(measure_from)
        start = self.start()
        _sleep_until(measure_to)
        return self.since(start)


def _sleep_until(moment: float) -> None:
    left = moment - time.monotonic()
    if left > 0:
        time.sleep(left)


def percentile(sorted_values: list[int], fraction: float) -> float:
    """Nearest-rank percentile of ascending values (0 when there are none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return float(sorted_values[rank - 1])


def merge(tallies: Iterable[WorkerTally]) -> dict[str, Any]:
    """The workers' tallies as one: counts, first error, latency percentiles."""
    tallies = list(tallies)
    latencies = sorted(us for r in tallies for us in r["latencies_us"])
    errors = sum(r["errors"] for r in tallies)
    first_error = next((r["first_error"] for r in tallies if r["first_error"]), None)
    return {
        "completed": sum(r["completed"] for r in tallies),
        "events": sum(r["events"] for r in tallies),
        "errors": errors,
        "first_error": first_error,
        "p50_ms": percentile(latencies, 0.50) / 1000,
        "p99_ms": percentile(latencies, 0.99) / 1000,
    }


def _rates(
    count: int, window: Window, seconds: float | None = None, db: bool = False, receiver: bool = False
) -> dict[str, Any]:
    """Rates per second of `seconds` (the window's own length unless given), CPU per counted unit (and the
    database server's, when `db`; the push receiver's cores, when `receiver`)."""
    seconds = window.seconds if seconds is None else seconds
    busy = window.seconds if window.seconds > 0 else 1.0
    rates = {
        "rate": count / seconds if seconds > 0 else 0.0,
        "server_cpu_us": window.server_cpu / count * 1e6 if count else None,
        "server_cpu_cores": window.server_cpu / busy,
        "load_cpu_cores": window.load_cpu / busy,
        "other_cpu_cores": window.other_cpu / busy,
        "window_seconds": seconds,
    }
    if db:
        rates["db_cpu_us"] = window.db_cpu / count * 1e6 if count else None
        rates["db_cpu_cores"] = window.db_cpu / busy
    if receiver:
        rates["receiver_cpu_cores"] = window.receiver_cpu / busy
    return rates


def _windowed_jobs(
    kind: str, pool: LoadPool, settings: Settings, concurrency: int, fields: dict[str, Any]
) -> tuple[dict[int, dict[str, Any]], float, float]:
    measure_from = time.monotonic() + START_SLACK_SECONDS + settings.warmup
    measure_to = measure_from + settings.duration
    jobs = {
        worker_id: {
            "kind": kind,
            "concurrency": share,
            "window": (measure_from, measure_to),
            "rpc_timeout": settings.rpc_timeout,
            "channels": min(share, settings.channels),
            **fields,
        }
        for worker_id, share in enumerate(split(concurrency, pool.size))
    }
    return jobs, measure_from, measure_to


def send_slices(servers: int, settings: Settings, begin: float) -> list[Slice]:
    """A warm-up slice for each server, then `settings.cycles` cycles giving each server one counted turn,
    every other cycle in reverse order so that a steady drift of the machine favours no server."""
    slices = []
    at = begin
    for server in range(servers):
        slices.append(Slice(server, at, at + settings.warmup, at + settings.warmup))
        at += settings.warmup
    for cycle in range(settings.cycles):
        for server in range(servers) if cycle % 2 == 0 else reversed(range(servers)):
            end = at + SETTLE_SECONDS + settings.slice
            slices.append(Slice(server, at, at + SETTLE_SECONDS, end))
            at = end
    return slices


def measure_send(
    servers: list[ServerProcess],
    metadata: list[Metadata],
    pool: LoadPool,
    settings: Settings,
    concurrency: int,
    channels: list[int] | None = None,
    push: list[bool] | None = None,
    receiver: PushReceiver | None = None,
    faces: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Closed-loop SendMessage at `concurrency` callers, taken from server to server in short turns (send_slices):
    a neighbour's burst or the machine's drift then hits every server alike. For each server: requests/s,
    latency and CPU per request over all its turns, and per cycle (to pair servers turn by turn).

    `channels`: connections per load process to each server (default settings.channels). For a server with
    workers, how many of them each worker serves is recorded too (the kernel spreads connections, not calls).

    `push`: for each server, whether every message names `receiver` in its push config. Then, once the load
    stops, the receiver is given time to get every notification owed (bounded, PushReceiver.drain), and those
    servers' records gain the delivery figures (push_figures); every record gains the server's CPU per request
    over the whole job and the drain (delivery included), and the receiver's CPU is counted apart.

    `faces`: for each server, the service its calls go to (loadgen.V10, the default, or loadgen.V03)."""
    channels = channels or [settings.channels] * len(servers)
    push = push or [False] * len(servers)
    faces = faces or [V10] * len(servers)
    if any(push) and receiver is None:
        raise ValueError("push cases need the push receiver")
    push_url = receiver.url if receiver is not None else ""
    slices = send_slices(len(servers), settings, time.monotonic() + START_SLACK_SECONDS)
    targets = zip(servers, metadata, channels, push, faces, strict=True)
    fields = {
        "kind": "send",
        "servers": [
            SendServer(s.target, m, n, s.workers > 1, push_url if p else "", s.tls_roots, f)
            for s, m, n, p, f in targets
        ],
        "slices": slices,
        "text": ECHO_TEXT,
        "expect_state": "TASK_STATE_COMPLETED",
        "rpc_timeout": settings.rpc_timeout,
    }
    jobs = {w: {**fields, "concurrency": n} for w, n in enumerate(split(concurrency, pool.size))}
    receiver_pids = [receiver.pid] if receiver is not None else []
    samplers = [Sampler(server, pool, receiver_pids) for server in servers]
    if receiver is not None:
        receiver.reset()
    whole = [sampler.start() for sampler in samplers]
    pool.submit(jobs)
    counted = range(len(servers), len(slices))  # the warm-up slices come first
    windows = [samplers[slices[k].server].over(slices[k].count_from, slices[k].end) for k in counted]
    results = pool.collect(RESULT, list(jobs), RESULT_MARGIN_SECONDS)
    for server in servers:
        server.check_alive()
    turns: list[list[tuple[Window, list[WorkerTally]]]] = [[] for _ in servers]
    for k, window in zip(counted, windows, strict=True):
        turns[slices[k].server].append((window, [r["slices"][k] for r in results.values()]))
    records = [
        _send_record(server_turns, concurrency, s.counts_db, receiver is not None)
        for server_turns, s in zip(turns, samplers, strict=True)
    ]
    for index, (server, record) in enumerate(zip(servers, records, strict=True)):
        if server.workers > 1:
            record["connections_per_worker"] = _connections_per_worker(
                [r["connections"][index] for r in results.values()]
            )
    if receiver is not None:
        _add_push_figures(records, receiver, samplers, whole, results, slices, push)
    return records


def _add_push_figures(
    records: list[dict[str, Any]],
    receiver: PushReceiver,
    samplers: list[Sampler],
    whole: list[Mark],
    results: dict[int, dict[str, Any]],
    slices: list[Slice],
    push: list[bool],
) -> None:
    """Once the load stopped: wait for the notifications owed, then add the delivery figures to the push
    servers' records and the whole-job CPU per request (delivery included) to every record. (One receiver
    serves the job: were there several push servers, their delivery figures would be pooled.)"""
    succeeded = [sum(r["succeeded_calls"][index] for r in results.values()) for index in range(len(records))]
    failed = [sum(r["failed_calls"][index] for r in results.values()) for index in range(len(records))]
    expected_tasks = sum(n for n, p in zip(succeeded, push, strict=True) if p)
    receiver.drain(expected_tasks)
    summary = receiver.summary()
    offset_ns = time.time_ns() - time.monotonic_ns()  # the wall clock (status timestamps) to CLOCK_MONOTONIC
    spent = [sampler.since(mark) for sampler, mark in zip(samplers, whole, strict=True)]
    first_counted = len(records)
    for index, (record, window) in enumerate(zip(records, spent, strict=True)):
        record["calls_succeeded"] = succeeded[index]
        record["server_cpu_us_whole"] = window.server_cpu / succeeded[index] * 1e6 if succeeded[index] else None
        if not push[index]:
            continue
        own = [s for s in slices[first_counted:] if s.server == index]
        figures = push_figures(
            summary,
            expected_tasks,
            failed[index],
            [(s.count_from, s.end) for s in own],
            max(s.end for s in slices if s.server == index),
            offset_ns,
        )
        distinct = figures["push_distinct"]
        figures["receiver_cpu_us"] = window.receiver_cpu / distinct * 1e6 if distinct else None
        record.update(figures)


def push_figures(
    summary: dict[str, Any],
    expected_tasks: int,
    failed_calls: int,
    turns: list[tuple[float, float]],
    last_turn_end: float,
    offset_ns: int,
) -> dict[str, Any]:
    """A push server's delivery figures from the receiver's summary: tasks and notifications owed and received,
    duplicates, and the delivery latency (time.time_ns() at arrival - the final status's timestamp, one clock)
    of the tasks that completed inside the server's counted `turns` (CLOCK_MONOTONIC; the wall clock is
    `offset_ns` ahead of it). `failed_calls` may or may not have made tasks: they are owed nothing."""
    latencies_us = sorted(
        (arrival_ns - stamped_ns) // 1000
        for stamped_ns, arrival_ns, final in summary["statuses"]
        if final and any(start <= (stamped_ns - offset_ns) / 1e9 <= end for start, end in turns)
    )
    owed = expected_tasks * ECHO_EVENTS
    last_arrival = (summary["last_arrival_ns"] - offset_ns) / 1e9 if summary["last_arrival_ns"] else None
    return {
        "push_expected_tasks": expected_tasks,
        "push_failed_calls": failed_calls,
        "push_notified_tasks": summary["finished_tasks"],
        "push_missing_tasks": max(0, expected_tasks - summary["finished_tasks"]),
        "push_expected": owed,
        "push_received": summary["received"],
        "push_distinct": summary["distinct"],
        "push_missing": max(0, owed - summary["distinct"]),
        "push_duplicates": summary["duplicates"],
        "push_malformed": summary["malformed"],
        "push_bad_token": summary["bad_token"],
        "push_events_per_task": summary["events_per_task"],
        "push_latency_samples": len(latencies_us),
        "push_p50_ms": percentile(latencies_us, 0.50) / 1000,
        "push_p99_ms": percentile(latencies_us, 0.99) / 1000,
        "push_max_ms": latencies_us[-1] / 1000 if latencies_us else 0.0,
        # from the end of the server's last turn to the last notification's arrival (negative: all came in time)
        "push_drain_seconds": last_arrival - last_turn_end if last_arrival is not None else None,
    }


def _connections_per_worker(spreads: list[dict[str, int]]) -> list[int]:
    """The load processes' counts of connections per worker pid, added up: one count per worker, most first."""
    total: dict[str, int] = {}
    for spread in spreads:
        for pid, count in spread.items():
            total[pid] = total.get(pid, 0) + count
    return sorted(total.values(), reverse=True)


def _send_record(
    turns: list[tuple[Window, list[WorkerTally]]], concurrency: int, db: bool, receiver: bool = False
) -> dict[str, Any]:
    """One server's figures from its turns, each a sampled window and the workers' tallies in it."""
    merged = merge(tally for _, tallies in turns for tally in tallies)
    completed = [sum(tally["completed"] for tally in tallies) for _, tallies in turns]
    windows = [window for window, _ in turns]
    return {
        **merged,
        **_rates(merged["completed"], sum(windows, Window(0.0, 0.0, 0.0)), db=db, receiver=receiver),
        "unit": "req/s",
        "concurrency": concurrency,
        "cycle_rates": [n / w.seconds for n, w in zip(completed, windows, strict=True)],
        "cycle_cpu_us": [w.server_cpu / n * 1e6 if n else None for n, w in zip(completed, windows, strict=True)],
    }


def measure_stream(server: ServerProcess, pool: LoadPool, settings: Settings, concurrency: int) -> dict[str, Any]:
    """Closed-loop SendStreamingMessage of the chunk agent: events/s received, latency per whole stream."""
    fields = {"target": server.target, "metadata": V1, "text": CHUNKS_TEXT}
    jobs, measure_from, measure_to = _windowed_jobs("stream", pool, settings, concurrency, fields)
    pool.submit(jobs)
    window = Sampler(server, pool).over(measure_from, measure_to)
    results = pool.collect(RESULT, list(jobs), settings.warmup + settings.duration + RESULT_MARGIN_SECONDS)
    server.check_alive()
    merged = merge(results.values())
    record = {**merged, **_rates(merged["events"], window), "unit": "events/s", "concurrency": concurrency}
    record["streams_per_second"] = merged["completed"] / window.seconds
    return record


def _send_one(stub: Any, text: str, settings: Settings, task: a2a_pb2.Task | None = None) -> a2a_pb2.Task:
    message = a2a_pb2.Message(message_id=f"control-{time.monotonic_ns()}", role=a2a_pb2.ROLE_USER)
    message.parts.add(text=text)
    if task is not None:
        message.task_id = task.id
        message.context_id = task.context_id
    response = stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=V1, timeout=settings.rpc_timeout)
    return response.task  # type: ignore[no-any-return]


def unsecured_refusal(server: ServerProcess, expected: grpc.StatusCode, settings: Settings) -> str:
    """The `expected` refusal of a SendMessage sent to `server` over plaintext without credentials (its code and
    details); RuntimeError when the call gets another answer."""
    with grpc.insecure_channel(server.target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            _send_one(stub, ECHO_TEXT, settings)
        except grpc.RpcError as error:
            if error.code() != expected:
                raise RuntimeError(f"a call without credentials got {error.code()}, not {expected.name}") from None
            return f"{expected.name}: {error.details()}"
    raise RuntimeError("the server answered a call without credentials")


def measure_fanout(server: ServerProcess, pool: LoadPool, settings: Settings, subscribers: int) -> dict[str, Any]:
    """SubscribeToTask fan-out: `subscribers` streams on one task, which then emits the chunk stream.

    Each round: a task waits in INPUT_REQUIRED, every subscriber receives its snapshot, then one message
    sets the agent going; the round lasts until the last subscriber has the last event. The first round
    is a warm-up; rounds repeat until the duration is spent.
    """
    shares = split(subscribers, pool.size)
    sampler = Sampler(server, pool)
    rounds: list[tuple[int, float]] = []
    errors = 0
    first_error: str | None = None
    cpu = Window(0.0, 0.0, 0.0)
    with grpc.insecure_channel(server.target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + settings.warmup + settings.duration
        for index in range(MAX_FANOUT_ROUNDS):
            task = _send_one(stub, HOLD_TEXT, settings)
            if task.status.state != a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED:
                raise RuntimeError(
                    f"the fan-out task is {a2a_pb2.TaskState.Name(task.status.state)}, not INPUT_REQUIRED"
                )
            jobs = {
                worker_id: {
                    "kind": "subscribe",
                    "target": server.target,
                    "metadata": V1,
                    "task_id": task.id,
                    "subscribers": share,
                    "rpc_timeout": settings.rpc_timeout,
                }
                for worker_id, share in enumerate(shares)
            }
            pool.submit(jobs)
            problems = [p for p in pool.collect(READY, list(jobs), RESULT_MARGIN_SECONDS).values() if p]
            start = sampler.start()
            went_at = time.monotonic()
            if not problems:
                _send_one(stub, CHUNKS_TEXT, settings, task)
            results = pool.collect(RESULT, list(jobs), settings.rpc_timeout + RESULT_MARGIN_SECONDS)
            if problems:
                raise RuntimeError(f"fan-out subscribers failed: {problems[0]}")
            window = sampler.since(start)
            merged = merge(results.values())
            if index > 0:
                last = max(r["last_event_at"] for r in results.values())
                rounds.append((merged["events"], last - went_at))
                errors += merged["errors"]
                first_error = first_error or merged["first_error"]
                cpu = cpu + window
            if rounds and time.monotonic() >= deadline:
                break
    server.check_alive()
    events = sum(n for n, _ in rounds)
    seconds = sum(s for _, s in rounds)
    durations_us = sorted(int(s * 1e6) for _, s in rounds)
    return {
        "completed": len(rounds),
        "events": events,
        "errors": errors,
        "first_error": first_error,
        "p50_ms": percentile(durations_us, 0.50) / 1000,
        "p99_ms": percentile(durations_us, 0.99) / 1000,
        **_rates(events, cpu, seconds),
        "unit": "events/s",
        "concurrency": subscribers,
        "rounds": len(rounds),
    }


def measure_memory(
    server: ServerProcess, pool: LoadPool, settings: Settings, tasks: int, concurrency: int
) -> dict[str, Any]:
    """Server RSS idle, then after `tasks` SendMessage calls (each stores one completed task)."""
    rss_idle = rss_bytes(server.pid)
    time_limit = max(600.0, tasks / 50)
    jobs = {
        worker_id: {
            "kind": "count",
            "target": server.target,
            "metadata": V1,
            "text": ECHO_TEXT,
            "total": total,
            "concurrency": min(total, max(1, concurrency // pool.size)),
            "time_limit": time_limit,
            "rpc_timeout": settings.rpc_timeout,
            "channels": settings.channels,
        }
        for worker_id, total in enumerate(split(tasks, pool.size))
    }
    began = time.monotonic()
    results = pool.run(jobs, time_limit + RESULT_MARGIN_SECONDS)
    seconds = time.monotonic() - began
    server.check_alive()
    time.sleep(0.5)  # let the last tasks leave the live set
    rss_after = rss_bytes(server.pid)
    merged = merge(results.values())
    with grpc.insecure_channel(server.target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        listed = stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=1), metadata=V1, timeout=settings.rpc_timeout)
    stored = merged["completed"]
    return {
        "completed": stored,
        "errors": merged["errors"],
        "first_error": merged["first_error"],
        "tasks_listed": listed.total_size,
        "rss_idle_mb": rss_idle / 2**20,
        "rss_after_mb": rss_after / 2**20,
        "bytes_per_task": (rss_after - rss_idle) / stored if stored else None,
        "rate": stored / seconds if seconds > 0 else 0.0,
        "unit": "tasks/s",
        "concurrency": concurrency,
    }


def measure_ticks(
    publisher: ServerProcess, subscriber: ServerProcess, pool: LoadPool, settings: Settings, rate: float
) -> dict[str, Any]:
    """Cross-replica event latency: the tick agent on `publisher` publishes `rate` events/s, stamped with the
    moment it publishes each, for the duration (after a warm-up round); one SubscribeToTask on `subscriber`,
    another server process on the same database, receives them. Latency = arrival - publishing, on one clock
    (CLOCK_MONOTONIC); every event must arrive once, numbered one after the other (stream-resume), in order."""
    seconds = settings.rpc_timeout + settings.warmup + settings.duration
    job = {
        "kind": "ticks",
        "publisher": publisher.target,
        "subscriber": subscriber.target,
        "metadata": V1,
        "interval_ms": 1000 / rate,
        "warmup_ticks": max(1, round(rate * settings.warmup)),
        "ticks": max(1, round(rate * settings.duration)),
        "rpc_timeout": seconds,
    }
    sampler = Sampler([publisher, subscriber], pool)
    pool.submit({0: job})
    problem = pool.collect(READY, [0], seconds + RESULT_MARGIN_SECONDS)[0]
    if problem:
        with contextlib.suppress(RuntimeError):  # the job's failure, told by its READY already
            pool.collect(RESULT, [0], RESULT_MARGIN_SECONDS)
        raise RuntimeError(f"cross-replica subscriber: {problem}")
    start = sampler.start()
    tally = pool.collect(RESULT, [0], seconds + RESULT_MARGIN_SECONDS)[0]
    window = sampler.since(start)
    publisher.check_alive()
    subscriber.check_alive()
    merged = merge([tally])
    return {
        **merged,
        **_rates(tally["ticks"], window, db=sampler.counts_db),
        "completed": tally["ticks"],
        "unit": "events/s",
        "concurrency": 1,
        "target_rate": rate,
        "expected_events": job["ticks"],
        "seq_gaps": tally["seq_gaps"],
        "out_of_order": tally["out_of_order"],
    }
