"""What the task code shares about a Task object: the states that settle a run, timestamps, copies and views."""

from __future__ import annotations

import time

from google.protobuf import timestamp_pb2

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES

TaskState = a2a_pb2.TaskState
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES


def now_timestamp() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp_now(stamp)
    return stamp


def stamp_now(stamp: timestamp_pb2.Timestamp) -> None:
    """Set `stamp` to the current time, in place."""
    seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
    stamp.seconds = seconds
    stamp.nanos = nanos


def copy_task(task: a2a_pb2.Task) -> a2a_pb2.Task:
    copy = a2a_pb2.Task()
    copy.CopyFrom(task)
    return copy


def copy_artifact(artifact: a2a_pb2.Artifact) -> a2a_pb2.Artifact:
    copy = a2a_pb2.Artifact()
    copy.CopyFrom(artifact)
    return copy


def task_view(task: a2a_pb2.Task, history_length: int | None, include_artifacts: bool = True) -> a2a_pb2.Task:
    """`task` as a response should show it; the same object when nothing needs trimming."""
    trim_history = history_length is not None and history_length < len(task.history)
    drop_artifacts = not include_artifacts and len(task.artifacts) > 0
    if not trim_history and not drop_artifacts:
        return task
    view = a2a_pb2.Task(id=task.id, context_id=task.context_id, status=task.status)
    if task.HasField("metadata"):
        view.metadata.CopyFrom(task.metadata)
    if not drop_artifacts:
        view.artifacts.extend(task.artifacts)
    if history_length is None:
        view.history.extend(task.history)
    elif history_length > 0:
        view.history.extend(task.history[-history_length:])
    return view
