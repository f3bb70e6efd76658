"""A task being worked on or watched: its authoritative Task object, its subscribers, its pending write."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from google.protobuf import timestamp_pb2

from a2a_grpc import compaction
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.store.base import TaskWrite, WriteChain
from a2a_grpc.tasks.subscriber import Subscriber, wait_durable

if TYPE_CHECKING:
    from a2a_grpc.tasks.run import TaskRun

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


class LiveTask:
    """A task that is being worked on or watched: the authoritative Task object and its listeners.

    `version` is that of the last write handed to the store, `seq` the number of the last event of its
    log; version 0 means no write yet: the task of a new
    message is not shown to anyone, nor stored, until its agent first publishes something (or the
    caller asked for it at once), so that an agent may answer with a Message instead.

    Status and artifact changes go through `set_status` and `apply_artifact`, which may swap `task` for
    a rebuilt copy (`a2a_grpc.compaction`): read `task` afresh rather than keep it.
    """

    __slots__ = (
        "artifact_bytes",
        "chain",
        "last_write",
        "owner",
        "pending",
        "push_config",
        "rebuild_after",
        "replaced",
        "run",
        "seq",
        "subscribers",
        "task",
        "version",
        "write_error",
    )

    def __init__(self, task: a2a_pb2.Task, owner: str, version: int, seq: int = 0) -> None:
        self.task = task
        self.seq = seq
        self.replaced = 0
        self.rebuild_after = compaction.REBUILD_FLOOR
        self.owner = owner
        self.version = version
        self.subscribers: list[Subscriber] = []
        self.run: TaskRun | None = None
        self.pending: TaskWrite | None = None
        self.chain = WriteChain()  # the writes made on top of the version loaded (`WriteChain`)
        self.push_config: a2a_pb2.TaskPushNotificationConfig | None = None  # stored with the task's create
        self.last_write: asyncio.Future[None] | None = None
        self.write_error: BaseException | None = None  # what callers got for the first write that failed
        self.artifact_bytes: int | None = None  # counted from the task's artifacts when first needed

    def artifact_bytes_with(self, chunk: a2a_pb2.Artifact, append: bool) -> int:
        """The bytes the task's artifacts would take with `chunk` applied (a chunk that is not appended
        replaces the artifact of its id)."""
        if self.artifact_bytes is None:
            self.artifact_bytes = sum(artifact.ByteSize() for artifact in self.task.artifacts)
        held = self.artifact_bytes
        if not append:
            for artifact in self.task.artifacts:
                if artifact.artifact_id == chunk.artifact_id:
                    held -= artifact.ByteSize()
                    break
        return held + chunk.ByteSize()

    @property
    def state(self) -> int:
        return self.task.status.state

    @property
    def shown(self) -> bool:
        return self.version > 0

    def set_status(self, status: a2a_pb2.TaskStatus) -> None:
        if compaction.set_status(self, status):
            self._rebuilt()

    def apply_artifact(self, chunk: a2a_pb2.Artifact, append: bool) -> None:
        if compaction.apply_artifact(self, chunk, append):
            self._rebuilt()

    def _rebuilt(self) -> None:
        pending = self.pending
        if pending is not None and pending.task is not None:  # a create write takes the task as it is at the flush
            pending.task = self.task

    async def durable(self) -> None:
        await wait_durable(self.last_write)

    async def durable_task(self) -> a2a_pb2.Task:
        """The task as far as it is stored, for an answer: nothing in it a crash could still take back. The task
        once the write of its last change is durable; if the agent changed it meanwhile, the task as it stood
        then, once that newer write is durable too (changes made after that are not in it)."""
        write, version = self.last_write, self.version
        await wait_durable(write)  # raises the write's error, if it failed; done already: never suspends
        if self.version == version:  # nothing changed meanwhile: all of it is stored
            return self.task
        shown = copy_task(self.task)  # the agent went on: show where it stands once that is stored too
        await wait_durable(self.last_write)
        return shown


@dataclass(frozen=True, slots=True)
class Subscription:
    """A stream's start on a task: the task as the stream shows it first, the number of the last event
    that task includes, the write it must wait for, and the subscriber that yields the events after it."""

    snapshot: a2a_pb2.Task
    seq: int
    written: asyncio.Future[None] | None
    subscriber: Subscriber
    live: LiveTask


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
