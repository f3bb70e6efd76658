"""The task manager: owns task state, runs the agent, persists every change and fans events out.

Data path of a message: the servicer calls `submit`, which takes the message into a new or existing
task and starts the agent in its own asyncio task, so a client that goes away never cancels the work.
Every event the agent publishes is applied to the live Task, written to the store as a delta, and
pushed to each subscriber of the task in order. Callers wait on the run (`TaskRun.settled`) and on
the last write (`durable`) before they acknowledge anything. Every read goes through here too, so
that what a caller may see is decided in one place (`check_visible`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from a2a_grpc.agent import AgentExecutor, EventPublisher, PublisherError, RequestContext
from a2a_grpc.call import CallContext
from a2a_grpc.errors import (
    A2AError,
    InvalidRequestError,
    TaskChangedError,
    TaskNotCancelableError,
    UnavailableError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import INTERRUPTED_STATES, RUNNING_STATES, STREAM_AFTER_HEADER, TERMINAL_STATES
from a2a_grpc.store import page_token_after
from a2a_grpc.store.base import (
    InvalidPageTokenError,
    SharedStore,
    StorageFullError,
    StoreError,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskStore,
    TaskWrite,
    VersionConflictError,
)
from a2a_grpc.tasks.live import (
    SETTLED_STATES,
    LiveTask,
    Subscription,
    TaskState,
    copy_artifact,
    copy_task,
    stamp_now,
    task_view,
)
from a2a_grpc.tasks.replicas import LEASE_SECONDS, POLL_SECONDS, ReplicaKeeper
from a2a_grpc.tasks.rules import (
    bad_page_token,
    changed_meanwhile,
    check_resumable,
    check_visible,
    config_not_found,
    not_found,
    stopped_message,
    storage_unavailable,
)
from a2a_grpc.tasks.run import TaskRun
from a2a_grpc.tasks.subscriber import SUBSCRIBER_BUFFER_BYTES, Subscriber, TaskLog, wait_durable

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long CancelTask waits for the agent's own cancel handler before canceling the task itself.
CANCEL_GRACE_SECONDS = 5.0
# How much longer a cancel routed to another replica waits for that replica to answer.
ROUTED_CANCEL_MARGIN_SECONDS = 2.0


class TaskManager:
    """`on_storage_writable(False)` is called when the store turns out to be full, `(True)` when it
    takes a write again."""

    def __init__(
        self,
        store: TaskStore,
        executor: AgentExecutor,
        on_storage_writable: Callable[[bool], None] | None = None,
        subscriber_buffer_bytes: int = SUBSCRIBER_BUFFER_BYTES,
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        on_push_due: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self._on_push_due = on_push_due
        self._replicas = (
            ReplicaKeeper(
                cast(SharedStore, store),
                watched_tasks=self._watched_elsewhere,
                note_events=self._note_events,
                take_cancels=self._take_cancel_requests,
                fail_expired=self._fail_expired,
                lease_seconds=lease_seconds,
                poll_seconds=poll_seconds,
            )
            if store.shared
            else None
        )
        self.executor = executor
        self.subscriber_buffer_bytes = subscriber_buffer_bytes
        self._live: dict[str, LiveTask] = {}
        self._runs: set[asyncio.Task[None]] = set()
        self._on_storage_writable = on_storage_writable
        self._storage_full = False
        self._unstored: dict[str, str] = {}  # task id -> owner, of tasks left running by a refused write
        self._recoveries: set[asyncio.Future[None]] = set()
        self._closing = False
        # Tasks given a push config through this process and not final yet: their stored events wake the
        # push worker at once (the worker's sweep finds the others).
        self._pushed: set[str] = set()

    # ---- reads -------------------------------------------------------------------------------

    async def get_task(self, task_id: str, call: CallContext) -> a2a_pb2.Task:
        """The task as far as it is durable: nothing a crash could still take back."""
        live = self._live.get(task_id)
        if live is not None and self._current(live):
            check_visible(task_id, live.owner, call, live.shown)
            write = live.last_write
            if write is None or write.done():
                return live.task
            snapshot = copy_task(live.task)
            await wait_durable(write)
            return snapshot
        task = await self.store.get_task(task_id, call.principal)
        if task is None:
            raise not_found(task_id)
        return task

    async def list_tasks(
        self, query: TaskQuery, call: CallContext, history_length: int | None, max_bytes: int
    ) -> TaskPage:
        """One page of the caller's tasks (the query's owner is the caller, whatever it said), as responses
        show them; a page whose tasks pass `max_bytes` ends early, and the next one starts after its last."""
        try:
            page = await self.store.list_tasks(dataclasses.replace(query, owner=call.principal))
        except InvalidPageTokenError:
            raise bad_page_token() from None
        shown = TaskPage(next_page_token=page.next_page_token, total_size=page.total_size)
        size = 0
        for task in page.tasks:
            view = task_view(task, history_length, query.include_artifacts)
            size += view.ByteSize()
            if size > max_bytes and shown.tasks:
                shown.next_page_token = page_token_after(shown.tasks[-1])
                break
            shown.tasks.append(view)
        return shown

    def _current(self, live: LiveTask) -> bool:
        """Whether a live task is known to match the store: always in one process; with replicas, only
        while this one runs it or has a write of it in flight (any replica may write it otherwise)."""
        if not self.store.shared or live.run is not None:
            return True
        write = live.last_write
        return write is not None and not write.done()

    async def _live_task(self, task_id: str, call: CallContext) -> LiveTask:
        """The live entry of a task, loaded from the store if nobody works on or watches it here (and
        reloaded when another replica may have changed it).

        A caller that loads one and then refuses the request hands it back with `_release`.
        """
        live = self._live.get(task_id)
        if live is None or not self._current(live):
            loaded = await self.store.load_task(task_id, call.principal)
            live = self._live.get(task_id)  # another call may have loaded it meanwhile
            if live is not None and loaded is not None and not self._current(live) and loaded.version > live.version:
                live.task, live.version, live.seq = loaded
                live.replaced = 0
            elif live is None:
                if loaded is None:
                    raise not_found(task_id)
                task, version, seq = loaded
                live = self._live[task_id] = LiveTask(task, call.principal, version, seq)
        check_visible(task_id, live.owner, call, live.shown)
        return live

    # ---- push notification configs -------------------------------------------------------------

    async def put_push_config(
        self, config: a2a_pb2.TaskPushNotificationConfig, call: CallContext, *, from_start: bool = False
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Create or replace a config of a task the caller sees; a config without an id gets one. It is
        notified of the task's events from now on, or `from_start` of every one (a config sent with the
        message that created the task, stored once the task is shown)."""
        await self.get_task(config.task_id, call)
        config.id = config.id or new_id()
        delivered = 0 if from_start else None
        await self._write_config(self.store.put_push_config(call.principal, config, delivered))
        self._pushed.add(config.task_id)
        if self._on_push_due is not None:
            self._on_push_due(config.task_id)
        return config

    async def get_push_config(
        self, task_id: str, config_id: str, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        await self.get_task(task_id, call)
        config = await self.store.get_push_config(call.principal, task_id, config_id)
        if config is None:
            raise config_not_found(task_id, config_id)
        return config

    async def list_push_configs(
        self, task_id: str, page_size: int, page_token: str, call: CallContext
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        await self.get_task(task_id, call)
        try:
            return await self.store.list_push_configs(call.principal, task_id, page_size, page_token)
        except InvalidPageTokenError:
            raise bad_page_token() from None

    async def delete_push_config(self, task_id: str, config_id: str, call: CallContext) -> None:
        """Idempotent: a config that is already gone counts as deleted (the task must still be the caller's)."""
        await self.get_task(task_id, call)
        await self._write_config(self.store.delete_push_config(call.principal, task_id, config_id))

    async def _write_config(self, write: Awaitable[T]) -> T:
        """A push-config write: a full store answers UNAVAILABLE and counts as for task writes."""
        try:
            result = await write
        except StorageFullError as error:
            self._storage_refused(error)
            raise storage_unavailable() from None
        if self._storage_full:
            self._storage_accepted()
        return result

    # ---- messages ----------------------------------------------------------------------------

    async def submit(
        self,
        request: a2a_pb2.SendMessageRequest,
        call: CallContext,
        subscriber: Subscriber | None = None,
    ) -> TaskRun:
        """Accept the request's message into a new or existing task and start the agent on it."""
        self._check_open()
        message = request.message
        created = not message.task_id
        live = self._create(message, call.principal) if created else await self._resume(message, call)
        metadata = request.metadata if request.HasField("metadata") else None
        run = live.run = TaskRun(self, live, RequestContext(message, live, call, metadata))
        if subscriber is not None:
            subscriber.attach(self._log(live), live.seq, live.seq)
            live.subscribers.append(subscriber)
        if not created:
            self._show(run)
        elif request.configuration.return_immediately:
            self._pending_write(live)  # shows the task now: the caller wants its id at once
        runner = asyncio.get_running_loop().create_task(self._execute(run))
        run.runner = runner
        self._runs.add(runner)
        runner.add_done_callback(lambda _: self._run_finished(run))
        return run

    def _create(self, message: a2a_pb2.Message, owner: str) -> LiveTask:
        task_id = new_id()
        message.task_id = task_id
        if not message.context_id:
            message.context_id = new_id()
        task = a2a_pb2.Task(id=task_id, context_id=message.context_id)
        task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
        stamp_now(task.status.timestamp)
        task.history.append(message)
        live = self._live[task_id] = LiveTask(task, owner, 0)
        return live

    async def _resume(self, message: a2a_pb2.Message, call: CallContext) -> LiveTask:
        live = await self._live_task(message.task_id, call)
        try:
            check_resumable(live, message)
        except A2AError:
            self._release(live)
            raise
        message.context_id = live.task.context_id
        self._set_status(live, a2a_pb2.TASK_STATE_WORKING, None, message)
        return live

    def _show(self, run: TaskRun) -> None:
        """The task of `run` is shown from now on: the call's answer will be a task."""
        if run.opened.done():
            return
        if run.live.subscribers:
            run.snapshot = copy_task(run.live.task)
            run.snapshot_seq = run.live.seq
        run.opened.set_result(None)

    # ---- events from the agent ---------------------------------------------------------------

    def _check_publishing(self, run: TaskRun) -> LiveTask:
        live = run.live
        if live.run is not run:
            raise PublisherError(f"the agent's run on task {live.task.id} is over: it can publish nothing more")
        if live.state in TERMINAL_STATES:
            raise PublisherError(f"task {live.task.id} is already {TaskState.Name(live.state)}")
        return live

    def record_status(self, run: TaskRun, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        live = self._check_publishing(run)
        self._set_status(live, state, message)
        if state in SETTLED_STATES:
            self._settle(run, state)

    def record_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        live = self._check_publishing(run)
        task = live.task
        write = self._pending_write(live)
        if write.task is None:  # a delta keeps the chunk as published, whatever the agent does with it later
            write.artifacts.append((copy_artifact(artifact), append))
        live.apply_artifact(artifact, append)
        event = a2a_pb2.TaskArtifactUpdateEvent(
            task_id=task.id, context_id=task.context_id, artifact=artifact, append=append, last_chunk=last_chunk
        )
        self._publish(live, write, a2a_pb2.StreamResponse(artifact_update=event), 0)

    def record_reply(self, run: TaskRun, message: a2a_pb2.Message) -> None:
        """The agent answers with `message` instead of a task: the task is dropped, never stored."""
        live = self._check_publishing(run)
        if run.opened.done():
            raise PublisherError(
                f"reply() must come before anything else is published for task {live.task.id}, "
                "and only for a new message the caller did not ask to return at once"
            )
        message.task_id = ""
        message.context_id = live.task.context_id
        run.reply = message
        run.opened.set_result(message)
        for subscriber in live.subscribers:
            subscriber.close()
        live.subscribers.clear()
        live.run = None
        del self._live[live.task.id]
        run.settled.set_result(None)

    def _set_status(
        self,
        live: LiveTask,
        state: a2a_pb2.TaskState,
        message: a2a_pb2.Message | None,
        user_message: a2a_pb2.Message | None = None,
    ) -> None:
        """Apply, persist and publish a new status; its message (and a user message) join the history."""
        write = self._pending_write(live)
        task = live.task
        status = a2a_pb2.TaskStatus(state=state)
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
        live.set_status(status)
        write.status = status
        event = a2a_pb2.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
        self._publish(live, write, a2a_pb2.StreamResponse(status_update=event), state)
        if state in TERMINAL_STATES:
            for subscriber in live.subscribers:
                subscriber.close()
            live.subscribers.clear()

    def _pending_write(self, live: LiveTask) -> TaskWrite:
        """The write collecting this task's changes of the current event-loop turn, opened before a
        change is applied (the first one shows the task, and a stream's snapshot precedes it).

        Changes made in one turn (a new task, its artifact and its completion, say) reach the store
        as one versioned write at the end of the turn; `live.last_write` resolves once it is durable.
        """
        write = live.pending
        if write is None:
            if not live.shown and live.run is not None:
                self._show(live.run)
            live.version += 1
            write = live.pending = TaskWrite(live.task.id, live.version, owner=live.owner)
            if live.version == 1:
                write.task = live.task  # a create: the task as it stands at the flush holds every change
            loop = asyncio.get_running_loop()
            live.last_write = loop.create_future()
            loop.call_soon(self._flush, live)
        return write

    def _flush(self, live: LiveTask) -> None:
        write, durable = live.pending, live.last_write
        live.pending = None
        assert write is not None and durable is not None
        stored = self.store.apply(write)
        if stored.done():  # an in-memory store: no need to wait for another loop turn
            self._stored(live, durable, stored)
        else:
            stored.add_done_callback(lambda stored: self._stored(live, durable, stored))

    def _stored(self, live: LiveTask, durable: asyncio.Future[None], stored: asyncio.Future[None]) -> None:
        error = stored.exception()
        if error is not None:
            error = self._write_failed(live, error)
        elif self._storage_full:
            self._storage_accepted()
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

    def _publish(self, live: LiveTask, write: TaskWrite, response: a2a_pb2.StreamResponse, state: int) -> None:
        """Add the change as the task's next event: stored with the write, and pushed to every subscriber."""
        live.seq += 1
        event = TaskEvent(live.seq, state, response.SerializeToString())
        write.events.append(event)
        for subscriber in live.subscribers:
            subscriber.push(event, live.last_write)

    def _settle(self, run: TaskRun, state: int) -> None:
        live = run.live
        if state in INTERRUPTED_STATES:
            for subscriber in live.subscribers:
                if subscriber.close_on_interrupt:
                    subscriber.close()
            live.subscribers = [s for s in live.subscribers if not s.closed]
            live.run = None  # the task waits for the client now: the reply may come before the agent returns
        if not run.settled.done():
            run.settled.set_result(None)

    async def _execute(self, run: TaskRun) -> None:
        live = run.live
        publisher = EventPublisher(run)
        try:
            await self.executor.execute(run.context, publisher)
        except asyncio.CancelledError:  # only shutdown cancels a run that CancelTask did not settle
            if live.run is run and live.state not in SETTLED_STATES:
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, stopped_message(publisher.agent_message()))
        except Exception:
            log.exception("agent failed on task %s", live.task.id)
            if live.run is run and live.state not in TERMINAL_STATES:
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, publisher.agent_message("The agent failed."))
        else:
            if live.run is run and live.state not in SETTLED_STATES and run.context.cancel_requested:
                self.record_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
            elif live.run is run and live.state not in SETTLED_STATES:
                log.warning("agent returned without settling task %s", live.task.id)
                message = publisher.agent_message("The agent ended without a result.")
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, message)

    def _run_finished(self, run: TaskRun) -> None:
        """Runs when the agent's task ends in any way, even cancelled before it started."""
        if run.runner is not None:
            self._runs.discard(run.runner)
        live = run.live
        if live.run is run and live.state not in SETTLED_STATES:  # cancelled before the agent's first step
            stopped = stopped_message(a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT))
            self.record_status(run, a2a_pb2.TASK_STATE_FAILED, stopped)
        if live.run is run:
            live.run = None
        if not run.settled.done():
            run.settled.set_result(None)
        self._release(live)

    def _release(self, live: LiveTask) -> None:
        """Forget a live task once nobody works on or watches it and its last write is durable
        (checked again when that write completes, since a newer one may have been made meanwhile)."""
        if live.run is not None or live.subscribers or self._live.get(live.task.id) is not live:
            return
        write = live.last_write
        if write is not None and not write.done():
            write.add_done_callback(lambda _: self._release(live))
        else:
            del self._live[live.task.id]

    def _write_failed(self, live: LiveTask, error: BaseException) -> BaseException:
        """The store refused or lost a write: the live task no longer matches what is stored, so it is
        dropped (the next request reloads the stored task) and its run, if any, is stopped.

        Returns the error that callers waiting on the write get: every later write of the task fails
        too (the stored version stays behind), and its callers get the first failure's error."""
        if live.write_error is not None:
            return live.write_error
        if isinstance(error, VersionConflictError) and self.store.shared:
            log.warning("task %s was changed by another replica meanwhile: %s", live.task.id, error)
            error = changed_meanwhile(live.task.id)
        elif isinstance(error, StorageFullError):
            self._storage_refused(error)
            if live.version > 1:  # stored before: it would stay running with no agent behind it
                self._unstored[live.task.id] = live.owner
            error = storage_unavailable()
        else:
            log.error("could not persist task %s: %s", live.task.id, error)
        live.write_error = error
        if self._live.get(live.task.id) is live:
            del self._live[live.task.id]
        run, live.run = live.run, None  # the run is over: it can record nothing more
        if run is not None and run.runner is not None:
            run.runner.cancel()
        return error

    def _storage_refused(self, error: StorageFullError) -> None:
        """Logged once per incident: from the first write refused for want of space to the next one stored."""
        if not self._storage_full:
            self._storage_full = True
            log.error("the task store is full; writes fail with UNAVAILABLE until one succeeds again: %s", error)
            if self._on_storage_writable is not None:
                self._on_storage_writable(False)

    def _storage_accepted(self) -> None:
        self._storage_full = False
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
                live = await self._live_task(task_id, CallContext(principal=owner))
            except A2AError:
                continue
            if live.run is None and live.state not in SETTLED_STATES:
                message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
                message.parts.add(text="The task could not be stored: the task store was full.")
                self._set_status(live, a2a_pb2.TASK_STATE_FAILED, message)
            self._release(live)

    # ---- subscribe and cancel ----------------------------------------------------------------

    async def subscribe(self, task_id: str, call: CallContext, after: int | None = None) -> Subscription:
        """A stream on a task that is not final, or, `after` an event the caller saw, the events it missed
        (a final task's stream then replays them and ends)."""
        self._check_open()
        live = await self._live_task(task_id, call)
        if after is not None and after > live.seq:
            self._release(live)
            raise InvalidRequestError(
                f"{STREAM_AFTER_HEADER} is past the task's last event",
                violations=[(STREAM_AFTER_HEADER, f"task {task_id} has {live.seq} events")],
            )
        if live.state in TERMINAL_STATES and after is None:
            self._release(live)
            raise UnsupportedOperationError(
                f"task {task_id} is in a terminal state; use GetTask", metadata={"taskId": task_id}
            )
        subscriber = self._watch(live, after)
        if live.state in TERMINAL_STATES:
            subscriber.close()
        return Subscription(copy_task(live.task), live.seq, live.last_write, subscriber, live)

    def _watch(self, live: LiveTask, after: int | None, *, close_on_interrupt: bool = False) -> Subscriber:
        """A subscriber to the task's events after `after` (by default, after the last one)."""
        subscriber = self.new_subscriber(close_on_interrupt=close_on_interrupt)
        start = live.seq if after is None else after
        elsewhere = self.store.shared and live.run is None  # another replica may be writing it
        subscriber.attach(self._log(live), start, live.seq, live.last_write, check_log=elsewhere)
        live.subscribers.append(subscriber)
        return subscriber

    def _log(self, live: LiveTask) -> TaskLog:
        return TaskLog(self.store, live.task.id, live.owner)

    def new_subscriber(self, *, close_on_interrupt: bool) -> Subscriber:
        """A stream's subscriber; one that closes on an interrupted state ends with its message's answer."""
        return Subscriber(close_on_interrupt, self.subscriber_buffer_bytes)

    async def unsubscribe(self, live: LiveTask, subscriber: Subscriber) -> None:
        subscriber.close()
        if subscriber in live.subscribers:
            live.subscribers.remove(subscriber)
        self._release(live)

    async def cancel(self, task_id: str, call: CallContext) -> a2a_pb2.Task:
        live = await self._live_task(task_id, call)
        if live.state in TERMINAL_STATES:
            self._release(live)
            raise TaskNotCancelableError(
                f"task {task_id} is already {TaskState.Name(live.state)}", metadata={"taskId": task_id}
            )
        run = live.run
        if run is not None:  # shielded: a caller giving up must not leave the cancel half done
            self._cancel_once(run)
            assert run.cancelling is not None
            await asyncio.shield(run.cancelling)
        elif self.store.shared and live.state in RUNNING_STATES:
            live = await asyncio.shield(self._cancel_elsewhere(live, call))
        else:  # interrupted: no agent is running, so cancel it here
            self._set_status(live, a2a_pb2.TASK_STATE_CANCELED, None)
        self._release(live)
        await live.durable()
        return live.task

    def _cancel_once(self, run: TaskRun) -> None:
        """Ask the agent to cancel; once per run, so a concurrent CancelTask waits for that outcome."""
        if run.cancelling is None:
            run.cancelling = asyncio.ensure_future(self._cancel_run(run))

    async def _cancel_elsewhere(self, live: LiveTask, call: CallContext) -> LiveTask:
        """Cancel a task another replica runs: ask it through the store and wait for the task to settle;
        cancel it here if the runner does not answer (it may have died before its lease expired)."""
        watcher = self._watch(live, None, close_on_interrupt=True)
        try:
            assert self._replicas is not None
            await self._replicas.store.request_cancel(live.task.id)
            async with asyncio.timeout(CANCEL_GRACE_SECONDS + ROUTED_CANCEL_MARGIN_SECONDS):
                async for _ in watcher.events():
                    pass
        except TimeoutError:
            pass
        finally:
            await self.unsubscribe(live, watcher)
        live = await self._live_task(live.task.id, call)
        if live.state not in TERMINAL_STATES and live.run is None:
            self._set_status(live, a2a_pb2.TASK_STATE_CANCELED, None)
            try:
                await live.durable()
            except TaskChangedError:  # the runner's own answer landed first
                live = await self._live_task(live.task.id, call)
        return live

    async def _cancel_run(self, run: TaskRun) -> None:
        run.context.request_cancel()
        try:
            async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                await self.executor.cancel(run.context, EventPublisher(run))
        except Exception:
            log.exception("agent cancel handler failed on task %s", run.live.task.id)
        if run.live.state not in TERMINAL_STATES and run.live.run is run:
            self.record_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()

    async def start(self) -> int:
        """Once the store is open: alone on it, fail the tasks a previous process left running (no agent
        works on them any more) and return how many; sharing it, start following the other replicas."""
        if self._replicas is not None:
            self._replicas.start()
            return 0
        orphans = await self.store.running_tasks()
        for task_id, owner in orphans:
            live = await self._live_task(task_id, CallContext(principal=owner))
            message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
            self._set_status(live, a2a_pb2.TASK_STATE_FAILED, stopped_message(message))
            await live.durable()
            self._release(live)
        return len(orphans)

    # ---- other replicas ----------------------------------------------------------------------

    def _watched_elsewhere(self) -> list[str]:
        """The tasks this replica streams but does not run: their events come from other replicas."""
        return [task_id for task_id, live in self._live.items() if live.subscribers and live.run is None]

    def _note_events(self, task_id: str, seq: int) -> None:
        live = self._live.get(task_id)
        if live is not None:
            for subscriber in live.subscribers:
                subscriber.note(seq)

    async def _take_cancel_requests(self) -> None:
        assert self._replicas is not None
        for task_id in await self._replicas.store.take_cancel_requests():
            live = self._live.get(task_id)
            if live is not None and live.run is not None:
                self._cancel_once(live.run)

    async def _fail_expired(self, task_id: str, owner: str) -> None:
        """Fail a task whose runner's lease expired, unless another replica did first."""
        live = self._live.get(task_id)
        if live is not None and live.run is not None:
            return  # this replica runs it: its own heartbeat was late
        try:
            live = await self._live_task(task_id, CallContext(principal=owner))
        except A2AError:
            return
        if live.run is None and live.state in RUNNING_STATES:
            message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
            message.parts.add(text="The server running this task stopped: its lease expired.")
            self._set_status(live, a2a_pb2.TASK_STATE_FAILED, message)
            with contextlib.suppress(StoreError, A2AError):  # changed meanwhile, or the store is full
                await live.durable()
        self._release(live)

    async def close(self) -> int:
        """At shutdown: cancel every running agent (its task FAILS and its streams see that), then end
        the streams still watching tasks that wait for input with UNAVAILABLE (their clients may
        subscribe again elsewhere); from then on new messages and subscriptions are refused with
        UNAVAILABLE. Sharing the store, give up this replica's lease once its last writes are stored.
        Returns how many tasks it failed."""
        self._closing = True
        failing = sum(1 for live in self._live.values() if live.run is not None and live.state not in SETTLED_STATES)
        for runner in list(self._runs):
            runner.cancel()
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)
        if self._recoveries:
            await asyncio.gather(*self._recoveries, return_exceptions=True)
        for live in list(self._live.values()):
            for subscriber in live.subscribers:
                subscriber.stop()
        if self._replicas is not None:
            await self._replicas.stop()
            writes = [live.last_write for live in self._live.values() if live.last_write is not None]
            await asyncio.gather(*writes, return_exceptions=True)
            try:
                await self._replicas.store.release()
            except Exception as error:  # the lease then lapses on its own
                log.warning("could not give up this server's lease on its tasks: %s", error)
        return failing

    def _check_open(self) -> None:
        if self._closing:
            raise UnavailableError("the server is stopping; send the request again (to another replica)")
