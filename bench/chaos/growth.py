"""The history-growth scenario: clients that keep sending messages into a task waiting for input until the
server refuses them, as the 244 MB task of issue 29 (finding 3) was made, beside the usual storm of calls.

Its servers cap a task's history at HISTORY_BYTES and a ListTasks page at PAGE_BYTES. A growing client opens
a task with GROW (the chaos agent asks for input again after every GROW message) and sends MESSAGE_BYTES
messages into it. Invariants, besides every scenario's (the server up, nothing unhandled, memory bounded):
the refusal comes within the messages the cap allows and one more, as RESOURCE_EXHAUSTED with reason
TASK_HISTORY_FULL; the full task is then answered whole, its history within the cap; no ListTasks page passes
PAGE_BYTES, whatever big tasks it meets.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from a2a_grpc.errors import TaskHistoryFullError, error_from_rpc_error
from a2a_grpc.generated import a2a_pb2
from bench.chaos.agent import GROW
from bench.chaos.ledger import Caller
from bench.chaos.workload import CALL_SECONDS, OPERATIONS, Client, Operations, text_message

HISTORY_BYTES = 1024 * 1024
PAGE_BYTES = 256 * 1024
MESSAGE_BYTES = 96 * 1024
MOST_MESSAGES = HISTORY_BYTES // MESSAGE_BYTES + 2  # the one that first passes the cap, and one to spare
V1 = ("a2a-version", "1.0")


def setup(_: Path) -> tuple[list[str], list[Caller]]:
    flags = ["--max-history-bytes-per-task", str(HISTORY_BYTES), "--max-list-page-bytes", str(PAGE_BYTES)]
    return flags, [Caller("anonymous", (V1,))]


async def grow(client: Client) -> None:
    """One task grown until the server refuses its next message (or another call ends it first)."""
    task_id = await _send(client, GROW, "")
    if not task_id:
        return
    client.ledger.acknowledge(task_id, client.caller)
    big = GROW + " " + "g" * MESSAGE_BYTES
    for _ in range(MOST_MESSAGES):
        try:
            if not await _send(client, big, task_id):
                return  # not INPUT_REQUIRED any more
        except grpc.aio.AioRpcError as error:
            client.record(error.code(), "SendMessage into a growing task")
            refusal = error_from_rpc_error(error)
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and not isinstance(refusal, TaskHistoryFullError):
                client.ledger.violation(f"a growing task's refusal was not TASK_HISTORY_FULL: {refusal!r}")
            elif isinstance(refusal, TaskHistoryFullError):
                await _check_full(client, task_id)
            return
    client.ledger.violation(f"task {task_id} took {MOST_MESSAGES} messages of {MESSAGE_BYTES} bytes unrefused")


async def _send(client: Client, text: str, task_id: str) -> str:
    """The task's id while it waits for input after `text`, else ""; a refusal raises."""
    request = a2a_pb2.SendMessageRequest(message=text_message(text, task_id))
    response = await client.stub.SendMessage(request, metadata=client.metadata(), timeout=CALL_SECONDS)
    client.record(grpc.StatusCode.OK, "SendMessage into a growing task")
    task = response.task
    return str(task.id) if task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED else ""


async def _check_full(client: Client, task_id: str) -> None:
    """The full task is answered whole (to a client with gRPC's default 4 MiB receive limit), within its cap."""
    answer = await client.unary(
        "GetTask of a full task",
        client.stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=client.metadata(), timeout=CALL_SECONDS),
    )
    if answer is None:
        client.ledger.violation(f"GetTask of the full task {task_id} was refused")
        return
    held = sum(message.ByteSize() for message in answer.history)
    if held > HISTORY_BYTES:
        client.ledger.violation(f"task {task_id} holds {held} history bytes, past its cap of {HISTORY_BYTES}")


async def list_pages(client: Client) -> None:
    """A few pages of every task, history and artifacts included: none may pass PAGE_BYTES."""
    token = ""
    for _ in range(3):
        request = a2a_pb2.ListTasksRequest(page_size=100, page_token=token, include_artifacts=True)
        page = await client.unary(
            "ListTasks", client.stub.ListTasks(request, metadata=client.metadata(), timeout=CALL_SECONDS)
        )
        if page is None:
            return
        size = sum(task.ByteSize() for task in page.tasks)
        if size > PAGE_BYTES:
            client.ledger.violation(
                f"a ListTasks page of {len(page.tasks)} tasks took {size} bytes (bound {PAGE_BYTES})"
            )
        token = page.next_page_token
        if not token:
            return


GROWTH_OPERATIONS: Operations = (*OPERATIONS, (grow, 6), (list_pages, 3))
