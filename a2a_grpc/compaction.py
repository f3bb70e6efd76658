"""Long-lived Task messages that events change in place, kept to a memory proportional to their size.

A upb message frees nothing of itself until it is freed whole: a part replaced (a field's CopyFrom, a
string set again) leaves its old bytes in the message's arena. So whoever keeps a Task and replaces its
parts counts the bytes replaced since the task was last rebuilt and, once they outweigh the task (or
REBUILD_FLOOR), rebuilds it into a fresh message: the old one, and its arena, go once nothing refers
to them.
"""

from __future__ import annotations

from typing import Protocol

from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.generated import a2a_pb2

REBUILD_FLOOR = 1 << 20
# About what a replaced status leaves behind, less its message: the task manager puts a status's
# message in the history too, so what replaced messages leave never outweighs the task.
STATUS_BYTES = 64


class CompactedTask(Protocol):
    """A holder of a long-lived Task; it starts with `replaced = 0` and `rebuild_after = REBUILD_FLOOR`."""

    task: a2a_pb2.Task
    replaced: int  # bytes replaced since the task was last rebuilt
    rebuild_after: int


def set_status(holder: CompactedTask, status: a2a_pb2.TaskStatus) -> bool:
    """Replace the task's status; True when `holder.task` is a new object since."""
    holder.task.status.CopyFrom(status)
    holder.replaced += STATUS_BYTES
    if holder.replaced <= holder.rebuild_after:
        return False
    _rebuild(holder)
    return True


def apply_artifact(holder: CompactedTask, chunk: a2a_pb2.Artifact, append: bool) -> bool:
    """`apply_artifact_chunk` on the task; True when `holder.task` is a new object since."""
    holder.replaced += apply_artifact_chunk(holder.task.artifacts, chunk, append)
    if holder.replaced <= holder.rebuild_after:
        return False
    _rebuild(holder)
    return True


def _rebuild(holder: CompactedTask) -> None:
    data = holder.task.SerializeToString()
    holder.task = a2a_pb2.Task.FromString(data)
    holder.replaced = 0
    holder.rebuild_after = max(REBUILD_FLOOR, len(data))
