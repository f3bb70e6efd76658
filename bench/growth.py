"""The growth.* cases: what each call costs as the store grows (`scripts/bench --cases 'growth.*'`).

For each store (memory, SQLite, PostgreSQL) and each size of --growth-sizes, a real `a2a-grpc serve` process
(its defaults: echo agent, access log on, on stderr, which goes to a file) is started on a store holding that
many tasks: SQLite and PostgreSQL are filled before the start through the store's API (bench/growth_load.py,
cached between runs), so the start-up (spawn to grpc.health.v1 SERVING) is measured on the full store; the
memory store starts empty and is filled after by SendMessage calls (contexts of ten tasks, every task
COMPLETED, one caller); the start-up is the median of STARTS (one with --quick). Then each measure makes
--growth-calls calls in a row on one connection (after WARMUP_CALLS unmeasured ones; at most MEASURE_SECONDS
each), as the anonymous caller:

  get              GetTask of a task picked at random among the caller's
  list.first       ListTasks' first page (PAGE_SIZE tasks)
  list.status      ListTasks, status = COMPLETED (most tasks)
  list.status-rare ListTasks, status = CANCELED (2% of the tasks; none in the memory store)
  list.context     ListTasks, one context (ten tasks)
  list.after       ListTasks, status_timestamp_after = the status time of the caller's AFTER_TASKS-th newest task
  list.deep        ListTasks' page DEEP_PAGES (its token fetched once before)
  send             SendMessage, a new task each

Calls go to 127.0.0.1 only, each with a timeout; a server is stopped (SIGTERM) before the next starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from bench import growth_load
from bench.launch import SERVE, NotServing, free_port, wait_serving
from bench.measure import percentile
from bench.procs import pin

V1 = (("a2a-version", "1.0"),)
MEASURES = (
    "get",
    "list.first",
    "list.status",
    "list.status-rare",
    "list.context",
    "list.after",
    "list.deep",
    "send",
)
PAGE_SIZE = 20
DEEP_PAGES = 20
AFTER_TASKS = 100
GET_TARGETS = 500
WARMUP_CALLS = 5
MEASURE_SECONDS = 30.0
CALL_SECONDS = 30.0
START_SECONDS = 300.0
STARTS = 3
STOP_SECONDS = 30.0
MEMORY_LOAD_CONCURRENCY = 32
MEMORY_LOAD_SECONDS = 1800.0


class GrowthServer:
    """`a2a-grpc serve --store URL` on a free loopback port, from spawn to SERVING (`start_seconds`)."""

    def __init__(self, store_url: str, cpus: set[int] | None, scratch: Path) -> None:
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self._stderr = (scratch / f"serve-{self.port}.log").open("w")
        argv = [*SERVE, "--store", store_url, "--listen", self.target, "--http-listen", ""]
        began = time.monotonic()
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr)
        try:
            if cpus is not None:
                pin(self.process.pid, cpus)
            self._wait_serving(began)
            self.start_seconds = time.monotonic() - began
        except BaseException:
            self.stop()
            raise

    def _wait_serving(self, began: float) -> None:
        left = START_SECONDS - (time.monotonic() - began)
        try:  # asked often: the time to SERVING is one of the figures
            wait_serving(self.process, self.target, left, self.log_tail, poll_seconds=0.01)
        except NotServing as error:
            raise NotServing(f"a2a-grpc serve: {error}") from None

    def log_tail(self, chars: int = 2000) -> str:
        self._stderr.flush()
        return Path(self._stderr.name).read_text(errors="replace").strip()[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        self._stderr.close()


@dataclass
class Targets:
    """What the measures ask for: the caller's task ids and one of its contexts."""

    task_ids: list[str]
    context_id: str


def _message(text: str, context_id: str = "") -> a2a_pb2.Message:
    message = a2a_pb2.Message(message_id=f"growth-{time.monotonic_ns()}", role=a2a_pb2.ROLE_USER)
    message.parts.add(text=text)
    if context_id:
        message.context_id = context_id
    return message


async def _fill_memory(target: str, size: int) -> Targets:
    """`size` SendMessage calls, MEMORY_LOAD_CONCURRENCY at a time, in contexts of CONTEXT_TASKS."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        ids: list[str] = []
        indexes = iter(range(size))

        async def caller() -> None:
            for index in indexes:
                context = f"growth-context-{index // growth_load.CONTEXT_TASKS:07d}"
                request = a2a_pb2.SendMessageRequest(message=_message("hello from the growth bench", context))
                response = await stub.SendMessage(request, metadata=V1, timeout=CALL_SECONDS)
                ids.append(response.task.id)

        await asyncio.wait_for(asyncio.gather(*(caller() for _ in range(MEMORY_LOAD_CONCURRENCY))), MEMORY_LOAD_SECONDS)
    middle = f"growth-context-{size // 2 // growth_load.CONTEXT_TASKS:07d}"
    return Targets(ids, middle)


def _planned_targets(size: int) -> Targets:
    mine = [t for t in growth_load.plan(size, 0) if t.owner == ""]
    return Targets([t.task_id for t in mine], mine[len(mine) // 2].context_id)


def _timed(call: Callable[[], object], calls: int) -> dict[str, Any]:
    """p50 and p99 (ms) of `calls` calls in a row, after WARMUP_CALLS; fewer when MEASURE_SECONDS ran out."""
    for _ in range(WARMUP_CALLS):
        call()
    samples: list[int] = []
    deadline = time.monotonic() + MEASURE_SECONDS
    while len(samples) < calls and time.monotonic() < deadline:
        began = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - began)
    samples.sort()
    return {"p50_ms": percentile(samples, 0.50) / 1e6, "p99_ms": percentile(samples, 0.99) / 1e6, "calls": len(samples)}


def _list(stub: Any, **fields: Any) -> a2a_pb2.ListTasksResponse:
    request = a2a_pb2.ListTasksRequest(**{"page_size": PAGE_SIZE, **fields})
    response: a2a_pb2.ListTasksResponse = stub.ListTasks(request, metadata=V1, timeout=CALL_SECONDS)
    return response


def _deep_token(stub: Any) -> tuple[str, int]:
    """The token of page DEEP_PAGES (or of the last page, in a smaller store) and that page's number."""
    token, page = "", 1
    while page < DEEP_PAGES:
        following = _list(stub, page_token=token).next_page_token
        if not following:
            break
        token, page = following, page + 1
    return token, page


def measure(target: str, targets: Targets, calls: int) -> dict[str, Any]:
    """Every measure of MEASURES against the server at `target`."""
    rng = random.Random(0)
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        newest = _list(stub, page_size=AFTER_TASKS).tasks
        after = newest[-1].status.timestamp
        total = _list(stub).total_size
        deep_token, deep_page = _deep_token(stub)
        ids = rng.sample(targets.task_ids, min(GET_TARGETS, len(targets.task_ids)))

        def get() -> object:
            request = a2a_pb2.GetTaskRequest(id=rng.choice(ids))
            return stub.GetTask(request, metadata=V1, timeout=CALL_SECONDS)

        def send() -> object:
            request = a2a_pb2.SendMessageRequest(message=_message("hello from the growth bench"))
            return stub.SendMessage(request, metadata=V1, timeout=CALL_SECONDS)

        actions: dict[str, Callable[[], object]] = {
            "get": get,
            "list.first": lambda: _list(stub),
            "list.status": lambda: _list(stub, status=a2a_pb2.TASK_STATE_COMPLETED),
            "list.status-rare": lambda: _list(stub, status=a2a_pb2.TASK_STATE_CANCELED),
            "list.context": lambda: _list(stub, context_id=targets.context_id),
            "list.after": lambda: _list(stub, status_timestamp_after=after),
            "list.deep": lambda: _list(stub, page_token=deep_token),
            "send": send,
        }
        measured = {name: _timed(actions[name], calls) for name in MEASURES}
    return {"measures": measured, "caller_tasks": total, "deep_page": deep_page}


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="a2a-growth-") as scratch:
        yield Path(scratch)


@dataclass(frozen=True)
class Settings:
    """What every growth.* case runs with."""

    calls: int  # per measure
    cache_dir: Path  # where loaded stores are kept between runs
    cpus: set[int] | None  # the servers' CPUs (None: any)
    new_database: Callable[[], str]  # the URL of a new, empty PostgreSQL database
    starts: int = STARTS  # starts per size, of which the start-up is the median


def run_size(store: str, size: int, settings: Settings) -> dict[str, Any]:
    """One growth record: the store of `size` tasks loaded (or taken from the cache), served, measured."""
    with _scratch() as scratch:
        load_seconds: float | None = None
        if store == "sqlite":
            loaded = growth_load.sqlite_store(settings.cache_dir, scratch, size)
            url, load_seconds = loaded.url, loaded.load_seconds
        elif store == "postgres":
            loaded = growth_load.postgres_store(settings.cache_dir, settings.new_database(), size)
            url, load_seconds = loaded.url, loaded.load_seconds
        else:
            url = "memory"
        started = []
        for _ in range(settings.starts - 1):  # one start-up varies with what else the machine does
            first = GrowthServer(url, settings.cpus, scratch)
            first.stop()
            started.append(first.start_seconds)
        server = GrowthServer(url, settings.cpus, scratch)
        started.append(server.start_seconds)
        try:
            if store == "memory":
                began = time.monotonic()
                targets = asyncio.run(_fill_memory(server.target, size))
                load_seconds = time.monotonic() - began
            else:
                targets = _planned_targets(size)
            result = measure(server.target, targets, settings.calls)
            if server.process.poll() is not None:
                raise RuntimeError(f"a2a-grpc serve exited with {server.process.returncode}: {server.log_tail()}")
        finally:
            server.stop()
    return {
        "name": f"growth.{store}@{size}",
        "store": store,
        "tasks": size,
        "start_seconds": statistics.median(started),
        "load_seconds": load_seconds,
        **result,
    }


def run_store(store: str, sizes: list[int], settings: Settings) -> list[dict[str, Any]]:
    """The records of one store at each size, smallest first; a size that failed has a `failed` record."""
    records = []
    for size in sorted(sizes):
        try:
            record = run_size(store, size, settings)
        except Exception as error:
            record = {"name": f"growth.{store}@{size}", "store": store, "tasks": size}
            record["failed"] = f"{type(error).__name__}: {error}"
        records.append(record)
        print(_line(record), flush=True)
    return records


def _line(record: dict[str, Any]) -> str:
    if "failed" in record:
        return f"{record['name']:<28} FAILED: {record['failed']}"
    figures = ", ".join(f"{name} {m['p50_ms']:.2f}/{m['p99_ms']:.2f}" for name, m in record["measures"].items())
    load = "cached" if record["load_seconds"] is None else f"loaded in {record['load_seconds']:.1f} s"
    return f"{record['name']:<28} start {record['start_seconds']:.2f} s ({load}); p50/p99 ms: {figures}"
