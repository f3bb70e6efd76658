"""The closed-loop load generator: worker processes that drive a server over loopback with grpc.aio.

Each worker is its own process (spawned, so no gRPC state is inherited) with its own channel, running
on uvloop when installed. The parent hands a worker one job at a time through its inbox; the worker
answers on the shared outbox with `(worker_id, kind, payload)`. Every loop is bounded: by the job's end
time or request count, and every RPC by a timeout.

Time is CLOCK_MONOTONIC (`time.monotonic()`), the same clock in every process on Linux, so the parent
can give all workers one measurement window (a send job: one timetable of slices, a window each): only
calls that complete inside it are counted.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import multiprocessing
import os
import queue
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc

from a2a_grpc.cli import run_async
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03_pb2
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_pb2_grpc
from a2a_grpc.interceptors.server import WORKER_TRAILER
from a2a_grpc.protocol import EXTENSIONS_HEADER, RESUME_EXTENSION_URI
from a2a_grpc.resume import event_seq
from bench.http_load import HTTP_FACES, http_senders
from bench.protocol import HOLD_TEXT, PUSH_TOKEN, parse_tick_text, ticks_text

READY = "ready"
RESULT = "result"

Job = dict[str, Any]
Metadata = tuple[tuple[str, str], ...]


V10 = "1.0"
V03 = "0.3"


class SendServer(NamedTuple):
    """A server of a send job: where, with what request metadata, on how many connections (at most one per
    caller), whether to ask which worker process serves each connection (`--workers`), the webhook each
    message names in its push config (`configuration.task_push_notification_config`; none when empty), the
    PEM CA to trust over TLS (None: plaintext), and the face its calls go to: V10 (`lf.a2a.v1.A2AService`)
    or V03 (`a2a.v1.A2AService`, the A2A 0.3 face; neither worker probes nor push configs), or an HTTP binding
    (bench.http_load: JSON-RPC or HTTP+JSON at http://`target`, a connection per caller; neither either)."""

    target: str
    metadata: Metadata
    channels: int
    probe_workers: bool = False
    push_url: str = ""
    tls_roots: bytes | None = None
    face: str = V10


class Slice(NamedTuple):
    """One server's turn in a send job: calls go to server number `server` from `start` to `end`, and those
    ending from `count_from` on count."""

    server: int
    start: float
    count_from: float
    end: float


@dataclass
class Tally:
    """What one worker saw in the measurement window."""

    completed: int = 0
    events: int = 0
    errors: int = 0
    calls: int = 0
    first_error: str | None = None
    latencies_us: list[int] = field(default_factory=list)

    def record(self, started: float, ended: float, failure: str | None, window_from: float, window_to: float) -> None:
        """One finished call; it counts when it ended inside the measurement window."""
        self.calls += 1
        if window_from <= ended <= window_to:
            if failure is None:
                self.completed += 1
                self.latencies_us.append(int((ended - started) * 1e6))
            else:
                self.error(failure)

    def error(self, description: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = description

    def as_dict(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "events": self.events,
            "errors": self.errors,
            "calls": self.calls,
            "first_error": self.first_error,
            "latencies_us": self.latencies_us,
        }


def _describe(error: BaseException) -> str:
    if isinstance(error, grpc.RpcError):
        code = error.code()
        return f"{code.name if code else '?'}: {error.details()}"
    return f"{type(error).__name__}: {error}"


def _send_request(text: str, task_id: str = "", push_url: str = "") -> Any:
    message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, task_id=task_id)
    message.parts.add(text=text)
    request = a2a_pb2.SendMessageRequest(message=message)
    if push_url:
        config = request.configuration.task_push_notification_config
        config.url = push_url
        config.token = PUSH_TOKEN
    return request


def _face_send(text: str, server: SendServer) -> tuple[Any, Any]:
    """The SendMessage request of `server`'s face and the message in it (whose message_id each call sets)."""
    if server.face == V10 or (server.face in HTTP_FACES and not server.push_url and not server.probe_workers):
        request = _send_request(text, push_url=server.push_url)
        return request, request.message
    if server.face != V03 or server.push_url or server.probe_workers:
        raise ValueError(f"a send job cannot drive face {server.face!r} with push configs or worker probes")
    # no configuration: 0.3 waits for the task then, as a 1.0 request without return_immediately does
    request = v03_pb2.SendMessageRequest(request=v03_pb2.Message(role=v03_pb2.ROLE_USER))
    request.request.content.add(text=text)
    return request, request.request


def _channel(target: str, tls_roots: bytes | None) -> Any:
    options = [
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ("grpc.use_local_subchannel_pool", 1),  # each channel its own connection
    ]
    if tls_roots is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=tls_roots), options=options)


@contextlib.asynccontextmanager
async def _stubs(
    target: str, channels: int, tls_roots: bytes | None = None, face: str = V10
) -> AsyncIterator[list[Any]]:
    """A stub of `face`'s service on each of `channels` connections to `target`, over TLS trusting `tls_roots`
    when given (callers take them in turn)."""
    stub = a2a_pb2_grpc.A2AServiceStub if face == V10 else v03_pb2_grpc.A2AServiceStub
    async with contextlib.AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(_channel(target, tls_roots)) for _ in range(channels)]
        yield [stub(channel) for channel in opened]


async def _worker_pid(stub: Any, metadata: Metadata, rpc_timeout: float) -> str:
    """The worker process behind `stub`'s connection, from the trailers of one call (a GetTask of no task)."""
    call = stub.GetTask(a2a_pb2.GetTaskRequest(id="bench-probe"), metadata=metadata, timeout=rpc_timeout)
    with contextlib.suppress(grpc.RpcError):
        await call
    trailers = await call.trailing_metadata()
    return str(dict(trailers or ()).get(WORKER_TRAILER, "?"))


async def _connections_per_worker(stubs: list[Any], server: SendServer, rpc_timeout: float) -> dict[str, int]:
    """How many of the connections each worker process serves ({} when not asked)."""
    if not server.probe_workers:
        return {}
    counts: dict[str, int] = {}
    for stub in stubs:
        pid = await _worker_pid(stub, server.metadata, rpc_timeout)
        counts[pid] = counts.get(pid, 0) + 1
    return counts


# ---- jobs ------------------------------------------------------------------------------------


async def send_job(job: Job, worker_id: int, outbox: Any) -> dict[str, Any]:
    """Closed loop of SendMessage through the job's back-to-back slices, each one driving one of its servers.

    A call goes to the server of the slice it starts in, and counts for that slice when it ends inside the
    slice's counted part. Returns one tally per slice, and how many calls to each server succeeded and failed
    over the whole job (each success made a task: a push server owes each of those its notifications).
    """
    slices: list[Slice] = job["slices"]
    starts = [s.start for s in slices]
    servers: list[SendServer] = job["servers"]
    metadata = [server.metadata for server in servers]
    expected = a2a_pb2.TaskState.Value(job["expect_state"])
    tallies = [Tally() for _ in slices]
    succeeded = [0] * len(servers)
    failed = [0] * len(servers)

    async def caller(index: int, sends: list[Any]) -> None:
        requests, messages = zip(*(_face_send(job["text"], server) for server in servers), strict=True)
        prefix = f"w{worker_id}c{index}-{os.getpid()}-"
        sequence = 0
        while (started := time.monotonic()) < slices[-1].end:
            turn = max(0, bisect.bisect_right(starts, started) - 1)
            server = slices[turn].server
            sequence += 1
            request = requests[server]
            messages[server].message_id = prefix + str(sequence)
            failure = None
            try:
                response = await sends[server](request, metadata=metadata[server], timeout=job["rpc_timeout"])
                if response.task.status.state != expected:  # the same numbers in both faces
                    failure = f"task state {a2a_pb2.TaskState.Name(response.task.status.state)}"
            except grpc.RpcError as error:
                failure = _describe(error)
            if failure is None:
                succeeded[server] += 1
            else:
                failed[server] += 1
            tallies[turn].record(started, time.monotonic(), failure, slices[turn].count_from, slices[turn].end)

    async with contextlib.AsyncExitStack() as stack:
        stubs = [
            await stack.enter_async_context(
                http_senders(server.target, job["concurrency"], server.face)
                if server.face in HTTP_FACES
                else _stubs(server.target, min(job["concurrency"], server.channels), server.tls_roots, server.face)
            )
            for server in servers
        ]
        spread = [
            await _connections_per_worker(s, server, job["rpc_timeout"])
            for s, server in zip(stubs, servers, strict=True)
        ]
        await asyncio.gather(
            *(caller(i, [s[i % len(s)].SendMessage for s in stubs]) for i in range(job["concurrency"]))
        )
    return {
        "slices": [tally.as_dict() for tally in tallies],
        "connections": spread,
        "succeeded_calls": succeeded,
        "failed_calls": failed,
    }


async def count_job(job: Job, worker_id: int, outbox: Any) -> dict[str, Any]:
    """SendMessage `total` times (with `concurrency` callers), as fast as the server answers."""
    metadata: Metadata = tuple(map(tuple, job["metadata"]))
    tally = Tally()
    remaining = job["total"]
    deadline = time.monotonic() + job["time_limit"]

    async def caller(index: int, send: Any) -> None:
        nonlocal remaining
        request = _send_request(job["text"])
        prefix = f"w{worker_id}c{index}-{os.getpid()}-"
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            request.message.message_id = prefix + str(remaining)
            try:
                await send(request, metadata=metadata, timeout=job["rpc_timeout"])
                tally.completed += 1
            except grpc.RpcError as error:
                tally.error(_describe(error))

    async with _stubs(job["target"], job.get("channels", 1)) as stubs:
        await asyncio.gather(*(caller(i, stubs[i % len(stubs)].SendMessage) for i in range(job["concurrency"])))
    return tally.as_dict()


async def stream_job(job: Job, worker_id: int, outbox: Any) -> dict[str, Any]:
    """Closed loop of SendStreamingMessage; counts the events received inside the window."""
    metadata: Metadata = tuple(map(tuple, job["metadata"]))
    measure_from, measure_to = job["window"]
    completed_state = a2a_pb2.TaskState.TASK_STATE_COMPLETED
    tally = Tally()

    async def streamer(index: int, start_stream: Any) -> None:
        request = _send_request(job["text"])
        prefix = f"w{worker_id}s{index}-{os.getpid()}-"
        sequence = 0
        while (started := time.monotonic()) < measure_to:
            sequence += 1
            request.message.message_id = prefix + str(sequence)
            last = None
            received = 0
            failure = None
            try:
                async for response in start_stream(request, metadata=metadata, timeout=job["rpc_timeout"]):
                    if measure_from <= time.monotonic() <= measure_to:
                        tally.events += 1
                    received += 1
                    last = response
                if last is None or last.status_update.status.state != completed_state:
                    failure = f"stream of {received} events did not end with a COMPLETED status"
            except grpc.RpcError as error:
                failure = _describe(error)
            tally.record(started, time.monotonic(), failure, measure_from, measure_to)

    async with _stubs(job["target"], job.get("channels", 1)) as stubs:
        streamers = (streamer(i, stubs[i % len(stubs)].SendStreamingMessage) for i in range(job["concurrency"]))
        await asyncio.gather(*streamers)
    return tally.as_dict()


async def subscribe_job(job: Job, worker_id: int, outbox: Any) -> dict[str, Any]:
    """`subscribers` SubscribeToTask streams on one task: report READY once every snapshot arrived,
    then read each stream to its end. Returns the events after the snapshots and when the last came."""
    metadata: Metadata = tuple(map(tuple, job["metadata"]))
    completed_state = a2a_pb2.TaskState.TASK_STATE_COMPLETED
    tally = Tally()
    last_event_at = 0.0

    async def drain(call: Any) -> None:
        nonlocal last_event_at
        last = None
        try:
            while (response := await call.read()) is not grpc.aio.EOF:
                last_event_at = max(last_event_at, time.monotonic())
                tally.events += 1
                last = response
        except grpc.RpcError as error:
            tally.error(_describe(error))
            return
        if last is None or last.status_update.status.state != completed_state:
            tally.error("a subscription did not end with a COMPLETED status")
        else:
            tally.completed += 1

    async with _stubs(job["target"], job.get("channels", 1)) as stubs:
        stub = stubs[0]
        request = a2a_pb2.SubscribeToTaskRequest(id=job["task_id"])
        calls = [
            stub.SubscribeToTask(request, metadata=metadata, timeout=job["rpc_timeout"])
            for _ in range(job["subscribers"])
        ]
        problem = None
        try:
            snapshots = await asyncio.gather(*(call.read() for call in calls))
            if not all(s is not grpc.aio.EOF and s.HasField("task") for s in snapshots):
                problem = "a subscription did not begin with a Task snapshot"
        except grpc.RpcError as error:
            problem = _describe(error)
        outbox.put((worker_id, READY, problem))
        if problem is not None:
            for call in calls:
                call.cancel()
            tally.error(problem)
            return {**tally.as_dict(), "last_event_at": 0.0}
        await asyncio.gather(*(drain(call) for call in calls))
    tally.calls = len(calls)
    return {**tally.as_dict(), "last_event_at": last_event_at}


@dataclass
class TickTally(Tally):
    """What the subscriber of a tick task saw: `latencies_us` from each tick's publishing to its arrival."""

    ticks: int = 0
    seq_gaps: int = 0
    out_of_order: int = 0

    def tick(self, text: str, received_ns: int, expected_index: int) -> None:
        index, published_ns = parse_tick_text(text)
        self.ticks += 1
        self.latencies_us.append((received_ns - published_ns) // 1000)
        if index != expected_index:
            self.out_of_order += 1
            self.error(f"tick {index} arrived where tick {expected_index} was due")

    def numbered(self, seq: int | None, expected: int) -> None:
        if seq != expected:
            self.seq_gaps += 1
            self.error(f"event numbered {seq} arrived where {expected} was due")

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "ticks": self.ticks, "seq_gaps": self.seq_gaps, "out_of_order": self.out_of_order}


def _tick_request(text: str, task: Any = None) -> Any:
    request = _send_request(text, task.id if task is not None else "")
    request.message.message_id = f"ticks-{os.getpid()}-{time.monotonic_ns()}"
    if task is not None:
        request.message.context_id = task.context_id
        request.configuration.return_immediately = True
    return request


async def _hold_task(publisher: Any, job: Job) -> Any:
    response = await publisher.SendMessage(
        _tick_request(HOLD_TEXT), metadata=job["metadata"], timeout=job["rpc_timeout"]
    )
    if response.task.status.state != a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED:
        raise RuntimeError(f"the tick task is {a2a_pb2.TaskState.Name(response.task.status.state)}, not INPUT_REQUIRED")
    return response.task


async def _start_ticks(publisher: Any, task: Any, job: Job, count: int) -> None:
    request = _tick_request(ticks_text(count, job["interval_ms"]), task)
    await publisher.SendMessage(request, metadata=job["metadata"], timeout=job["rpc_timeout"])


async def _tick_round(publisher: Any, subscriber: Any, job: Job, count: int, ready: Callable[[], None]) -> TickTally:
    """A tick task held on `publisher`, subscribed to on `subscriber` (stream-resume on), `ready()`, then
    set ticking; the stream read to its end: every event numbered one after the other, the ticks in order."""
    task = await _hold_task(publisher, job)
    metadata: Metadata = (*job["metadata"], (EXTENSIONS_HEADER, RESUME_EXTENSION_URI))
    request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
    call = subscriber.SubscribeToTask(request, metadata=metadata, timeout=job["rpc_timeout"])
    snapshot = await call.read()
    if snapshot is grpc.aio.EOF or not snapshot.HasField("task"):
        raise RuntimeError("the subscription did not begin with a Task snapshot")
    tally = TickTally(calls=1)
    seq = event_seq(snapshot) or 0
    ready()
    ticking = asyncio.ensure_future(_start_ticks(publisher, task, job, count))
    last = None
    while (event := await call.read()) is not grpc.aio.EOF:
        received_ns = time.monotonic_ns()
        seq += 1
        tally.events += 1
        tally.numbered(event_seq(event), seq)
        if event.HasField("artifact_update"):
            tally.tick(event.artifact_update.artifact.parts[0].text, received_ns, tally.ticks)
        last = event
    await ticking
    if last is None or last.status_update.status.state != a2a_pb2.TaskState.TASK_STATE_COMPLETED:
        tally.error("the subscription did not end with a COMPLETED status")
    elif tally.ticks != count:
        tally.error(f"{tally.ticks} of {count} ticks arrived")
    else:
        tally.completed = 1
    return tally


async def tick_job(job: Job, worker_id: int, outbox: Any) -> dict[str, Any]:
    """A warm-up round of `warmup_ticks`, then the measured round of `ticks`: the tick agent on `publisher`
    publishes one tick per `interval_ms`, and one SubscribeToTask on `subscriber` (another replica) receives
    them. READY (None, or what went wrong) once the measured round's subscription has its snapshot."""
    ready_sent = False

    def ready(problem: str | None = None) -> None:
        nonlocal ready_sent
        ready_sent = True
        outbox.put((worker_id, READY, problem))

    try:
        async with _stubs(job["publisher"], 1) as (publisher,), _stubs(job["subscriber"], 1) as (subscriber,):
            await _tick_round(publisher, subscriber, job, job["warmup_ticks"], lambda: None)
            tally = await _tick_round(publisher, subscriber, job, job["ticks"], ready)
    except (grpc.RpcError, RuntimeError) as error:
        if not ready_sent:
            ready(_describe(error))
        raise
    return tally.as_dict()


JOBS: dict[str, Callable[[Job, int, Any], Awaitable[dict[str, Any]]]] = {
    "send": send_job,
    "count": count_job,
    "stream": stream_job,
    "subscribe": subscribe_job,
    "ticks": tick_job,
}


# ---- worker process --------------------------------------------------------------------------


async def _serve_jobs(worker_id: int, inbox: Any, outbox: Any) -> int:
    loop = asyncio.get_running_loop()
    while True:
        job = await loop.run_in_executor(None, inbox.get)
        if job is None:
            return 0
        try:
            payload = await JOBS[job["kind"]](job, worker_id, outbox)
        except Exception as error:
            payload = {"failed": f"{type(error).__name__}: {error}"}
        outbox.put((worker_id, RESULT, payload))


def worker_main(worker_id: int, inbox: Any, outbox: Any, cpus: set[int] | None) -> None:
    if cpus is not None:
        os.sched_setaffinity(0, cpus)  # before gRPC starts its threads, which inherit it
    run_async(_serve_jobs(worker_id, inbox, outbox))


class LoadPool:
    """The load generator processes, started once (on `cpus`, when given) and reused for every case."""

    def __init__(self, processes: int, cpus: set[int] | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self.outbox = context.Queue()
        self.inboxes = [context.Queue() for _ in range(processes)]
        self.workers = [
            context.Process(target=worker_main, args=(i, inbox, self.outbox, cpus), name=f"bench-load-{i}", daemon=True)
            for i, inbox in enumerate(self.inboxes)
        ]
        for worker in self.workers:
            worker.start()

    @property
    def size(self) -> int:
        return len(self.workers)

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self.workers if worker.pid is not None]

    def submit(self, jobs: dict[int, Job]) -> None:
        for worker_id, job in jobs.items():
            self.inboxes[worker_id].put(job)

    def collect(self, kind: str, worker_ids: list[int], timeout: float) -> dict[int, Any]:
        """One `kind` message from each of `worker_ids` (a failed job raises, a silent worker times out)."""
        deadline = time.monotonic() + timeout
        received: dict[int, Any] = {}
        while len(received) < len(worker_ids):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"load workers {sorted(set(worker_ids) - set(received))} sent no {kind}")
            try:
                worker_id, got_kind, payload = self.outbox.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [w.name for w in self.workers if not w.is_alive()]
                if dead:
                    raise RuntimeError(f"load workers died: {dead}") from None
                continue
            if got_kind != kind:
                raise RuntimeError(f"load worker {worker_id} sent {got_kind} while {kind} was expected")
            if isinstance(payload, dict) and "failed" in payload:
                raise RuntimeError(f"load worker {worker_id}: {payload['failed']}")
            received[worker_id] = payload
        return received

    def run(self, jobs: dict[int, Job], timeout: float) -> dict[int, Any]:
        self.submit(jobs)
        return self.collect(RESULT, list(jobs), timeout)

    def close(self) -> None:
        for inbox in self.inboxes:
            with contextlib.suppress(OSError, ValueError):
                inbox.put(None)
        for worker in self.workers:
            worker.join(5)
            if worker.is_alive():
                worker.kill()
                worker.join(5)


def split(total: int, parts: int) -> list[int]:
    """`total` spread over at most `parts` non-zero shares."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
