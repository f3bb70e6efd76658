"""The readload.sqlite case (issue 31): does a server under heavy read load still answer its health checks?

The store is filled through the store's own write API before the server starts (TASKS completed tasks, one
history message each, all of one anonymous caller). Then CLIENTS clients loop the heaviest ListTasks (the
status filter: every task matches, so each page counts them all) while one client polls readiness
(grpc.health.v1 Check of "") every POLL_SECONDS and another loops GetTask of stored tasks. Recorded: the
NOT_SERVING answers (the server's own readiness check, a store ping every 2 s bounded by 3 s, failing under
the load), the health check's latency, GetTask's latency, and the listings done.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.store import SqliteStore, TaskWrite
from bench.measure import V1

TASKS = 100_000
QUICK_TASKS = 10_000
CLIENTS = 12
POLL_SECONDS = 0.1
MIN_SECONDS = 10.0  # long enough for several of the server's readiness checks (one every 2 s)
FILL_BATCH = 2000  # writes queued at once while filling (the writer commits them in a few transactions)
HEALTH_TIMEOUT_SECONDS = 3.0
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
# The agent's last word in each task's status: rows about the size an echo agent's tasks take (~950 bytes).
REPLY = a2a_pb2.Message(message_id="reply", role=a2a_pb2.ROLE_AGENT, parts=[a2a_pb2.Part(text="echo " * 140)])


def fill(path: Path, tasks: int) -> None:
    """`tasks` completed tasks in a new SQLite store at `path` (an earlier run's is removed), written through
    the store (counts and indexes kept as a server keeps them), all final within the last few minutes (task
    retention removes none while the case runs)."""
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    asyncio.run(_fill(path, tasks))


async def _fill(path: Path, tasks: int) -> None:
    store = SqliteStore(path)
    await store.open()
    message = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hello")])
    first_us = time.time_ns() // 1000 - tasks * 1000  # a millisecond apart, the last one now: none old enough
    try:
        for start in range(0, tasks, FILL_BATCH):
            await asyncio.gather(
                *(store.apply(_created(i, first_us, message)) for i in range(start, min(tasks, start + FILL_BATCH)))
            )
    finally:
        await store.close()


def _created(i: int, first_us: int, message: a2a_pb2.Message) -> TaskWrite:
    task = a2a_pb2.Task(id=task_id(i), context_id=f"ctx-{i % 1000}", status=a2a_pb2.TaskStatus(state=COMPLETED))
    task.status.message.CopyFrom(REPLY)
    task.status.timestamp.FromMicroseconds(first_us + i * 1000)
    return TaskWrite(task.id, 1, task=task, history=[message])


def task_id(i: int) -> str:
    return f"task-{i:07d}"


def measure(target: str, tasks: int, seconds: float) -> dict[str, Any]:
    """Load the server at `target` (holding `tasks` tasks) for `seconds` and return the record's figures."""
    return asyncio.run(_measure(target, tasks, max(seconds, MIN_SECONDS)))


async def _measure(target: str, tasks: int, seconds: float) -> dict[str, Any]:
    tally = Tally()
    stop = asyncio.Event()
    async with (
        grpc.aio.insecure_channel(target) as listing,
        grpc.aio.insecure_channel(target) as probing,
        grpc.aio.insecure_channel(target) as getting,
    ):
        loops = [asyncio.create_task(_list(listing, tally, stop)) for _ in range(CLIENTS)]
        loops += [
            asyncio.create_task(_poll(probing, tally, stop)),
            asyncio.create_task(_get(getting, tally, tasks, stop)),
        ]
        began = time.monotonic()
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*loops)
        tally.seconds = time.monotonic() - began
    return tally.record()


class Tally:
    def __init__(self) -> None:
        self.health_ms: list[float] = []
        self.not_serving = 0
        self.health_failed = 0
        self.get_ms: list[float] = []
        self.listed_ms: list[float] = []
        self.errors = 0
        self.first_error = ""
        self.seconds = 0.0

    def error(self, error: grpc.aio.AioRpcError, call: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or f"{call}: {error.code().name} {error.details()}"

    def record(self) -> dict[str, Any]:
        return {
            "concurrency": CLIENTS,
            "rate": len(self.listed_ms) / self.seconds if self.seconds else 0.0,
            "unit": "lists/s",
            "polls": len(self.health_ms) + self.health_failed,
            "not_serving": self.not_serving,
            "health_failed": self.health_failed,
            "health_p50_ms": percentile(self.health_ms, 50),
            "health_p99_ms": percentile(self.health_ms, 99),
            "health_max_ms": max(self.health_ms, default=None),
            "get_p50_ms": percentile(self.get_ms, 50),
            "get_p99_ms": percentile(self.get_ms, 99),
            "list_p50_ms": percentile(self.listed_ms, 50),
            "list_p99_ms": percentile(self.listed_ms, 99),
            "errors": self.errors,
            "first_error": self.first_error,
        }


def percentile(samples: list[float], p: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _list(channel: grpc.aio.Channel, tally: Tally, stop: asyncio.Event) -> None:
    stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
    request = a2a_pb2.ListTasksRequest(status=COMPLETED)
    while not stop.is_set():
        began = time.perf_counter()
        try:
            await stub.ListTasks(request, metadata=V1, timeout=60.0)
        except grpc.aio.AioRpcError as error:
            tally.error(error, "ListTasks")
            continue
        tally.listed_ms.append((time.perf_counter() - began) * 1000)


async def _poll(channel: grpc.aio.Channel, tally: Tally, stop: asyncio.Event) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    while not stop.is_set():
        began = time.perf_counter()
        try:
            answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=HEALTH_TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError:
            tally.health_failed += 1
        else:
            tally.health_ms.append((time.perf_counter() - began) * 1000)
            tally.not_serving += answer.status != health_pb2.HealthCheckResponse.SERVING
        await asyncio.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - began)))


async def _get(channel: grpc.aio.Channel, tally: Tally, tasks: int, stop: asyncio.Event) -> None:
    stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
    chosen = random.Random(31)
    while not stop.is_set():
        request = a2a_pb2.GetTaskRequest(id=task_id(chosen.randrange(tasks)))
        began = time.perf_counter()
        try:
            await stub.GetTask(request, metadata=V1, timeout=60.0)
        except grpc.aio.AioRpcError as error:
            tally.error(error, "GetTask")
            continue
        tally.get_ms.append((time.perf_counter() - began) * 1000)
