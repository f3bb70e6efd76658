"""The write path of live tasks: each change is applied to the live Task, collected into the task's pending
write, published to its subscribers as the task's next event, and stored at the end of the event-loop turn.

A write the store refuses drops the live task (the next request reloads the stored one). A full store, or
one that cannot be reached, is reported once, from the first write it refuses to the next one it takes;
the tasks whose agent it stopped are failed then. Push-config changes are writes too, and count the same way.
With tracing on, a write opened for a traced run is an `a2a.store.write` span of the run's trace.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from a2a_grpc.call import owner_call
from a2a_grpc.errors import A2AError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import TERMINAL_STATES
from a2a_grpc.store.base import (
    StorageFullError,
    StoreError,
    StoreUnavailableError,
    TaskEvent,
    TaskStore,
    TaskWrite,
    VersionConflictError,
)
from a2a_grpc.tasks.live import SETTLED_STATES, LiveTask, copy_artifact, stamp_now
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.rules import changed_meanwhile, storage_unavailable

if TYPE_CHECKING:
    from a2a_grpc.telemetry.tracing import TraceContext, WriteSpan

log = logging.getLogger(__name__)

T = TypeVar("T")


class TaskWriter:
    """Applies, stores and publishes the changes of live tasks.

    `on_storage_writable(False)` is called when the store turns out to be full, `(True)` when it takes a
    write again; `on_push_due(task_id)` when a task with a push config has new events to deliver."""

    def __init__(
        self,
        store: TaskStore,
        tasks: LiveTasks,
        on_storage_writable: Callable[[bool], None] | None,
        on_push_due: Callable[[str], None] | None,
        max_history: int,
    ) -> None:
        self.store = store
        self._max_history = max_history
        self._tasks = tasks
        self._on_storage_writable = on_storage_writable
        self._on_push_due = on_push_due
        self._refusing: set[type[StoreError]] = set()  # the kinds of outage refusing writes now
        self._unstored: dict[str, str] = {}  # task id -> owner, of tasks left running by a refused write
        self._recoveries: set[asyncio.Future[None]] = set()
        # Tasks given a push config through this process and not final yet: their stored events wake the
        # push worker at once (the worker's sweep finds the others).
        self._pushed: set[str] = set()

    @functools.cached_property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the tasks live on, asked for once: asking costs a system call on Python 3.11."""
        return asyncio.get_running_loop()

    # ---- changes of a live task --------------------------------------------------------------

    def set_status(
        self,
        live: LiveTask,
        state: a2a_pb2.TaskState,
        message: a2a_pb2.Message | None,
        user_message: a2a_pb2.Message | None = None,
    ) -> None:
        """Apply, persist and publish a new status; its message (and a user message) join the history."""
        write = self.pending_write(live)
        task = live.task
        response = a2a_pb2.StreamResponse()  # the event, built in place: the status is its own
        event = response.status_update
        event.task_id, event.context_id = task.id, task.context_id
        status = event.status
        status.state = state
        stamp_now(status.timestamp)
        delta = write.task is None  # a create takes the whole task at the flush
        if user_message is not None:
            task.history.append(user_message)
            if delta:
                write.history.append(task.history[-1])  # the task's own copy, which nothing changes later
        if message is not None:
            message.task_id = task.id
            message.context_id = task.context_id
            status.message.CopyFrom(message)
            task.history.append(message)
            if delta:
                write.history.append(task.history[-1])
        excess = len(task.history) - self._max_history
        if excess > 0:
            del task.history[:excess]
            write.history_kept = self._max_history
        live.set_status(status)
        write.status = status
        self._publish(live, write, response, state)
        if state in TERMINAL_STATES:
            for subscriber in live.subscribers:
                subscriber.close()
            live.subscribers.clear()

    def add_artifact(self, live: LiveTask, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        """Apply, persist and publish an artifact chunk."""
        task = live.task
        write = self.pending_write(live)
        if write.task is None:  # a delta keeps the chunk as published, whatever the agent does with it later
            write.artifacts.append((copy_artifact(artifact), append))
        live.apply_artifact(artifact, append)
        response = a2a_pb2.StreamResponse()  # the event, built in place: one copy of the chunk
        event = response.artifact_update
        event.task_id, event.context_id = task.id, task.context_id
        event.artifact.CopyFrom(artifact)
        event.append, event.last_chunk = append, last_chunk
        self._publish(live, write, response, 0)

    def pending_write(self, live: LiveTask) -> TaskWrite:
        """The write collecting this task's changes of the current event-loop turn, opened before a
        change is applied (the first one shows the task, and a stream's snapshot precedes it).

        Changes made in one turn (a new task, its artifact and its completion, say) reach the store
        as one versioned write at the end of the turn; `live.last_write` resolves once it is durable.
        """
        write = live.pending
        if write is None:
            run = live.run
            if not live.shown and run is not None:
                run.show()
            live.version += 1
            write = live.pending = TaskWrite(live.task.id, live.version, owner=live.owner, chain=live.chain)
            if live.version == 1:
                write.task = live.task  # a create: the task as it stands at the flush holds every change
                write.push_config, live.push_config = live.push_config, None
            loop = self.loop
            live.last_write = loop.create_future()
            loop.call_soon(self._flush, live, run.trace if run is not None else None)
        return write

    def _publish(self, live: LiveTask, write: TaskWrite, response: a2a_pb2.StreamResponse, state: int) -> None:
        """Add the change as the task's next event: stored with the write, and pushed to every subscriber."""
        live.seq += 1
        event = TaskEvent(live.seq, state, response.SerializeToString())
        write.events.append(event)
        for subscriber in live.subscribers:
            subscriber.push(event, live.last_write)

    # ---- the store's answer ------------------------------------------------------------------

    def flush(self, live: LiveTask, trace: TraceContext | None) -> None:
        """Hand the task's pending write, if any, to the store now rather than at the end of the turn."""
        if live.pending is not None:
            self._flush(live, trace)

    def _flush(self, live: LiveTask, trace: TraceContext | None) -> None:
        """Hand the task's pending write to the store, unless `flush` did; `trace` is the run's, when the write
        was opened (else the run's now: a resumed task's message is written before its run starts)."""
        write, durable = live.pending, live.last_write
        if write is None:
            return
        live.pending = None
        assert durable is not None
        if trace is None and live.run is not None:
            trace = live.run.trace
        span = trace.tracing.store_write(trace, write) if trace is not None else None
        stored = self.store.apply(write)
        created_pushed = write.push_config is not None
        if stored.done():  # an in-memory store: no need to wait for another loop turn
            self._stored(live, durable, stored, span, created_pushed)
        else:
            stored.add_done_callback(lambda stored: self._stored(live, durable, stored, span, created_pushed))

    def _stored(
        self,
        live: LiveTask,
        durable: asyncio.Future[None],
        stored: asyncio.Future[None],
        span: WriteSpan | None,
        created_pushed: bool,
    ) -> None:
        """`created_pushed`: the write created the task with a push config, which from now on is notified."""
        error = stored.exception()
        if span is not None:
            span.end(error)
        if error is not None:
            error = self._write_failed(live, error)
        elif self._refusing:
            self._storage_accepted()
        if error is None and created_pushed:
            self._pushed.add(live.task.id)
        if error is None and live.task.id in self._pushed and self._on_push_due is not None:
            self._on_push_due(live.task.id)
            if live.state in TERMINAL_STATES:
                self._pushed.discard(live.task.id)
        if durable.done():
            return
        if error is None:
            durable.set_result(None)
        else:
            durable.set_exception(error)
            durable.exception()  # logged by _write_failed: asyncio need not log it again when nobody waits

    def _write_failed(self, live: LiveTask, error: BaseException) -> BaseException:
        """The store refused or lost a write: the live task no longer matches what is stored, so it is
        dropped (the next request reloads the stored task) and its run, if any, is stopped.

        Returns the error that callers waiting on the write get: every later write of the task fails
        too (the stored version stays behind; when another replica's write moved it on, the store refuses
        the rest of the live task's `chain`), and its callers get the first failure's error."""
        if live.write_error is not None:
            return live.write_error
        if isinstance(error, VersionConflictError) and self.store.shared:
            log.warning("task %s was changed by another replica meanwhile: %s", live.task.id, error)
            error = changed_meanwhile(live.task.id)
        elif isinstance(error, StorageFullError | StoreUnavailableError):
            self._storage_refused(error)
            if live.version > 1:  # stored before: it would stay running with no agent behind it
                self._unstored[live.task.id] = live.owner
            error = error if isinstance(error, StoreUnavailableError) else storage_unavailable()
        else:
            log.error("could not persist task %s: %s", live.task.id, error)
        live.write_error = error
        self._tasks.forget(live)
        run, live.run = live.run, None  # the run is over: it can record nothing more
        if run is not None and run.runner is not None:
            run.runner.cancel()
        return error

    # ---- push notification configs -----------------------------------------------------------

    async def put_push_config(
        self, owner: str, config: a2a_pb2.TaskPushNotificationConfig, delivered: int | None, *, final: bool
    ) -> None:
        """Store a config; unless its task is `final` (no more events), its stored events wake the push
        worker at once from now on."""
        await self._write_config(self.store.put_push_config(owner, config, delivered))
        if not final:
            self._pushed.add(config.task_id)
        if self._on_push_due is not None:
            self._on_push_due(config.task_id)

    async def delete_push_config(self, owner: str, task_id: str, config_id: str) -> None:
        await self._write_config(self.store.delete_push_config(owner, task_id, config_id))

    async def _write_config(self, write: Awaitable[T]) -> T:
        """A push-config write: a full or unavailable store answers UNAVAILABLE and counts as for task writes."""
        try:
            result = await write
        except StorageFullError as error:
            self._storage_refused(error)
            raise storage_unavailable() from None
        except StoreUnavailableError as error:
            self._storage_refused(error)
            raise
        if self._refusing:
            self._storage_accepted()
        return result

    # ---- a full store ------------------------------------------------------------------------

    def _storage_refused(self, error: StorageFullError | StoreUnavailableError) -> None:
        """Logged once per outage of each kind, from the first write refused for want of space, or because the
        store could not be reached, to the next one stored. A full store also turns readiness NOT_SERVING (an
        unreachable one does that by itself: the server's readiness check reads it)."""
        kind = type(error)
        if kind in self._refusing:
            return
        self._refusing.add(kind)
        if isinstance(error, StorageFullError):
            log.error("the task store is full; writes fail with UNAVAILABLE until one succeeds again: %s", error)
            if self._on_storage_writable is not None:
                self._on_storage_writable(False)
        else:
            log.warning("the task store cannot be reached; writes fail with UNAVAILABLE until it answers: %s", error)

    def _storage_accepted(self) -> None:
        self._refusing.clear()
        log.warning("the task store accepts writes again")
        if self._on_storage_writable is not None:
            self._on_storage_writable(True)
        if self._unstored:
            unstored, self._unstored = self._unstored, {}
            recovery = asyncio.ensure_future(self._fail_unstored(unstored))
            self._recoveries.add(recovery)
            recovery.add_done_callback(self._recoveries.discard)

    async def _fail_unstored(self, unstored: dict[str, str]) -> None:
        """Fail the tasks whose agent was stopped when the store could not take their writes: stored as
        still running, they would otherwise wait for an agent that is gone until the next restart."""
        for task_id, owner in unstored.items():
            try:
                live = await self._tasks.load(task_id, owner_call(owner))
            except A2AError:
                continue
            if live.run is None and live.state not in SETTLED_STATES:
                message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
                message.parts.add(text="The task could not be stored: the task store was full or out of reach.")
                self.set_status(live, a2a_pb2.TASK_STATE_FAILED, message)
            self._tasks.release(live)

    async def finish_recoveries(self) -> None:
        """Wait until the tasks left running by a full store are failed (at shutdown)."""
        if self._recoveries:
            await asyncio.gather(*self._recoveries, return_exceptions=True)
