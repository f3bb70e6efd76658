"""ListTasks: filters, cursor pagination, ordering, include_artifacts, page size defaults and scoping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from agents import OutcomeAgent
from conftest import StartServer, user_message
from google.protobuf import timestamp_pb2
from rpc_helpers import TEST_SECONDS, Metadata, Stub, bearer, make_stub

from a2a_grpc.generated import a2a_pb2

TaskState = a2a_pb2.TaskState


@pytest.fixture
async def stub(start_server: StartServer) -> AsyncIterator[Stub]:
    server = await start_server(agent=OutcomeAgent(), bearer_tokens={"ta": "alice", "tb": "bob"})
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)


ALICE, BOB = bearer("ta"), bearer("tb")


async def send(stub: Stub, text: str = "complete", context_id: str = "", metadata: Metadata = ALICE) -> a2a_pb2.Task:
    message = user_message(text, context_id=context_id)
    task: a2a_pb2.Task = (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=metadata)).task
    return task


async def list_tasks(stub: Stub, *, metadata: Metadata = ALICE, **fields: Any) -> a2a_pb2.ListTasksResponse:
    response: a2a_pb2.ListTasksResponse = await stub.ListTasks(a2a_pb2.ListTasksRequest(**fields), metadata=metadata)
    return response


def ids(response: a2a_pb2.ListTasksResponse) -> list[str]:
    return [task.id for task in response.tasks]


def newest_first(tasks: list[a2a_pb2.Task]) -> list[str]:
    ordered = sorted(tasks, key=lambda t: (t.status.timestamp.ToNanoseconds() // 1000, t.id), reverse=True)
    return [task.id for task in ordered]


async def test_pagination_over_more_tasks_than_a_page(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        created = [await send(stub) for _ in range(120)]
        pages: list[a2a_pb2.ListTasksResponse] = []
        token = ""
        for _ in range(10):
            page = await list_tasks(stub, page_size=50, page_token=token)
            pages.append(page)
            token = page.next_page_token
            if not token:
                break
        assert [len(page.tasks) for page in pages] == [50, 50, 20]
        assert [page.next_page_token != "" for page in pages] == [True, True, False]
        assert {page.total_size for page in pages} == {120}
        assert {page.page_size for page in pages} == {50}
        listed = [task_id for page in pages for task_id in ids(page)]
        assert len(listed) == len(set(listed)) == 120
        assert listed == newest_first(created)
        assert listed[0] == created[-1].id

        again = await list_tasks(stub, page_size=50, page_token=pages[0].next_page_token)
        assert ids(again) == ids(pages[1]), "the same cursor must give the same page"


async def test_cursors_stay_stable_while_new_tasks_arrive(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        created = [await send(stub) for _ in range(30)]
        first = await list_tasks(stub, page_size=10)
        newer = [await send(stub) for _ in range(5)]
        rest: list[str] = []
        token = first.next_page_token
        while token:
            page = await list_tasks(stub, page_size=10, page_token=token)
            rest.extend(ids(page))
            token = page.next_page_token
        assert ids(first) + rest == newest_first(created), "a new task must neither repeat nor hide an old one"
        latest = await list_tasks(stub, page_size=10)
        assert ids(latest)[:5] == newest_first(newer)
        assert latest.total_size == 35


async def test_page_size_defaults_to_50(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        for _ in range(55):
            await send(stub)
        page = await list_tasks(stub)
        assert len(page.tasks) == 50
        assert page.page_size == 50
        assert page.total_size == 55
        assert page.next_page_token
        last = await list_tasks(stub, page_token=page.next_page_token)
        assert len(last.tasks) == 5
        assert last.next_page_token == ""


async def test_a_single_page_has_an_empty_token(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        empty = await list_tasks(stub)
        assert (list(empty.tasks), empty.next_page_token, empty.total_size) == ([], "", 0)
        tasks = [await send(stub) for _ in range(3)]
        exact = await list_tasks(stub, page_size=3)
        assert ids(exact) == newest_first(tasks)
        assert exact.next_page_token == ""


async def test_filter_by_context_id(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        in_a = [await send(stub, context_id="ctx-a") for _ in range(3)]
        in_b = [await send(stub, context_id="ctx-b") for _ in range(2)]
        only_a = await list_tasks(stub, context_id="ctx-a")
        assert ids(only_a) == newest_first(in_a)
        assert only_a.total_size == 3
        assert {task.context_id for task in only_a.tasks} == {"ctx-a"}
        paged = await list_tasks(stub, context_id="ctx-b", page_size=1)
        assert (len(paged.tasks), paged.total_size) == (1, 2)
        assert ids(paged) == newest_first(in_b)[:1]
        none = await list_tasks(stub, context_id="ctx-none")
        assert (list(none.tasks), none.total_size) == ([], 0)


async def test_filter_by_status(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        completed = [await send(stub, "complete") for _ in range(3)]
        failed = [await send(stub, "fail") for _ in range(2)]
        waiting = [await send(stub, "input")]
        assert {task.status.state for task in waiting} == {TaskState.TASK_STATE_INPUT_REQUIRED}
        for state, expected in (
            (TaskState.TASK_STATE_COMPLETED, completed),
            (TaskState.TASK_STATE_FAILED, failed),
            (TaskState.TASK_STATE_INPUT_REQUIRED, waiting),
            (TaskState.TASK_STATE_CANCELED, []),
        ):
            response = await list_tasks(stub, status=state)
            assert ids(response) == newest_first(expected), TaskState.Name(state)
            assert response.total_size == len(expected)
        everything = await list_tasks(stub)
        assert everything.total_size == 6


async def test_filter_by_status_timestamp_after(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        older = [await send(stub) for _ in range(3)]
        await asyncio.sleep(0.01)
        newer = [await send(stub) for _ in range(2)]
        boundary = timestamp_pb2.Timestamp()
        boundary.CopyFrom(min((t.status.timestamp for t in newer), key=lambda ts: ts.ToNanoseconds()))
        after = await list_tasks(stub, status_timestamp_after=boundary)
        assert ids(after) == newest_first(newer), "the bound is inclusive and leaves out older tasks"
        assert after.total_size == 2
        assert not set(ids(after)) & {task.id for task in older}
        future = timestamp_pb2.Timestamp(seconds=boundary.seconds + 3600)
        assert (await list_tasks(stub, status_timestamp_after=future)).total_size == 0
        combined = await list_tasks(stub, status_timestamp_after=boundary, status=TaskState.TASK_STATE_FAILED)
        assert combined.total_size == 0


async def test_include_artifacts(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        task = await send(stub)
        assert len(task.artifacts) == 1
        omitted: list[dict[str, Any]] = [{}, {"include_artifacts": False}]
        for fields in omitted:
            [listed] = (await list_tasks(stub, **fields)).tasks
            assert list(listed.artifacts) == [], f"artifacts must be omitted with {fields}"
            assert listed.status == task.status
        [with_artifacts] = (await list_tasks(stub, include_artifacts=True)).tasks
        assert list(with_artifacts.artifacts) == list(task.artifacts)
        got = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=ALICE)
        assert len(got.artifacts) == 1, "listing without artifacts must not strip the stored task"


async def test_history_length_on_list_tasks(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        task = await send(stub)
        assert len(task.history) == 2  # the user's message and the agent's status message
        [full] = (await list_tasks(stub)).tasks
        assert list(full.history) == list(task.history)
        [none] = (await list_tasks(stub, history_length=0)).tasks
        assert list(none.history) == []
        [last] = (await list_tasks(stub, history_length=1)).tasks
        assert list(last.history) == list(task.history[-1:])


async def test_only_the_callers_tasks_are_listed(stub: Stub) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        alices = [await send(stub, metadata=ALICE) for _ in range(3)]
        bobs = [await send(stub, metadata=BOB) for _ in range(2)]
        for metadata, expected in ((ALICE, alices), (BOB, bobs)):
            response = await list_tasks(stub, metadata=metadata)
            assert ids(response) == newest_first(expected)
            assert response.total_size == len(expected)
        shared = await list_tasks(stub, metadata=BOB, context_id=alices[0].context_id)
        assert shared.total_size == 0
