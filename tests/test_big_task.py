"""A task's history has a byte cap, and answers are bounded before they are built (issue 29, finding 3: an
agent that answered INPUT_REQUIRED to sixty 3.9 MB messages grew one task to 244 MB; every GetTask built a
244 MB answer, and ListTasks sent it whole past `--max-list-page-bytes`).

The caps are lowered through settings so that a few kilobytes stand for the megabytes."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from agents import OutcomeAgent
from conftest import V1, StartServer, error_info, user_message
from rpc_helpers import Clients, assert_error, rpc_error, stream_error

from a2a_grpc.agent import EventPublisher, RequestContext, TaskLimitError
from a2a_grpc.client import A2AClient
from a2a_grpc.errors import TaskHistoryFullError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store.base import TaskQuery, TaskStore, TaskWrite
from a2a_grpc.tasks.limits import ANSWER_OVERHEAD_BYTES

TaskState = a2a_pb2.TaskState
TEXT = "x" * 1000  # one message of about 1 KB


def send(text: str, task_id: str = "") -> a2a_pb2.SendMessageRequest:
    message = user_message(text, task_id=task_id) if task_id else user_message(text)
    return a2a_pb2.SendMessageRequest(message=message)


async def grow(stub: object, turns: int, text: str = TEXT) -> a2a_pb2.Task:
    """A task the OutcomeAgent keeps waiting for input, `turns` messages of `text` long."""
    send_message = stub.SendMessage  # type: ignore[attr-defined]
    task: a2a_pb2.Task = (await send_message(send(f"input {text}"), metadata=V1)).task
    for _ in range(turns - 1):
        task = (await send_message(send(f"input {text}", task.id), metadata=V1)).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    return task


async def test_a_message_past_the_history_bytes_is_refused_with_task_history_full(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(agent=OutcomeAgent(), max_history_bytes_per_task=5_000)
    stub = clients.stub(server)
    task = await grow(stub, turns=2)  # two messages of ~1 KB and the agent's two short answers
    held = len(task.history)
    refused = 0
    for _ in range(10):  # bounded: the third or fourth message passes 5,000 bytes
        try:
            task = (await stub.SendMessage(send(f"input {TEXT}", task.id), metadata=V1)).task
            held = len(task.history)
        except grpc.aio.AioRpcError as error:
            assert_error(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "TASK_HISTORY_FULL", taskId=task.id, limit="5000")
            assert "continue in a new task" in (error.details() or "")
            refused += 1
            break
    assert refused == 1
    unchanged = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
    assert unchanged.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert len(unchanged.history) == held  # the refused message never joined it
    async with A2AClient(server.grpc_target) as client:
        with pytest.raises(TaskHistoryFullError):
            await client.send_message(user_message(f"input {TEXT}", task_id=task.id))
        fresh = (await client.send_message("input a new task")).value.task  # other tasks go on
    assert fresh.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_a_new_task_whose_message_passes_the_history_bytes_is_refused(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(agent=OutcomeAgent(), max_history_bytes_per_task=500)
    error = await rpc_error(clients.stub(server).SendMessage(send(TEXT), metadata=V1))
    assert_error(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "TASK_HISTORY_FULL", limit="500")
    assert "taskId" not in error_info(error).metadata, "no task was created: none is named"
    assert "this message alone takes" in (error.details() or "")


class TalkativeAgent:
    """Answers with a status message of `size` characters; with `handle`, ends its task its own way when the
    server refuses it."""

    def __init__(self, size: int, *, handle: bool = False) -> None:
        self.size = size
        self.handle = handle

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        try:
            await events.status(TaskState.TASK_STATE_INPUT_REQUIRED, "y" * self.size)
        except TaskLimitError:
            if not self.handle:
                raise
            await events.complete("said too much")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_an_agent_publishing_past_the_history_bytes_fails_its_task_saying_why(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(agent=TalkativeAgent(3_000), max_history_bytes_per_task=2_000)
    stub = clients.stub(server)
    task = (await stub.SendMessage(send("hello"), metadata=V1)).task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "at most 2000 history bytes" in task.status.message.parts[0].text
    assert all(len(part.text) < 3_000 for message in task.history for part in message.parts)
    stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1)
    assert stored.status.state == TaskState.TASK_STATE_FAILED


async def test_an_agent_that_handles_the_history_bytes_ends_its_task_its_own_way(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(agent=TalkativeAgent(3_000, handle=True), max_history_bytes_per_task=2_000)
    task = (await clients.stub(server).SendMessage(send("hello"), metadata=V1)).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "said too much"


async def test_get_task_of_a_task_past_its_answer_bound_is_refused_naming_the_history_length_that_fits(
    start_server: StartServer, clients: Clients, tmp_path: Path
) -> None:
    """A task stored before the caps were lowered (the issue's 244 MB task after an upgrade): GetTask of it
    whole is refused before the answer is built; the history_length it names is answered exactly."""
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    first = await start_server(agent=OutcomeAgent(), store_url=store_url)
    big = "z" * 20_000
    task = await grow(clients.stub(first), turns=6, text=big)  # 6 x 20 KB: past the bound below
    await first.stop(0)
    second = await start_server(
        agent=OutcomeAgent(),
        store_url=store_url,
        max_history_bytes_per_task=1_000,
        max_artifact_bytes_per_task=1_000,
        max_list_page_bytes=10_000,
    )
    limit = 2 * 1_000 + 1_000 + ANSWER_OVERHEAD_BYTES
    stub = clients.stub(second)
    error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=V1))
    info = assert_error(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "ANSWER_TOO_LARGE", taskId=task.id, limit=str(limit))
    fits = int(info.metadata["historyLengthThatFits"])
    assert 0 < fits < len(task.history)
    answer = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id, history_length=fits), metadata=V1)
    assert list(answer.history) == list(task.history[-fits:])  # exactly the newest `fits`
    assert answer.ByteSize() <= limit
    too_many = a2a_pb2.GetTaskRequest(id=task.id, history_length=fits + 2)  # never cut to fit: refused
    error = await rpc_error(stub.GetTask(too_many, metadata=V1))
    assert_error(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "ANSWER_TOO_LARGE", historyLengthThatFits=str(fits))
    stream = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=V1)
    error = await stream_error(stream)  # its first event, the whole task, passes gRPC's send limit: nothing leaves
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error


async def test_a_list_tasks_page_holds_its_byte_bound_with_one_big_task(
    start_server: StartServer, clients: Clients
) -> None:
    page_bytes = 8_000
    server = await start_server(agent=OutcomeAgent(), max_list_page_bytes=page_bytes)
    stub = clients.stub(server)
    small = [(await stub.SendMessage(send(f"complete {n}"), metadata=V1)).task.id for n in range(3)]
    big = await grow(stub, turns=8, text="b" * 3_000)  # ~24 KB of history: three pages' worth alone
    small.append((await stub.SendMessage(send("complete last"), metadata=V1)).task.id)
    listed: list[str] = []
    token = ""
    for _ in range(10):  # bounded: every task is on one of the first few pages
        request = a2a_pb2.ListTasksRequest(page_token=token, include_artifacts=True)
        page = await stub.ListTasks(request, metadata=V1)
        assert sum(task.ByteSize() for task in page.tasks) <= page_bytes
        listed += [task.id for task in page.tasks]
        for task in page.tasks:
            if task.id == big.id:
                assert len(page.tasks) == 1  # alone on its page
                assert 0 < len(task.history) < len(big.history)
                assert list(task.history) == list(big.history[-len(task.history) :])  # its newest messages
                assert task.status == big.status
        token = page.next_page_token
        if not token:
            break
    assert sorted(listed) == sorted([*small, big.id])  # paging reaches every task once


async def test_a_list_tasks_page_of_big_tasks_reads_only_the_tasks_it_can_show(store: TaskStore) -> None:
    """The store stops before the task that would take the page past its bytes (the first comes whatever its
    size), so ListTasks over a hundred big tasks never reads a hundred of them to send three."""
    for number in range(6):
        task = a2a_pb2.Task(id=f"big-{number}", context_id="c")
        task.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
        task.status.timestamp.FromMicroseconds(1_000_000 + number)
        task.history.add(message_id=f"m-{number}").parts.add(text="h" * 10_000)
        task.artifacts.add(artifact_id="a").parts.add(text="a" * 10_000)
        await store.apply(TaskWrite(task.id, 1, owner="alice", task=task))
    one_page = TaskQuery(owner="alice", page_size=100)
    assert len((await store.list_tasks(one_page)).tasks) == 6
    cut = TaskQuery(owner="alice", page_size=100, max_bytes=25_000)  # two histories fit, not three
    page = await store.list_tasks(cut)
    assert [task.id for task in page.tasks] == ["big-5", "big-4"]
    assert page.next_page_token
    rest = await store.list_tasks(
        TaskQuery(owner="alice", page_size=100, max_bytes=25_000, page_token=page.next_page_token)
    )
    assert [task.id for task in rest.tasks] == ["big-3", "big-2"]
    with_artifacts = TaskQuery(owner="alice", page_size=100, max_bytes=25_000, include_artifacts=True)
    assert [task.id for task in (await store.list_tasks(with_artifacts)).tasks] == ["big-5"]
    alone = TaskQuery(owner="alice", page_size=100, max_bytes=100)  # smaller than any task: the first comes
    assert [task.id for task in (await store.list_tasks(alone)).tasks] == ["big-5"]


async def test_a_history_cap_past_what_grpc_can_send_still_starts_the_server(
    start_server: StartServer, clients: Clients
) -> None:
    """The send limit made from the task limits is bounded by grpc core's C int (2 GiB): a cap of 1 GiB (an answer
    bound of 2 GiB and more) once stopped the start with grpc's OverflowError."""
    server = await start_server(agent=OutcomeAgent(), max_history_bytes_per_task=2**30)
    task = await grow(clients.stub(server), turns=1)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
