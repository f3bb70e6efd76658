"""What a live task holds: the Task message of its machine (`TaskMachine`), kept compact as events change it
(`a2a_grpc.compaction`), and the bytes its history and its artifacts take, counted against the task's limits
before a change joins them (counted from the task itself when first needed)."""

from __future__ import annotations

from a2a_grpc import compaction
from a2a_grpc.agent import TaskLimitError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store.base import TaskWrite
from a2a_grpc.tasks.rules import history_full


class TaskContent:
    """The task a machine holds (`task`, a `CompactedTask`: read it afresh, a change may rebuild it)."""

    __slots__ = ("_artifact_bytes", "_history_bytes", "rebuild_after", "replaced", "task")

    def __init__(self, task: a2a_pb2.Task) -> None:
        self.task = task
        self.replaced = 0
        self.rebuild_after = compaction.REBUILD_FLOOR
        self._artifact_bytes: int | None = None
        self._history_bytes: int | None = None

    def count_history(
        self, message: a2a_pb2.Message | None, *, caller: bool, limit: int | None, new_task: bool = False
    ) -> None:
        """Count `message` into the history bytes before it joins the history (None: count the history as it
        is); past `limit` (None: none for this message), a `caller`'s message is TaskHistoryFullError, the
        agent's TaskLimitError. A caller's message is left as it is (the task's copy takes the task's ids), the
        agent's takes the task's ids here."""
        task = self.task
        held = self._history_bytes
        if held is None:
            held = sum(map(a2a_pb2.Message.ByteSize, task.history))
        if caller and message is not None:
            held += _size_with_ids(message, task)
        elif message is not None:
            message.task_id, message.context_id = task.id, task.context_id  # as it will be stored
            held += message.ByteSize()
        if limit is not None and held > limit:
            if caller:
                raise history_full(task.id, limit, held, new_task=new_task)
            raise TaskLimitError(
                f"task {task.id} may hold at most {limit} history bytes; this message would make {held}"
            )
        self._history_bytes = held

    def join_history(
        self, write: TaskWrite, caller_message: a2a_pb2.Message | None, message: a2a_pb2.Message | None, keep: int
    ) -> None:
        """A caller's message, then a status's message, join the history (and the write's, when it is a delta);
        the caller's is left as it is, its copy in the task takes the task's ids. The oldest past `keep` go."""
        task = self.task
        history = task.history
        delta = write.task is None  # a create takes the whole task at the flush
        if caller_message is not None:
            history.append(caller_message)
            joined = history[-1]
            joined.task_id, joined.context_id = task.id, task.context_id
            if delta:
                write.history.append(joined)  # the task's own copy, which nothing changes later
        if message is not None:
            history.append(message)
            if delta:
                write.history.append(history[-1])
        excess = len(history) - keep
        if excess > 0:
            if self._history_bytes is not None:
                self._history_bytes -= sum(map(a2a_pb2.Message.ByteSize, history[:excess]))
            del history[:excess]
            write.history_kept = keep

    def count_artifact(self, chunk: a2a_pb2.Artifact, append: bool, limit: int) -> None:
        """Count `chunk` into the artifact bytes before it is applied (a chunk that is not appended replaces the
        artifact of its id); past `limit`, TaskLimitError and nothing counted."""
        artifacts = self.task.artifacts
        if self._artifact_bytes is None:
            self._artifact_bytes = sum(map(a2a_pb2.Artifact.ByteSize, artifacts))
        held = self._artifact_bytes + chunk.ByteSize()
        if not append:
            for artifact in artifacts:
                if artifact.artifact_id == chunk.artifact_id:
                    held -= artifact.ByteSize()
                    break
        if held > limit:
            raise TaskLimitError(
                f"task {self.task.id} may hold at most {limit} artifact bytes; this chunk would make {held}"
            )
        self._artifact_bytes = held


def _size_with_ids(message: a2a_pb2.Message, task: a2a_pb2.Task) -> int:
    """The bytes `message` takes once it carries the task's ids, without changing it."""
    size = message.ByteSize()
    if message.task_id != task.id or message.context_id != task.context_id:
        size -= a2a_pb2.Message(task_id=message.task_id, context_id=message.context_id).ByteSize()
        size += a2a_pb2.Message(task_id=task.id, context_id=task.context_id).ByteSize()
    return size
