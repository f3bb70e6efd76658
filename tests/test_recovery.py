"""A task a previous server process left running is failed at start-up, not left WORKING forever."""

from __future__ import annotations

from pathlib import Path

import grpc
from conftest import V1, StartServer, user_message
from rpc_helpers import make_stub

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import SqliteStore, TaskWrite
from a2a_grpc.tasks import now_timestamp


def _task(task_id: str, state: a2a_pb2.TaskState) -> a2a_pb2.Task:
    status = a2a_pb2.TaskStatus(state=state, timestamp=now_timestamp())
    return a2a_pb2.Task(id=task_id, context_id="c", status=status, history=[user_message("left behind")])


async def test_tasks_left_running_are_failed_and_others_kept(start_server: StartServer, tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteStore(path)
    await store.open()
    for task_id, state in [
        ("working", a2a_pb2.TASK_STATE_WORKING),
        ("submitted", a2a_pb2.TASK_STATE_SUBMITTED),
        ("waiting", a2a_pb2.TASK_STATE_INPUT_REQUIRED),
        ("done", a2a_pb2.TASK_STATE_COMPLETED),
    ]:
        await store.apply(TaskWrite(task_id, 1, task=_task(task_id, state)))
    await store.close()

    server = await start_server(store_url=f"sqlite:///{path}")
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        states = {
            task_id: (await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)).status.state
            for task_id in ("working", "submitted", "waiting", "done")
        }
        failed = await stub.GetTask(a2a_pb2.GetTaskRequest(id="working"), metadata=V1)
    assert states == {
        "working": a2a_pb2.TASK_STATE_FAILED,
        "submitted": a2a_pb2.TASK_STATE_FAILED,
        "waiting": a2a_pb2.TASK_STATE_INPUT_REQUIRED,
        "done": a2a_pb2.TASK_STATE_COMPLETED,
    }
    assert "stopped while this task was running" in failed.status.message.parts[0].text
    assert failed.history[0].parts[0].text == "left behind"
