"""An in-process store: nothing survives a restart.

It keeps its own copy of every task and applies each write's delta to it, as the durable stores do:
nothing it holds or hands out is shared with the task manager's live tasks. A copy whose replaced parts
outweigh it is rebuilt (`a2a_grpc.compaction`).

`apply` never raises: it returns an already-completed future, which holds the write's error
(`VersionConflictError`, `StoreAtCapacityError`, or `ValueError` for a create without a task) if it failed.

It holds at most `max_tasks` tasks: a new task past that evicts the task final the longest, and is refused
(`StoreAtCapacityError`) when no task is final; a task not final is never evicted.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from a2a_grpc import compaction
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RUNNING_STATES, TERMINAL_STATES
from a2a_grpc.settings.defaults import MEMORY_STORE_MAX_TASKS
from a2a_grpc.store._codec import (
    decode_config_cursor,
    decode_task_cursor,
    encode_config_cursor,
    encode_task_cursor,
    now_us,
    status_ts_us,
)
from a2a_grpc.store.base import (
    EVENT_PAGE_BYTES,
    PRUNE_BATCH_EVENTS,
    REMOVE_BATCH_TASKS,
    CommitObserver,
    EventsPrunedError,
    LoadedTask,
    PushTarget,
    StoreAtCapacityError,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskWrite,
    VersionConflictError,
    bounded_page,
    check_kept,
    tasks_within,
)
from a2a_grpc.store.memory_listing import Listed, TaskListing


def _done(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    future = loop.create_future()
    future.set_result(None)
    return future


def _failed(loop: asyncio.AbstractEventLoop, error: Exception) -> asyncio.Future[None]:
    future = loop.create_future()
    future.set_exception(error)
    return future


# Each task's event log is bounded to this many bytes of events: memory grows with a task's size, not
# with how often its parts were replaced. A stream that falls further behind restarts from the task.
MAX_LOG_BYTES = 16 * 1024 * 1024

_Stored = TypeVar("_Stored", a2a_pb2.Task, a2a_pb2.Artifact, a2a_pb2.TaskPushNotificationConfig)


@dataclass(slots=True)
class _Entry:
    task: a2a_pb2.Task
    owner: str
    context_id: str
    version: int
    state: int
    ts_us: int
    replaced: int = 0
    rebuild_after: int = compaction.REBUILD_FLOOR
    events: list[TaskEvent] = field(default_factory=list)  # TaskEvents are immutable: kept as written
    log_bytes: int = 0
    seq: int = 0  # the last event's number, kept when the log is pruned

    def sort_key(self) -> tuple[int, str]:
        return self.ts_us, self.task.id

    def listed(self) -> Listed:
        return Listed(self.owner, self.context_id, self.state, self.sort_key())


@dataclass(slots=True)
class _Config:
    owner: str
    config: a2a_pb2.TaskPushNotificationConfig
    delivered: int
    claimed_by: str | None = None
    claimed_until: float = 0.0  # time.monotonic()


class MemoryStore:
    """`max_log_bytes` bounds each task's event log: the oldest events are dropped beyond it. `max_tasks`
    bounds the tasks held (0: no bound)."""

    shared = None  # one process's alone

    def __init__(self, max_log_bytes: int = MAX_LOG_BYTES, max_tasks: int = MEMORY_STORE_MAX_TASKS) -> None:
        self.max_log_bytes = max_log_bytes
        self.max_tasks = max_tasks
        self.on_commit: CommitObserver | None = None
        self._tasks: dict[str, _Entry] = {}
        # A task that leaves the store leaves its listing too: `self._listing.discard(entry.listed())`.
        self._listing = TaskListing()
        self._configs: dict[str, dict[str, _Config]] = {}  # task id -> config id -> config
        # Tasks with a config that may still be due (not caught up with a final task): what a sweep reads.
        self._open: set[str] = set()
        # (final status time, task id) of each task as it became final, oldest first: what removal and eviction
        # take. An entry whose task is gone or was stamped again since is stale, and skipped when reached.
        self._final: list[tuple[int, str]] = []

    async def open(self) -> None:
        pass

    @functools.cached_property
    def _loop(self) -> asyncio.AbstractEventLoop:
        """The loop the store is used on, asked for once: asking costs a system call on Python 3.11."""
        return asyncio.get_running_loop()

    async def close(self) -> None:
        pass

    async def ping(self) -> None:
        """Always reachable: it lives in this process."""

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        entry = self._tasks.get(write.task_id)
        if write.version == 1 and entry is None:
            return self._create(write)
        if entry is None or write.version != entry.version + 1:
            return _failed(self._loop, _conflict(write, entry))
        entry.version = write.version
        if write.status is not None:
            compaction.set_status(entry, write.status)
            self._move(entry, write.status.state, status_ts_us(write.status))
            self._note_final(entry)
        entry.task.history.extend(write.history)
        if write.history_kept is not None and len(entry.task.history) > write.history_kept:
            del entry.task.history[: len(entry.task.history) - write.history_kept]
        for chunk, append in write.artifacts:
            compaction.apply_artifact(entry, chunk, append)
        self._log(entry, write.events)
        if write.events and write.task_id in self._configs:
            self._open.add(write.task_id)
        return _done(self._loop)

    def _create(self, write: TaskWrite) -> asyncio.Future[None]:
        task = write.task
        if task is None:
            return _failed(self._loop, ValueError(f"create write for task {write.task_id!r} has no task"))
        if self.max_tasks and len(self._tasks) >= self.max_tasks and not self._remove_oldest_final(1):
            return _failed(self._loop, StoreAtCapacityError(self.max_tasks))
        status = task.status
        entry = _Entry(_copy(task), write.owner, task.context_id, 1, status.state, status_ts_us(status))
        self._log(entry, write.events)
        self._tasks[write.task_id] = entry
        self._listing.add(entry.listed())
        self._note_final(entry)
        if write.push_config is not None:
            self._put_config(write.owner, write.push_config, 0)
        return _done(self._loop)

    def _move(self, entry: _Entry, state: int, ts_us: int) -> None:
        """Set the task's state and status time, and refile it in the listing when they changed."""
        if (state, ts_us) != (entry.state, entry.ts_us):
            self._listing.discard(entry.listed())
            entry.state, entry.ts_us = state, ts_us
            self._listing.add(entry.listed())

    def _log(self, entry: _Entry, events: list[TaskEvent]) -> None:
        """Append to the task's log; past its bound, drop the oldest events down to half of it."""
        entry.events.extend(events)
        entry.log_bytes += sum(len(event.body) for event in events)
        if events:
            entry.seq = events[-1].seq
        if entry.log_bytes > self.max_log_bytes:
            drop = 0  # the newest event always stays
            while drop < len(entry.events) - 1 and entry.log_bytes > self.max_log_bytes // 2:
                entry.log_bytes -= len(entry.events[drop].body)
                drop += 1
            del entry.events[:drop]

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        entry = self._tasks.get(task_id)
        if entry is None or entry.owner != owner:
            return None
        return _copy(entry.task)

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        entry = self._tasks.get(task_id)
        if entry is None or entry.owner != owner:
            return None
        return LoadedTask(_copy(entry.task), entry.version, entry.seq)

    async def read_events(
        self, task_id: str, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[TaskEvent]:
        return self._page(task_id, after, limit, max_bytes)

    async def prune_events(self, older_than_seconds: float, batch: int = PRUNE_BATCH_EVENTS) -> int:
        """All at once: the memory store has no other writer to let through."""
        cutoff = now_us() - round(older_than_seconds * 1_000_000)
        pruned = 0
        for entry in self._tasks.values():
            if entry.events and entry.state in TERMINAL_STATES and entry.ts_us < cutoff:
                pruned += len(entry.events)
                entry.events = []
                entry.log_bytes = 0
        return pruned

    async def remove_final_tasks(self, older_than_seconds: float, batch: int = REMOVE_BATCH_TASKS) -> int:
        """`batch` tasks a loop turn, the oldest first: calls go between the batches."""
        cutoff = now_us() - round(older_than_seconds * 1_000_000)
        removed = 0
        while True:
            taken = self._remove_oldest_final(batch, before=cutoff)
            removed += taken
            if taken < batch:
                return removed
            await asyncio.sleep(0)

    def _note_final(self, entry: _Entry) -> None:
        if entry.state in TERMINAL_STATES:
            heapq.heappush(self._final, (entry.ts_us, entry.task.id))

    def _remove_oldest_final(self, limit: int, before: int | None = None) -> int:
        """Remove up to `limit` final tasks, those final the longest first (and only those final `before`, when
        given); returns how many went."""
        removed = 0
        while removed < limit and self._final and (before is None or self._final[0][0] < before):
            ts_us, task_id = heapq.heappop(self._final)
            entry = self._tasks.get(task_id)
            if entry is not None and entry.ts_us == ts_us and entry.state in TERMINAL_STATES:
                self._remove(entry)
                removed += 1
        return removed

    def _remove(self, entry: _Entry) -> None:
        """Delete a task and all it holds: its entry, its place in the listing, its push configs."""
        task_id = entry.task.id
        del self._tasks[task_id]
        self._listing.discard(entry.listed())
        self._configs.pop(task_id, None)
        self._open.discard(task_id)

    async def running_tasks(self) -> list[tuple[str, str]]:
        return [(task_id, e.owner) for task_id, e in self._tasks.items() if e.state in RUNNING_STATES]

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        cursor = decode_task_cursor(query.page_token) if query.page_token else None
        found = self._listing.after(query, cursor, query.page_size + 1)  # one more: whether a next page follows
        entries = [self._tasks[task_id] for _, task_id in found.keys]
        total = found.total
        sizes = tasks_within(
            (_stored_bytes(e.task, query.include_artifacts) for e in entries), query.page_size, query.max_bytes
        )
        page = entries[: len(sizes) if query.max_bytes is not None else query.page_size]
        token = encode_task_cursor(*page[-1].sort_key()) if len(entries) > len(page) and page else ""
        tasks = [_copy(e.task) if query.include_artifacts else _without_artifacts(e.task) for e in page]
        return TaskPage(tasks=tasks, next_page_token=token, total_size=total, sizes=sizes)

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None = None
    ) -> None:
        self._put_config(owner, config, delivered)

    def _put_config(self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None) -> None:
        configs = self._configs.setdefault(config.task_id, {})
        existing = configs.get(config.id)
        if existing is None:
            cursor = self._seq(config.task_id) if delivered is None else delivered
            configs[config.id] = _Config(owner, _copy(config), cursor)
        else:
            existing.owner, existing.config = owner, _copy(config)
            if delivered is not None:
                existing.delivered = delivered
        self._update_open(config.task_id)

    async def get_push_config(
        self, owner: str, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig | None:
        found = self._config(task_id, config_id)
        if found is None or found.owner != owner:
            return None
        return _copy(found.config)

    async def list_push_configs(
        self, owner: str, task_id: str, page_size: int, page_token: str
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        after = decode_config_cursor(page_token) if page_token else None
        configs = self._configs.get(task_id, {})
        ids = sorted(
            config_id
            for config_id, found in configs.items()
            if found.owner == owner and (after is None or config_id > after)
        )
        page = ids[:page_size]
        token = encode_config_cursor(page[-1]) if len(ids) > len(page) and page else ""
        return [_copy(configs[config_id].config) for config_id in page], token

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> bool:
        found = self._config(task_id, config_id)
        if found is None or found.owner != owner:
            return False
        configs = self._configs[task_id]
        del configs[config_id]
        if not configs:
            del self._configs[task_id]
        self._update_open(task_id)
        return True

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        now = time.monotonic()
        targets: list[PushTarget] = []
        for task_id in self._open if task_ids is None else task_ids:
            latest = self._seq(task_id)
            for found in self._configs.get(task_id, {}).values():
                if len(targets) >= limit:
                    return targets
                if latest > found.delivered and (found.claimed_by is None or found.claimed_until < now):
                    found.claimed_by, found.claimed_until = claimer, now + lease_seconds
                    due = self._due_events(task_id, found.delivered, events)
                    targets.append(PushTarget(found.owner, _copy(found.config), found.delivered, latest, due))
        return targets

    async def ack_push(self, task_id: str, config_id: str, seq: int, claimer: str, lease_seconds: float) -> bool:
        found = self._config(task_id, config_id)
        if found is None or found.claimed_by != claimer:
            return False
        found.delivered = max(found.delivered, seq)
        found.claimed_until = time.monotonic() + lease_seconds
        self._update_open(task_id)
        return True

    async def release_push(self, task_id: str, config_id: str, claimer: str, delivered: int | None = None) -> None:
        found = self._config(task_id, config_id)
        if found is not None and found.claimed_by == claimer:
            found.claimed_by = None
            if delivered is not None:
                found.delivered = max(found.delivered, delivered)
                self._update_open(task_id)

    def _update_open(self, task_id: str) -> None:
        """Keep the task among those a sweep reads while a config of it may still be due."""
        entry = self._tasks.get(task_id)
        configs = self._configs.get(task_id)
        if configs and (
            entry is None
            or entry.state not in TERMINAL_STATES
            or any(found.delivered < entry.seq for found in configs.values())
        ):
            self._open.add(task_id)
        elif task_id in self._open:
            self._open.discard(task_id)
            if not self._open:  # a set keeps its largest table, which iterating it walks: start small again
                self._open = set()

    def _config(self, task_id: str, config_id: str) -> _Config | None:
        return self._configs.get(task_id, {}).get(config_id)

    def _page(self, task_id: str, after: int, limit: int, max_bytes: int) -> list[TaskEvent]:
        entry = self._tasks.get(task_id)
        if entry is None:
            return []
        start = bisect.bisect_right(entry.events, after, key=_event_seq)
        page = bounded_page(entry.events[start : start + limit], limit, max_bytes)
        check_kept(task_id, after, page, entry.seq)
        return page

    def _due_events(self, task_id: str, after: int, limit: int) -> tuple[TaskEvent, ...]:
        """Up to `limit` events after `after` (a page); none when the log no longer holds the first of them."""
        if not limit:
            return ()
        try:
            return tuple(self._page(task_id, after, limit, EVENT_PAGE_BYTES))
        except EventsPrunedError:
            return ()

    def _seq(self, task_id: str) -> int:
        entry = self._tasks.get(task_id)
        return 0 if entry is None else entry.seq


def _conflict(write: TaskWrite, entry: _Entry | None) -> VersionConflictError:
    stored = "absent" if entry is None else f"at version {entry.version}"
    return VersionConflictError(f"task {write.task_id!r} is {stored}; write carries version {write.version}")


def _event_seq(event: TaskEvent) -> int:
    return event.seq


def _stored_bytes(task: a2a_pb2.Task, include_artifacts: bool) -> int:
    """A listed task's size, measured a message (and an artifact) at a time: upb's ByteSize serializes."""
    size = task.status.ByteSize() + task.metadata.ByteSize() + sum(map(a2a_pb2.Message.ByteSize, task.history))
    return size + sum(map(a2a_pb2.Artifact.ByteSize, task.artifacts)) if include_artifacts else size


def _without_artifacts(task: a2a_pb2.Task) -> a2a_pb2.Task:
    """A copy of `task` without its artifacts."""
    copy = a2a_pb2.Task(id=task.id, context_id=task.context_id, history=task.history)
    if task.HasField("status"):
        copy.status.CopyFrom(task.status)
    if task.HasField("metadata"):
        copy.metadata.CopyFrom(task.metadata)
    return copy


def _copy(message: _Stored) -> _Stored:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy
