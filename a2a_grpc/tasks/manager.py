"""The task manager: owns task state, runs the agent, persists every change and fans events out.

Data path of a message: the servicer calls `submit`, which takes the message into a new or existing
task and starts the agent in its own asyncio task, so a client that goes away never cancels the work.
Every event the agent publishes is applied to the task by its machine, written to the store as a delta, and
pushed to each subscriber of the task in order. Callers wait on the run (`TaskRun.settled`) and on
the last write (`durable`) before they acknowledge anything. Every read goes through here too, so
that what a caller may see is decided in one place (`check_visible`).

The manager is the one entry; the work is shared among the parts it owns, each given what it needs:
`LiveTasks` (the `TaskMachine` of each task worked on or watched here: the one owner of that task's
state and transitions), `TaskWriter` (storing the machines' writes, and a full store), `AgentRuns` (the
agent's coroutines and its cancel handler), `Retention` (deleting old final tasks' event logs, later the
tasks themselves) and, when the store is shared, `ReplicaKeeper` (the other replicas).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from a2a_grpc.agent import AgentExecutor, RequestContext
from a2a_grpc.call import CallContext, owner_call
from a2a_grpc.errors import (
    InvalidRequestError,
    TooManyPushConfigsError,
    UnavailableError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import RUNNING_STATES, STREAM_AFTER_HEADER, TERMINAL_STATES
from a2a_grpc.store import config_page_token_after
from a2a_grpc.store.base import InvalidPageTokenError, TaskPage, TaskQuery, TaskStore
from a2a_grpc.tasks.agent_runs import AgentRuns
from a2a_grpc.tasks.agent_view import AgentView, CallClock
from a2a_grpc.tasks.answers import bounded_page
from a2a_grpc.tasks.limits import DEFAULT_TASK_LIMITS, TaskLimits
from a2a_grpc.tasks.live import copy_task, stamp_now
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.machine import TaskMachine
from a2a_grpc.tasks.phase import Phase
from a2a_grpc.tasks.replicas import LEASE_SECONDS, POLL_SECONDS, ReplicaKeeper
from a2a_grpc.tasks.retention import EVENT_RETENTION_SECONDS, TASK_RETENTION_SECONDS, Retention
from a2a_grpc.tasks.rules import (
    bad_page_token,
    check_visible,
    config_not_found,
    not_cancelable,
    not_found,
    stopped_message,
)
from a2a_grpc.tasks.run import RunMachine, TaskRun
from a2a_grpc.tasks.subscriber import SUBSCRIBER_BUFFER_BYTES, Subscriber
from a2a_grpc.tasks.writes import TaskWriter


@dataclass(frozen=True, slots=True)
class Subscription:
    """A stream's start on a task: the task as the stream shows it first, the number of the last event
    that task includes, the write it must wait for, and the subscriber that yields the events after it."""

    snapshot: a2a_pb2.Task
    seq: int
    written: asyncio.Future[None] | None
    subscriber: Subscriber
    machine: TaskMachine


class TaskManager:
    """`on_storage_writable(False)` is called when the store turns out to be full, `(True)` when it
    takes a write again. The events of a task final for `event_retention_seconds` are deleted, and the task
    itself once final for `task_retention_seconds` (0: never)."""

    def __init__(
        self,
        store: TaskStore,
        executor: AgentExecutor,
        on_storage_writable: Callable[[bool], None] | None = None,
        subscriber_buffer_bytes: int = SUBSCRIBER_BUFFER_BYTES,
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        on_push_due: Callable[[str], None] | None = None,
        limits: TaskLimits = DEFAULT_TASK_LIMITS,
        event_retention_seconds: float = EVENT_RETENTION_SECONDS,
        task_retention_seconds: float = TASK_RETENTION_SECONDS,
        credential_headers: Iterable[str] = (),
    ) -> None:
        self.store = store
        self._agent_view = AgentView(executor, credential_headers)
        self._retention = Retention(store, event_retention_seconds, task_retention_seconds)
        self._tasks = LiveTasks(store, limits, subscriber_buffer_bytes)
        self._writer = self._tasks.storage = TaskWriter(store, self._tasks, on_storage_writable, on_push_due)
        self._runs = AgentRuns(executor, lambda: self._tasks.loop)
        self._max_push_configs = limits.max_push_configs
        shared = store.shared
        self._replicas = (
            ReplicaKeeper(shared, self._tasks, self._runs, lease_seconds=lease_seconds, poll_seconds=poll_seconds)
            if shared is not None
            else None
        )
        self._closing = False

    # ---- reads -------------------------------------------------------------------------------

    async def get_task(self, task_id: str, call: CallContext) -> a2a_pb2.Task:
        """The task as far as it is durable: nothing a crash could still take back."""
        machine = self._tasks.get(task_id)
        if machine is not None and self._tasks.current(machine):
            check_visible(task_id, machine.owner, call, machine.shown)
            return await machine.durable_task()
        task = await self.store.get_task(task_id, call.owner)
        if task is None:
            raise not_found(task_id)
        return task

    async def list_tasks(
        self, request: a2a_pb2.ListTasksRequest, page_size: int, call: CallContext, max_bytes: int
    ) -> TaskPage:
        """One page of the caller's tasks that match a (validated) ListTasks request, as responses show them,
        within `max_bytes` (`bounded_page`)."""
        query = _task_query(request, page_size, call.owner)
        query.max_bytes = max_bytes
        history_length = request.history_length if request.HasField("history_length") else None
        try:
            page = await self.store.list_tasks(query)
        except InvalidPageTokenError:
            raise bad_page_token() from None
        return bounded_page(page, history_length, query.include_artifacts, max_bytes)

    # ---- push notification configs -------------------------------------------------------------

    async def put_push_config(
        self,
        config: a2a_pb2.TaskPushNotificationConfig,
        call: CallContext,
        *,
        from_start: bool = False,
        task_id: str | None = None,
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Create or replace a config of a task the caller sees (`task_id`, else the config's); a config without
        an id gets one. It is notified of the task's events from now on, or `from_start` of every one (a config
        sent with a message continuing the task; one sent with the message creating it is stored with the
        task's first write). Returns the config as stored: a copy, `config` is left as it is."""
        stored = a2a_pb2.TaskPushNotificationConfig()  # the request is the caller's: the store gets a copy
        stored.CopyFrom(config)
        if task_id is not None:
            stored.task_id = task_id
        task = await self.get_task(stored.task_id, call)
        await self.check_push_room(stored, call)
        stored.id = stored.id or new_id()
        final = task.status.state in TERMINAL_STATES
        await self._writer.put_push_config(call.owner, stored, 0 if from_start else None, final=final)
        return stored

    async def check_push_room(self, config: a2a_pb2.TaskPushNotificationConfig, call: CallContext) -> None:
        """A new config of a task that holds `max_push_configs` already is TooManyPushConfigsError; replacing
        one of them takes no more room. (Two creates at once may both find room: the bound is per create.)"""
        limit = self._max_push_configs
        if config.id and await self.store.get_push_config(call.owner, config.task_id, config.id) is not None:
            return
        held, _ = await self.store.list_push_configs(call.owner, config.task_id, limit, "")
        if len(held) >= limit:
            raise TooManyPushConfigsError(
                f"task {config.task_id} has {limit} push notification configs, as many as it may keep; "
                "delete one first",
                metadata={"taskId": config.task_id, "limit": str(limit)},
            )

    async def get_push_config(
        self, task_id: str, config_id: str, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        await self.get_task(task_id, call)
        config = await self.store.get_push_config(call.owner, task_id, config_id)
        if config is None:
            raise config_not_found(task_id, config_id)
        return config

    async def list_push_configs(
        self, task_id: str, page_size: int, page_token: str, call: CallContext, max_bytes: int
    ) -> tuple[list[a2a_pb2.TaskPushNotificationConfig], str]:
        """One page of a task's configs; a page whose configs pass `max_bytes` ends early, and the next one
        starts after its last."""
        await self.get_task(task_id, call)
        try:
            configs, token = await self.store.list_push_configs(call.owner, task_id, page_size, page_token)
        except InvalidPageTokenError:
            raise bad_page_token() from None
        size = 0
        for shown, config in enumerate(configs):
            size += config.ByteSize()
            if size > max_bytes and shown:
                return configs[:shown], config_page_token_after(configs[shown - 1])
        return configs, token

    async def delete_push_config(self, task_id: str, config_id: str, call: CallContext) -> None:
        """Idempotent: a config that is already gone counts as deleted (the task must still be the caller's)."""
        await self.get_task(task_id, call)
        await self._writer.delete_push_config(call.owner, task_id, config_id)

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
        machine = self._create(message, call.owner) if created else await self._tasks.load(message.task_id, call)
        configuration = request.configuration
        if created and configuration.HasField("task_push_notification_config"):
            machine.use_push_config(configuration.task_push_notification_config)
        metadata = request.metadata if request.HasField("metadata") else None
        clock = CallClock(call.time_remaining)
        context = RequestContext(message, machine, call, metadata, view=functools.partial(self._agent_view, clock))
        try:
            run = machine.submit(
                context,
                created=created,
                trace=call.trace_context,
                clock=clock,
                subscriber=subscriber,
                show_now=configuration.return_immediately,
            )
        except BaseException:
            self._tasks.release(machine)
            raise
        self._runs.start(run)
        return run

    def _create(self, message: a2a_pb2.Message, owner: str) -> TaskMachine:
        """The machine of a new task for `message`: its history holds a copy, with the task's ids (the
        request's message is left as the caller sent it)."""
        task = a2a_pb2.Task(id=new_id(), context_id=message.context_id or new_id())
        task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
        stamp_now(task.status.timestamp)
        joined = task.history.add()
        joined.CopyFrom(message)
        joined.task_id, joined.context_id = task.id, task.context_id
        return self._tasks.new(task, owner)

    # ---- subscribe and cancel ----------------------------------------------------------------

    async def subscribe(self, task_id: str, call: CallContext, after: int | None = None) -> Subscription:
        """A stream on a task that is not final, or, `after` an event the caller saw, the events it missed
        (a final task's stream then replays them and ends)."""
        self._check_open()
        machine = await self._tasks.load(task_id, call)
        if after is not None and after > machine.seq:
            self._tasks.release(machine)
            raise InvalidRequestError(
                f"{STREAM_AFTER_HEADER} is past the task's last event",
                violations=[(STREAM_AFTER_HEADER, f"task {task_id} has {machine.seq} events")],
            )
        if machine.state in TERMINAL_STATES and after is None:
            self._tasks.release(machine)
            raise UnsupportedOperationError(
                f"task {task_id} is in a terminal state; use GetTask", metadata={"taskId": task_id}
            )
        subscriber = self._tasks.watch(machine, after)
        return Subscription(copy_task(machine.task), machine.seq, machine.last_write, subscriber, machine)

    def new_subscriber(self, *, close_on_interrupt: bool) -> Subscriber:
        """A stream's subscriber; one that closes on an interrupted state ends with its message's answer."""
        return self._tasks.new_subscriber(close_on_interrupt=close_on_interrupt)

    async def unsubscribe(self, machine: RunMachine, subscriber: Subscriber) -> None:
        machine.unsubscribe(subscriber)

    async def cancel(self, task_id: str, call: CallContext) -> a2a_pb2.Task:
        machine = await self._tasks.load(task_id, call)
        if machine.phase is Phase.FINAL:
            self._tasks.release(machine)
            raise not_cancelable(task_id, machine.state)
        run = machine.run
        if run is not None:  # shielded: a caller giving up must not leave the cancel half done
            await asyncio.shield(self._runs.cancel_once(run))
        elif self._replicas is not None and machine.state in RUNNING_STATES:
            machine = await asyncio.shield(self._replicas.cancel_elsewhere(machine, call))
        else:  # interrupted: no agent runs, but its cancel may hold resources for the conversation
            await asyncio.shield(self._cancel_interrupted(machine, call))
        self._tasks.release(machine)
        await machine.durable()
        return machine.task

    def _cancel_interrupted(self, machine: TaskMachine, call: CallContext) -> asyncio.Future[None]:
        """The agent's `cancel` on a task that waits for input (or auth): a run of its own, which publishes
        CANCELED or has the server do it, as for a running task (`TaskMachine.open_cancel_run`)."""
        status = machine.task.status
        message = a2a_pb2.Message()  # a copy of the status message: the agent's, not a part of the task
        if status.HasField("message"):
            message.CopyFrom(status.message)
        view = functools.partial(self._agent_view, CallClock(call.time_remaining))
        context = RequestContext(message, machine, call, view=view)
        run = machine.open_cancel_run(context, call.trace_context)
        cancelling = self._runs.cancel_once(run)
        cancelling.add_done_callback(lambda _: machine.end_cancel_run(run))
        return cancelling

    # ---- start and stop ----------------------------------------------------------------------

    async def start(self) -> int:
        """Once the store is open: alone on it, fail the tasks a previous process left running (no agent
        works on them any more) and return how many; sharing it, start following the other replicas.
        Either way, start pruning old event logs and removing old final tasks."""
        self._retention.start()
        if self._replicas is not None:
            self._replicas.start()
            return 0
        orphans = await self.store.running_tasks()
        for task_id, owner in orphans:
            machine = await self._tasks.load(task_id, owner_call(owner))
            message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
            machine.conclude(a2a_pb2.TASK_STATE_FAILED, stopped_message(message))
            await machine.durable()
            self._tasks.release(machine)
        return len(orphans)

    async def close(self) -> int:
        """At shutdown: cancel every running agent (its task FAILS and its streams see that), then end
        the streams still watching tasks that wait for input with UNAVAILABLE (their clients may
        subscribe again elsewhere); from then on new messages and subscriptions are refused with
        UNAVAILABLE. Sharing the store, give up this replica's lease once its last writes are stored.
        Returns how many tasks it failed."""
        self._closing = True
        await self._retention.stop()
        failing = sum(1 for machine in self._tasks if _agent_runs_on(machine))
        await self._runs.stop()
        await self._writer.finish_recoveries()
        for machine in self._tasks:
            machine.stop_subscribers()
        if self._replicas is not None:
            await self._replicas.stop()
        return failing

    def _check_open(self) -> None:
        if self._closing:
            raise UnavailableError("the server is stopping; send the request again (to another replica)")

    def task_counts(self) -> dict[int, int]:
        """How many tasks this process holds (works on or watches), by TaskState: for the metrics, at a scrape."""
        counts: dict[int, int] = {}
        for machine in self._tasks:
            counts[machine.state] = counts.get(machine.state, 0) + 1
        return counts


def _agent_runs_on(machine: TaskMachine) -> bool:
    """Whether an agent's run works on the task here (not a run made only to cancel a waiting task)."""
    run = machine.run
    return run is not None and machine.is_running(run) and run.runner is not None


def _task_query(request: a2a_pb2.ListTasksRequest, page_size: int, owner: str) -> TaskQuery:
    query = TaskQuery(
        owner=owner,
        page_size=page_size,
        context_id=request.context_id,
        state=request.status,
        page_token=request.page_token,
        include_artifacts=request.HasField("include_artifacts") and request.include_artifacts,
    )
    if request.HasField("status_timestamp_after"):
        after = request.status_timestamp_after
        query.status_after_us = after.seconds * 1_000_000 + after.nanos // 1000
    return query
