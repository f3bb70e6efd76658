"""kill -9 loses no acknowledged task: `a2a-grpc serve` on a SQLite file is killed with SIGKILL while
concurrent senders keep it busy, restarted on the same file, and every task whose SendMessage answer
reached a client is there, COMPLETED with its artifact. Twice, so a recovered file survives a crash too."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import grpc
from process import V1, ServerProcess, serve_process, text_message

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

SENDERS = 12  # each sends one message after another; together they keep calls in flight
ACKNOWLEDGED_BEFORE_KILL = 400  # per round; the kill lands while the senders still send
CRASH_ROUNDS = 3
CHECK_CONCURRENCY = 32


def stub_for(channel: grpc.aio.Channel) -> a2a_pb2_grpc.A2AServiceStub:
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


async def send_until_killed(
    stub: a2a_pb2_grpc.A2AServiceStub, sender: int, acknowledged: dict[str, str], enough: asyncio.Event, goal: int
) -> None:
    """Send until the server is gone; record each answered task id with its text."""
    for attempt in itertools.count(1):
        text = f"sender {sender} message {attempt} (goal {goal})"
        try:
            response = await stub.SendMessage(
                a2a_pb2.SendMessageRequest(message=text_message(text)), metadata=V1, timeout=20
            )
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            return
        assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        acknowledged[response.task.id] = text
        if len(acknowledged) >= goal:
            enough.set()
    raise AssertionError("unreachable")


async def load_then_kill(server: ServerProcess, acknowledged: dict[str, str]) -> None:
    """Concurrent senders; SIGKILL once enough more tasks are acknowledged, with a call of each in flight."""
    goal = len(acknowledged) + ACKNOWLEDGED_BEFORE_KILL
    enough = asyncio.Event()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(channel)
        senders = [
            asyncio.create_task(send_until_killed(stub, sender, acknowledged, enough, goal))
            for sender in range(SENDERS)
        ]
        try:
            await asyncio.wait_for(enough.wait(), 60)
            assert not any(s.done() for s in senders), "every sender is still sending when the kill lands"
            server.kill()
            await asyncio.wait_for(asyncio.gather(*senders), 30)
        finally:
            for sender_task in senders:
                sender_task.cancel()


async def check_everything_acknowledged_is_there(server: ServerProcess, acknowledged: dict[str, str]) -> None:
    limit = asyncio.Semaphore(CHECK_CONCURRENCY)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(channel)

        async def check(task_id: str, text: str) -> None:
            async with limit:
                task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1, timeout=20)
            assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED, (task_id, task.status)
            assert [part.text for artifact in task.artifacts for part in artifact.parts] == [text], task_id
            assert task.history[0].parts[0].text == text, task_id

        await asyncio.gather(*(check(task_id, text) for task_id, text in acknowledged.items()))
        listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=1), metadata=V1, timeout=20)
        assert listed.total_size >= len(acknowledged)


async def test_sigkill_mid_load_loses_no_acknowledged_task(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    acknowledged: dict[str, str] = {}
    for round_number in range(CRASH_ROUNDS):
        with serve_process(tmp_path / f"run-{round_number}", store=store) as server:
            await check_everything_acknowledged_is_there(server, acknowledged)
            await load_then_kill(server, acknowledged)
        assert server.process.returncode == -9

    assert len(acknowledged) >= CRASH_ROUNDS * ACKNOWLEDGED_BEFORE_KILL
    with serve_process(tmp_path / "after", store=store) as server:
        await check_everything_acknowledged_is_there(server, acknowledged)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = stub_for(channel)
            request = a2a_pb2.SendMessageRequest(message=text_message("still serving"))
            response = await stub.SendMessage(request, metadata=V1, timeout=20)
            listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=1), metadata=V1, timeout=20)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert listed.total_size >= len(acknowledged) + 1
