"""The store interface: what the task manager needs from a place that keeps tasks.

The task manager owns task state and is the only writer. It describes every change to a task as one
`TaskWrite` (a delta, never a whole-task rewrite except at creation) carrying the task's new version,
so a store can refuse out-of-order or concurrent writes (`VersionConflictError`). A write counts as
acknowledged once the awaitable returned by `apply` has resolved: after that it survives a crash.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from a2a_grpc.generated import a2a_pb2


class StoreError(Exception):
    """A store failed in a way the caller cannot fix (I/O, corruption)."""


class StorageFullError(StoreError):
    """The store has no room for a write (a full disk, or a size cap): writes fail until space is freed."""


class VersionConflictError(StoreError):
    """A write's version does not follow the stored version of the task."""


class InvalidPageTokenError(ValueError):
    """A page token that this store did not issue."""


@dataclass(slots=True)
class TaskWrite:
    """One change to one task.

    `version` is the task's version after the change: 1 creates the task from `task` (the whole task,
    serialized when the store takes the write); every later write must carry the stored version + 1
    and may carry several changes: the last status, the history messages and artifact chunks in order.
    """

    task_id: str
    version: int
    owner: str = ""
    task: a2a_pb2.Task | None = None
    status: a2a_pb2.TaskStatus | None = None
    history: list[a2a_pb2.Message] = field(default_factory=list)
    artifacts: list[tuple[a2a_pb2.Artifact, bool]] = field(default_factory=list)  # (chunk, append)


@dataclass(slots=True)
class TaskQuery:
    """ListTasks after validation: every field already checked and defaulted."""

    owner: str
    page_size: int
    context_id: str = ""
    state: int = 0  # a2a_pb2.TaskState; 0 means no filter
    status_after_us: int | None = None  # microseconds since the epoch, inclusive
    page_token: str = ""
    include_artifacts: bool = False


@dataclass(slots=True)
class TaskPage:
    tasks: list[a2a_pb2.Task] = field(default_factory=list)
    next_page_token: str = ""
    total_size: int = 0


class TaskStore(Protocol):
    """Where tasks and push-notification configs live. Every method is safe to call from the event loop."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        """Queue `write`; the future resolves once it is durable. Writes apply in call order.

        Never raises: a failed write fails its future (VersionConflictError, StorageFullError when the
        store has no room left, StoreError, ValueError).
        """
        ...

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        """The task, or None when it does not exist or belongs to another owner."""
        ...

    async def load_task(self, task_id: str, owner: str) -> tuple[a2a_pb2.Task, int] | None:
        """The task and the version of its last applied write, read together (a write that lands between
        two separate reads would pair old content with a newer version); None as for `get_task`."""
        ...

    async def running_tasks(self) -> list[tuple[str, str]]:
        """(task id, owner) of every task stored as SUBMITTED or WORKING."""
        ...

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        """Newest status timestamp first, ties broken by task id (descending)."""
        ...

    async def put_push_config(self, owner: str, config: a2a_pb2.TaskPushNotificationConfig) -> None:
        """Create or replace the config `config.id` of task `config.task_id`."""
        ...

    async def get_push_config(
        self, owner: str, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig | None: ...

    async def list_push_configs(
        self, owner: str, task_id: str, page_size: int, page_token: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        """One page of the task's configs (ordered by config id) and the next page token ("" at the end)."""
        ...

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> bool:
        """True when a config was deleted."""
        ...
