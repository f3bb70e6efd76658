"""The store interface: what the task manager needs from a place that keeps tasks.

The task manager owns task state and is the only writer. It describes every change to a task as one
`TaskWrite` (a delta, never a whole-task rewrite except at creation) carrying the task's new version,
so a store can refuse out-of-order or concurrent writes (`VersionConflictError`). A write counts as
acknowledged once the awaitable returned by `apply` has resolved: after that it survives a crash.

Every change a stream shows (a status update, an artifact chunk) is also an entry of the task's event
log, numbered 1, 2, 3... per task and written with the change: streams, resumed streams and other
replicas read the log, so it is the source of truth for what a subscriber sees. Every store deletes the
log of a task that has been final for a while (`prune_events`): a reader then gets the task instead; and,
later, the task itself with all it holds (`remove_final_tasks`): it is then unknown, as if never created.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from a2a_grpc.errors import StorageUnavailableError, TooManyTasksError
from a2a_grpc.generated import a2a_pb2

# A page of a task's event log ends early at the event whose body brings it to this many bytes.
EVENT_PAGE_BYTES = 4 * 1024 * 1024
# Events `prune_events` deletes per store write, so that other writes go between its batches.
PRUNE_BATCH_EVENTS = 10_000
# Tasks `remove_final_tasks` deletes per store write (each with its history, artifacts, events and push configs).
REMOVE_BATCH_TASKS = 200
# A call refused because the store is unavailable is told to retry this much later (RetryInfo).
STORE_RETRY_SECONDS = 1.0

# Told of each commit a store makes: how long it took (seconds) and how many task writes it carried.
CommitObserver = Callable[[float, int], None]


class StoreError(Exception):
    """A store failed in a way the caller cannot fix (I/O, corruption)."""


class StorageFullError(StoreError):
    """The store has no room for a write (a full disk, or a size cap): writes fail until space is freed."""


class StoreUnavailableError(StoreError, StorageUnavailableError):
    """The store cannot be reached or read right now: its database is stopped or restarting, a connection
    was lost, its disk fails. An A2A error as it is, so a call it reaches ends with UNAVAILABLE, reason
    STORAGE_UNAVAILABLE and a RetryInfo, never INTERNAL. `str()` is the cause, for the server's log; the
    caller gets only `message`."""

    def __init__(self, cause: str) -> None:
        super().__init__("the task store is unavailable; retry later", retry_delay=STORE_RETRY_SECONDS)
        self.cause = cause

    def __str__(self) -> str:
        return self.cause


class StoreInUseError(StoreError):
    """The store's file is already open, in another process or in this one: a SQLite file has one owner at a
    time, since each server takes the tasks it finds running in the file for its own (it fails them at start).
    `holder` is the pid of the process that has it open, when its lock file says."""

    def __init__(self, path: str, holder: int | None) -> None:
        by = f"process {holder}" if holder is not None else "another process"
        super().__init__(
            f"the task store {path} is in use by {by}: one server at a time may use a SQLite file "
            "(stop that one, or give this one another store)"
        )
        self.path = path
        self.holder = holder


class StoreAtCapacityError(StoreError, TooManyTasksError):
    """A new task refused by a store that holds as many tasks as it may, none of them final (the memory store's
    bound): an A2A error as it is, RESOURCE_EXHAUSTED (TOO_MANY_TASKS) with a RetryInfo."""

    def __init__(self, max_tasks: int) -> None:
        super().__init__(
            f"the server holds as many tasks as it may keep ({max_tasks}), none of them finished; retry later",
            metadata={"limit": str(max_tasks)},
            retry_delay=STORE_RETRY_SECONDS,
        )


class VersionConflictError(StoreError):
    """A write's version does not follow the stored version of the task."""


class EventsPrunedError(StoreError):
    """A read of a task's event log from a point the store no longer keeps (it bounds or pruned the log)."""


class InvalidPageTokenError(ValueError):
    """A page token that this store did not issue."""


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One entry of a task's event log."""

    seq: int  # 1, 2, 3... per task, in the order the changes were made
    state: int  # the TaskState a status update sets; 0 for an artifact update
    body: bytes  # the event as an encoded StreamResponse (status_update or artifact_update)


class LoadedTask(NamedTuple):
    """A task with the version of its last applied write and the number of its last event, read together."""

    task: a2a_pb2.Task
    version: int
    seq: int  # 0 while the task has no event


@dataclass(slots=True, eq=False)
class WriteChain:
    """The writes of one live task, each made on top of the one before: once one of them fails, a shared store
    applies none of the later ones (`VersionConflictError`). Their versions alone cannot tell: a write queued
    behind a refused one carries the version that another replica's write, the reason for the refusal, may
    have reached, and would land on top of it. A store marks the chain at the first failure (`failed`)."""

    failed: bool = False


@dataclass(slots=True)
class TaskWrite:
    """One change to one task.

    `version` is the task's version after the change: 1 creates the task from `task` (the whole task,
    serialized when the store takes the write); every later write must carry the stored version + 1
    and may carry several changes: the last status, the history messages and artifact chunks in order,
    and the events that describe them (numbered on from the task's last stored event). With
    `history_kept`, only the newest that many history messages stay stored once the write's are appended.
    A create may carry the `push_config` sent with the task's first message: stored in the same transaction,
    notified from the task's first event. A shared store applies no write of a `chain` that already failed.
    """

    task_id: str
    version: int
    owner: str = ""
    task: a2a_pb2.Task | None = None
    status: a2a_pb2.TaskStatus | None = None
    history: list[a2a_pb2.Message] = field(default_factory=list)
    artifacts: list[tuple[a2a_pb2.Artifact, bool]] = field(default_factory=list)  # (chunk, append)
    events: list[TaskEvent] = field(default_factory=list)
    history_kept: int | None = None
    push_config: a2a_pb2.TaskPushNotificationConfig | None = None
    chain: WriteChain | None = None


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
    # The page ends, with a token after its last task, before a task whose stored bytes would take it past
    # this many (its first task is read whatever its size): a page of big tasks is never read whole to be cut.
    max_bytes: int | None = None


@dataclass(slots=True)
class TaskPage:
    tasks: list[a2a_pb2.Task] = field(default_factory=list)
    next_page_token: str = ""
    total_size: int = 0
    sizes: list[int] = field(default_factory=list)  # each task's stored bytes, when a TaskQuery.max_bytes asked


@dataclass(frozen=True, slots=True)
class PushTarget:
    """A push-notification config with notifications due: its task's events numbered above `delivered`
    have not been delivered to it yet (the task's log is the outbox: a config's cursor is all it adds)."""

    owner: str
    config: a2a_pb2.TaskPushNotificationConfig
    delivered: int  # the last event delivered to this config (or given up on)
    latest: int  # the task's last event
    events: tuple[TaskEvent, ...] = ()  # the first due events, when the claim read them (else read them)


def bounded_page(events: Iterable[TaskEvent], limit: int, max_bytes: int) -> list[TaskEvent]:
    """The first `limit` of `events`, ending early at the one whose body brings the page to `max_bytes`:
    a page always holds an event when there is one."""
    page: list[TaskEvent] = []
    size = 0
    for event in itertools.islice(events, limit):
        page.append(event)
        size += len(event.body)
        if size >= max_bytes:
            break
    return page


def tasks_within(sizes: Iterable[int], most: int, max_bytes: int | None) -> list[int]:
    """The stored bytes of the tasks a page reads, at most `most`, given those of its tasks in order
    (`TaskQuery.max_bytes`; None: no bound, and no sizes); they are read only as far as needed."""
    if max_bytes is None:
        return []
    within: list[int] = []
    held = 0
    for size in itertools.islice(sizes, most):
        held += size
        if within and held > max_bytes:
            break
        within.append(size)
    return within


def page_cut(page: Sequence[TaskEvent], limit: int, max_bytes: int) -> bool:
    """Whether a page read with these bounds may have ended before the log did."""
    return len(page) >= limit or sum(len(event.body) for event in page) >= max_bytes


def check_kept(task_id: str, after: int, page: Sequence[TaskEvent], last: int) -> None:
    """Raise EventsPrunedError unless `page`, read above `after` from a log whose last event is `last`,
    starts with event `after + 1` (or is empty because nothing follows `after`)."""
    first = page[0].seq if page else last + 1
    if after + 1 < first:
        raise EventsPrunedError(f"the log of task {task_id!r} no longer holds event {after + 1}")


class TaskStore(Protocol):
    """Where tasks and push-notification configs live. Every method is safe to call from the event loop.

    `shared` is the store itself, as a `SharedStore`, when several server processes may use it at once (None
    otherwise); such a store's tasks may change under this process at any time. `on_commit`, when set,
    is told of every commit of task writes (from the thread that made it); a store in memory makes none.
    """

    on_commit: CommitObserver | None

    @property
    def shared(self) -> SharedStore | None: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Return once the store has answered a trivial read; raise (StoreError) when it cannot be reached.
        The server's readiness check: the caller bounds it with a timeout."""
        ...

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        """Queue `write`; the future resolves once it is durable. Writes apply in call order.

        Never raises: a failed write fails its future (VersionConflictError, StorageFullError when the
        store has no room left, StoreError, ValueError).
        """
        ...

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        """The task, or None when it does not exist or belongs to another owner."""
        ...

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        """The task with its version and last event number, read together (a write that lands between
        two separate reads would pair old content with a newer version); None as for `get_task`."""
        ...

    async def read_events(
        self, task_id: str, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[TaskEvent]:
        """Up to `limit` events of the task numbered above `after`, in order (the caller checked the owner),
        ending early at the event whose body brings the page to `max_bytes` (`bounded_page`).

        EventsPrunedError when the store no longer holds event `after + 1` (`check_kept`)."""
        ...

    async def prune_events(self, older_than_seconds: float, batch: int = PRUNE_BATCH_EVENTS) -> int:
        """Delete the event logs of the tasks whose final status is older than that, `batch` events per
        write; returns how many events were deleted. The tasks themselves, and their last event's number,
        stay."""
        ...

    async def remove_final_tasks(self, older_than_seconds: float, batch: int = REMOVE_BATCH_TASKS) -> int:
        """Delete the tasks whose final status is older than that, each with its history, artifacts, events and
        push configs, `batch` tasks per write, so that other writes go between; returns how many tasks went.
        A removed task is unknown from then on. A shared store lets one replica at a time remove (a lease):
        on the others this returns 0."""
        ...

    async def running_tasks(self) -> list[tuple[str, str]]:
        """(task id, owner) of every task stored as SUBMITTED or WORKING."""
        ...

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        """Newest status timestamp first, ties broken by task id (descending)."""
        ...

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None = None
    ) -> None:
        """Create or replace the config `config.id` of task `config.task_id`. Notifications are due for the
        task's events numbered above `delivered`: by default above its last event (at creation; a replaced
        config keeps its cursor)."""
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

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        """Up to `limit` configs with notifications due that no claimer holds, now held by `claimer` for
        `lease_seconds` (a claim that is not renewed lapses: another claimer may take the config).
        With `task_ids`, only the configs of those tasks are looked at (each found by its key, not by a
        scan). A store may read up to `events` of each target's due events with it (`PushTarget.events`)."""
        ...

    async def ack_push(self, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
        """Events up to `seq` of the task were delivered to the config (or given up on); the claim is
        renewed. False when `claimer` no longer holds the config (then nothing changes)."""
        ...

    async def release_push(self, task_id: str, config_id: str, claimer: str, delivered: int | None = None) -> None:
        """Give up `claimer`'s hold on the config (its notifications stay due); with `delivered`, move its
        cursor there first, as `ack_push` does (an ack and a release in one write)."""
        ...


class SharedStore(TaskStore, Protocol):
    """What replicas sharing one store coordinate through.

    The replica whose write leaves a task SUBMITTED or WORKING becomes its runner; a write that settles the
    task clears that. Each replica keeps a heartbeat row alive; a running task whose runner's heartbeat is
    older than the lease has lost its agent. Replicas learn of new events and cancel requests from
    notifications while `listening` is True, and must poll (`event_heads`, `take_cancel_requests`) while
    it is False.
    """

    replica_id: str

    @property
    def listening(self) -> bool: ...

    def listen(self, on_event: Callable[[str, int], None], on_cancel: Callable[[], None]) -> None:
        """Start receiving notifications (reconnecting on its own when the connection drops): `on_event(task_id,
        seq)` when a write of another replica stored events up to `seq`, `on_cancel()` when a cancel of a task
        this replica runs was requested (`take_cancel_requests` has it). Both are called on the event loop."""
        ...

    async def heartbeat(self) -> None:
        """Renew this replica's lease on the tasks it runs."""
        ...

    async def expired_runs(self, lease_seconds: float) -> list[tuple[str, str]]:
        """(task id, owner) of running tasks whose runner's heartbeat is older than `lease_seconds`, taken over
        by this replica (it becomes their runner) so that no other replica gets them too."""
        ...

    async def event_heads(self, task_ids: Sequence[str]) -> dict[str, int]:
        """The number of the last event of each of these tasks that exist."""
        ...

    async def request_cancel(self, task_id: str) -> None:
        """Ask the task's runner, wherever it is, to cancel it (a request row and a notification)."""
        ...

    async def take_cancel_requests(self) -> list[str]:
        """Remove and return the pending cancel requests of tasks this replica runs."""
        ...

    async def release(self) -> None:
        """At a graceful shutdown, after this replica's tasks were settled: drop its heartbeat row."""
        ...
