"""The store side of the live tasks' writes: each machine (`TaskMachine`) collects a turn's changes of its task
into one pending write and hands it here; the writer stores it and gives the machine the store's answer.

A write the store refuses drops the live task (the next request reloads the stored one). A full store, or
one that cannot be reached, is reported once, from the first write it refuses to the next one it takes;
the tasks whose agent it stopped are failed then. Push-config changes are writes too, and count the same way.
With tracing on, a write opened for a traced run is an `a2a.store.write` span of the run's trace.
"""

from __future__ import annotations

import asyncio
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
    StoreAtCapacityError,
    StoreError,
    StoreUnavailableError,
    TaskStore,
    TaskWrite,
    VersionConflictError,
)
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.machine import TaskMachine
from a2a_grpc.tasks.phase import Phase
from a2a_grpc.tasks.rules import changed_meanwhile, storage_unavailable

if TYPE_CHECKING:
    from a2a_grpc.trace_context import TraceContext, WriteSpan

log = logging.getLogger(__name__)

T = TypeVar("T")


class TaskWriter:
    """Stores the writes of live tasks and push configs, and reports the store's outages.

    `on_storage_writable(False)` is called when the store turns out to be full, `(True)` when it takes a
    write again; `on_push_due(task_id)` when a task with a push config has new events to deliver."""

    def __init__(
        self,
        store: TaskStore,
        tasks: LiveTasks,
        on_storage_writable: Callable[[bool], None] | None,
        on_push_due: Callable[[str], None] | None,
    ) -> None:
        self.store = store
        self._tasks = tasks
        self._on_storage_writable = on_storage_writable
        self._on_push_due = on_push_due
        self._refusing: set[type[StoreError]] = set()  # the kinds of outage refusing writes now
        self._unstored: dict[str, str] = {}  # task id -> owner, of tasks left running by a refused write
        self._recoveries: set[asyncio.Future[None]] = set()
        # Tasks given a push config through this process and not final yet: their stored events wake the
        # push worker at once (the worker's sweep finds the others).
        self._pushed: set[str] = set()

    # ---- the store's answer ------------------------------------------------------------------

    def write(
        self, machine: TaskMachine, write: TaskWrite, durable: asyncio.Future[None], trace: TraceContext | None
    ) -> None:
        """Hand a machine's write to the store; `durable` resolves with the store's answer (`TaskMachine.stored`)."""
        span = trace.store_write(write.task_id, write.version, len(write.events)) if trace is not None else None
        stored = self.store.apply(write)
        created_pushed = write.push_config is not None
        if stored.done():  # an in-memory store: no need to wait for another loop turn
            self._stored(machine, durable, stored, span, created_pushed)
        else:
            stored.add_done_callback(lambda stored: self._stored(machine, durable, stored, span, created_pushed))

    def _stored(
        self,
        machine: TaskMachine,
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
            if machine.write_error is None:
                machine.write_failed(self._refusal(machine, error))
            error = machine.write_error
        elif self._refusing:
            self._storage_accepted()
        if error is None and created_pushed:
            self._pushed.add(machine.task.id)
        if error is None and machine.task.id in self._pushed and self._on_push_due is not None:
            self._on_push_due(machine.task.id)
            if machine.state in TERMINAL_STATES:
                self._pushed.discard(machine.task.id)
        machine.stored(durable, error)

    def _refusal(self, machine: TaskMachine, error: BaseException) -> BaseException:
        """What callers of the task's writes get for the first write of it the store refused or lost (every
        later one fails too: the stored version stays behind; when another replica's write moved it on, the
        store refuses the rest of the task's `chain`); logged, and counted when the store is full or gone."""
        if isinstance(error, VersionConflictError) and self.store.shared is not None:
            log.warning("task %s was changed by another replica meanwhile: %s", machine.task.id, error)
            error = changed_meanwhile(machine.task.id)
        elif isinstance(error, StorageFullError | StoreUnavailableError):
            self._storage_refused(error)
            if machine.version > 1:  # stored before: it would stay running with no agent behind it
                self._unstored[machine.task.id] = machine.owner
            error = error if isinstance(error, StoreUnavailableError) else storage_unavailable()
        elif not isinstance(error, StoreAtCapacityError):  # a limit the caller is told of, as a rate limit is
            log.error("could not persist task %s: %s", machine.task.id, error)
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
                machine = await self._tasks.load(task_id, owner_call(owner))
            except A2AError:
                continue
            if machine.phase is Phase.IDLE:  # no run here, not settled
                message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
                message.parts.add(text="The task could not be stored: the task store was full or out of reach.")
                machine.conclude(a2a_pb2.TASK_STATE_FAILED, message)
            self._tasks.release(machine)

    async def finish_recoveries(self) -> None:
        """Wait until the tasks left running by a full store are failed (at shutdown)."""
        if self._recoveries:
            await asyncio.gather(*self._recoveries, return_exceptions=True)
