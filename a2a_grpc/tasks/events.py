"""The events a task's changes make, as a stream shows them: each built in place in its StreamResponse, so that
the status or the chunk is the event's own (one copy of a chunk, none of a status)."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.tasks.live import stamp_now


def status_event(
    task: a2a_pb2.Task, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None
) -> a2a_pb2.StreamResponse:
    """A new status of `task`, stamped now; its `status_update.status` is the status the task takes."""
    response = a2a_pb2.StreamResponse()
    event = response.status_update
    event.task_id, event.context_id = task.id, task.context_id
    status = event.status
    status.state = state
    stamp_now(status.timestamp)
    if message is not None:
        status.message.CopyFrom(message)
    return response


def artifact_event(
    task: a2a_pb2.Task, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool
) -> a2a_pb2.StreamResponse:
    """An artifact chunk of `task`."""
    response = a2a_pb2.StreamResponse()
    event = response.artifact_update
    event.task_id, event.context_id = task.id, task.context_id
    event.artifact.CopyFrom(artifact)
    event.append, event.last_chunk = append, last_chunk
    return response
