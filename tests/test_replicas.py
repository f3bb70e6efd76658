"""Replicas: server processes on one PostgreSQL database serve each other's tasks.

Each test starts real `a2a-grpc serve` processes on free loopback ports against a fresh database of the
throwaway cluster the tests run, and talks to them over gRPC with the generated stubs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from process import TICKER_AGENT, ServerProcess, serve_process, text_message

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER
from a2a_grpc.resume import event_seq

V1 = (("a2a-version", "1.0"),)
RESUME = (*V1, ("a2a-extensions", RESUME_EXTENSION_URI))
LEASE_SECONDS = 1.5
TEST_SECONDS = 60.0
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
FAILED = a2a_pb2.TASK_STATE_FAILED
CANCELED = a2a_pb2.TASK_STATE_CANCELED
TERMINAL = {COMPLETED, FAILED, CANCELED, a2a_pb2.TASK_STATE_REJECTED}

Stub = Any  # a2a_pb2_grpc.A2AServiceStub: the generated module carries no type information


def replicas(stack: ExitStack, log_dir: Path, store: str, count: int) -> list[ServerProcess]:
    flags = ("--agent", TICKER_AGENT, "--lease-seconds", str(LEASE_SECONDS), "--grace", "1")
    return [
        stack.enter_context(serve_process(log_dir / f"replica-{index}", *flags, store=store)) for index in range(count)
    ]


@pytest.fixture
def two(tmp_path: Path, postgres_url: str) -> Iterator[list[ServerProcess]]:
    with ExitStack() as stack:
        yield replicas(stack, tmp_path, postgres_url, 2)


@asynccontextmanager
async def stubs(*servers: ServerProcess) -> AsyncIterator[list[Stub]]:
    channels = [grpc.aio.insecure_channel(server.grpc_target) for server in servers]
    try:
        yield [a2a_pb2_grpc.A2AServiceStub(channel) for channel in channels]  # type: ignore[no-untyped-call]
    finally:
        for channel in channels:
            await channel.close()


async def start_task(stub: Stub, text: str) -> a2a_pb2.Task:
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    request = a2a_pb2.SendMessageRequest(message=text_message(text), configuration=configuration)
    response = await stub.SendMessage(request, metadata=V1)
    task: a2a_pb2.Task = response.task
    return task


async def final_task(stub: Stub, task_id: str, seconds: float = TEST_SECONDS) -> a2a_pb2.Task:
    """The task once it is final, polled through GetTask."""
    async with asyncio.timeout(seconds):
        while True:
            task: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
            if task.status.state in TERMINAL:
                return task
            await asyncio.sleep(0.05)


def numbers_of(events: list[a2a_pb2.StreamResponse]) -> list[int]:
    numbers = [event_seq(event) for event in events]
    assert None not in numbers, "every event of a stream that activates resume is numbered"
    return [number for number in numbers if number is not None]


def gap_free(numbers: list[int]) -> bool:
    return numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def ticks(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    return [e.artifact_update.artifact.parts[0].text for e in events if e.HasField("artifact_update")]


async def test_a_task_running_on_one_replica_streams_on_the_other_in_order(two: list[ServerProcess]) -> None:
    async with stubs(*two) as (a, b), asyncio.timeout(TEST_SECONDS):
        task = await start_task(a, "tick 20 0.02")
        request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
        events = [event async for event in b.SubscribeToTask(request, metadata=RESUME)]
        from_start = (*RESUME, (STREAM_AFTER_HEADER, "0"))
        replayed = [event async for event in b.SubscribeToTask(request, metadata=from_start)]
    assert gap_free(numbers_of(events))
    snapshot = events[0].task
    before = [part.text for part in snapshot.artifacts[0].parts] if snapshot.artifacts else []
    assert before + ticks(events[1:]) == [f"tick {index}" for index in range(20)]
    assert events[-1].status_update.status.state == COMPLETED
    assert ticks(replayed) == [f"tick {index}" for index in range(20)]


async def test_cancel_on_one_replica_stops_the_agent_running_on_the_other(two: list[ServerProcess]) -> None:
    runner_pid = two[0].process.pid
    async with stubs(*two) as (a, b), asyncio.timeout(TEST_SECONDS):
        task = await start_task(a, "tick 1000 0.05")
        await wait_for_ticks(b, task.id, 2)
        canceled = await b.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
        assert canceled.status.state == CANCELED
        assert canceled.status.message.parts[0].text == f"cancelled by the agent in process {runner_pid}"
        stored = await a.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert stored.status.state == CANCELED
        settled = len(stored.artifacts[0].parts)
        await asyncio.sleep(0.3)  # the agent on A publishes nothing more
        later = await b.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
        assert len(later.artifacts[0].parts) == settled


async def wait_for_ticks(stub: Stub, task_id: str, count: int) -> None:
    while True:
        task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        if task.artifacts and len(task.artifacts[0].parts) >= count:
            return
        await asyncio.sleep(0.02)


async def test_a_killed_replicas_task_is_failed_once_after_its_lease(tmp_path: Path, postgres_url: str) -> None:
    """B and C both watch the task when A dies: whichever fails it, both streams end with that one FAILED."""
    with ExitStack() as stack:
        a, b, c = replicas(stack, tmp_path, postgres_url, 3)
        async with stubs(a, b, c) as (to_a, to_b, to_c), asyncio.timeout(TEST_SECONDS):
            task = await start_task(to_a, "tick 1000 0.05")
            await wait_for_ticks(to_b, task.id, 2)
            request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
            watches = [asyncio.ensure_future(read_stream(stub, request)) for stub in (to_b, to_c)]
            killed_at = time.monotonic()
            a.process.send_signal(signal.SIGKILL)
            failed = await final_task(to_b, task.id)
            waited = time.monotonic() - killed_at
            assert failed.status.state == FAILED
            assert "lease expired" in failed.status.message.parts[0].text
            assert LEASE_SECONDS * 0.5 < waited < LEASE_SECONDS * 6
            watched = await asyncio.gather(*watches)
    for events in watched:
        assert gap_free(numbers_of(events))
        assert events[-1].status_update.status == failed.status


async def read_stream(stub: Stub, request: a2a_pb2.SubscribeToTaskRequest) -> list[a2a_pb2.StreamResponse]:
    return [event async for event in stub.SubscribeToTask(request, metadata=RESUME)]


async def test_a_message_to_a_task_running_on_another_replica_is_refused(two: list[ServerProcess]) -> None:
    async with stubs(*two) as (a, b), asyncio.timeout(TEST_SECONDS):
        task = await start_task(a, "tick 1000 0.05")
        follow_up = text_message("tick 1 0")
        follow_up.task_id = task.id
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await b.SendMessage(a2a_pb2.SendMessageRequest(message=follow_up), metadata=V1)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        await wait_for_ticks(b, task.id, 3)  # A's agent goes on, alone
        still = await a.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
    assert still.status.state == a2a_pb2.TASK_STATE_WORKING
    assert [message.parts[0].text for message in still.history if message.role == a2a_pb2.ROLE_USER] == [
        "tick 1000 0.05"
    ]


async def test_a_subscriber_cut_by_a_killed_replica_resumes_on_the_other_with_nothing_missing(
    two: list[ServerProcess],
) -> None:
    a, b = two
    async with stubs(a, b) as (to_a, to_b), asyncio.timeout(TEST_SECONDS):
        task = await start_task(to_a, "tick 40 0.03")
        request = a2a_pb2.SubscribeToTaskRequest(id=task.id)
        cut = to_b.SubscribeToTask(request, metadata=RESUME)
        seen = [await cut.read() for _ in range(6)]
        b.process.send_signal(signal.SIGKILL)
        with pytest.raises(grpc.aio.AioRpcError) as broken:
            while True:
                event = await cut.read()
                if event is grpc.aio.EOF:
                    break
                seen.append(event)
        assert broken.value.code() == grpc.StatusCode.UNAVAILABLE
        last = event_seq(seen[-1])
        assert last is not None
        after = (*RESUME, (STREAM_AFTER_HEADER, str(last)))
        resumed = [event async for event in to_a.SubscribeToTask(request, metadata=after)]
    assert resumed[0].HasField("task")
    rest = resumed[1:]
    assert numbers_of(rest) == list(range(last + 1, last + 1 + len(rest)))
    snapshot = seen[0].task
    before = [part.text for part in snapshot.artifacts[0].parts] if snapshot.artifacts else []
    assert before + ticks(seen[1:]) + ticks(rest) == [f"tick {index}" for index in range(40)]
    assert rest[-1].status_update.status.state == COMPLETED


async def test_300_messages_over_two_replicas_with_50_subscribers(two: list[ServerProcess]) -> None:
    async with stubs(*two, *two) as to, asyncio.timeout(TEST_SECONDS * 2):
        started = await asyncio.gather(*(start_task(to[index % 4], "tick 3 0.01") for index in range(300)))
        watched = started[:50]
        streams = await asyncio.gather(*(collect(to[(index + 1) % 4], task.id) for index, task in enumerate(watched)))
        finals = await asyncio.gather(*(final_task(to[index % 2], task.id) for index, task in enumerate(started)))
        listed = await list_all(to[0])
    assert all(task.status.state == COMPLETED for task in finals)
    assert sorted(listed) == sorted(task.id for task in started)  # every task, listed exactly once
    for events in streams:
        assert numbers_of(events)[0] == 1
        assert gap_free(numbers_of(events))
        assert events[-1].HasField("task") or events[-1].status_update.status.state == COMPLETED


async def collect(stub: Stub, task_id: str) -> list[a2a_pb2.StreamResponse]:
    """Every event of a subscription (the task may be final already: then the replay of its whole log)."""
    request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
    events = [event async for event in stub.SubscribeToTask(request, metadata=(*RESUME, (STREAM_AFTER_HEADER, "0")))]
    return events[1:]  # the events after the first task


async def list_all(stub: Stub) -> list[str]:
    ids: list[str] = []
    token = ""
    for _ in range(100):
        page = await stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=100, page_token=token), metadata=V1)
        ids.extend(task.id for task in page.tasks)
        token = page.next_page_token
        if not token:
            return ids
    raise AssertionError("ListTasks did not end within 100 pages")


async def test_kill_9_of_a_replica_under_load_loses_no_acknowledged_task(two: list[ServerProcess]) -> None:
    a, b = two
    acknowledged: list[a2a_pb2.Task] = []
    enough = asyncio.Event()

    async def load(stub: Stub) -> None:
        while True:
            request = a2a_pb2.SendMessageRequest(message=text_message("tick 1 0"))
            try:
                response = await stub.SendMessage(request, metadata=V1, timeout=5)
            except grpc.aio.AioRpcError:
                return
            acknowledged.append(response.task)
            if len(acknowledged) >= 200:
                enough.set()

    async with stubs(*([a] * 8)) as to_a, stubs(b) as (to_b,), asyncio.timeout(TEST_SECONDS):
        senders = [asyncio.ensure_future(load(stub)) for stub in to_a]
        await enough.wait()
        os.kill(a.process.pid, signal.SIGKILL)
        await asyncio.gather(*senders)
        for task in acknowledged:
            stored = await to_b.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
            assert stored.status.state == task.status.state == COMPLETED
            assert stored.artifacts == task.artifacts
