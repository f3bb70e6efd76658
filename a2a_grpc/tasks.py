"""The task manager: owns task state, runs the agent, persists every change and fans events out.

Data path of a message: the servicer calls `submit`, which creates (or resumes) the task, records the
incoming message and starts the agent in its own asyncio task, so a client that goes away never
cancels the work. Every event the agent publishes is applied to the live Task, written to the store
as a delta, and pushed to each subscriber of the task in order. Callers wait on the run
(`TaskRun.settled`) and on the last write (`durable`) before they acknowledge anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator

from google.protobuf import timestamp_pb2

from a2a_grpc.agent import AgentExecutor, EventPublisher, RequestContext
from a2a_grpc.artifacts import apply_artifact_chunk
from a2a_grpc.call import CallState
from a2a_grpc.errors import (
    A2AError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.store.base import TaskStore, TaskWrite

log = logging.getLogger(__name__)

TaskState = a2a_pb2.TaskState
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
INTERRUPTED_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES

# How many undelivered events one subscriber may fall behind before it is dropped.
SUBSCRIBER_QUEUE_LIMIT = 10_000
# How long CancelTask waits for the agent's own cancel handler before canceling the task itself.
CANCEL_GRACE_SECONDS = 5.0

StreamItem = tuple[bytes, asyncio.Future[None] | None]  # an encoded StreamResponse, and its write


def now_timestamp() -> timestamp_pb2.Timestamp:
    ns = time.time_ns()
    return timestamp_pb2.Timestamp(seconds=ns // 1_000_000_000, nanos=ns % 1_000_000_000)


async def wait_durable(write: asyncio.Future[None] | None) -> None:
    """Wait for a store write without letting this caller's cancellation cancel it for everyone else."""
    if write is None:
        return
    if write.done():
        write.result()
        return
    await asyncio.shield(write)


class SubscriberOverflowError(Exception):
    """A subscriber fell more than SUBSCRIBER_QUEUE_LIMIT events behind."""


class Subscriber:
    """One stream's view of a task's events: an ordered queue that ends when the task settles."""

    __slots__ = ("_closed", "_items", "_overflowed", "_waiter", "close_on_interrupt")

    def __init__(self, close_on_interrupt: bool) -> None:
        self._items: deque[StreamItem] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._overflowed = False
        self.close_on_interrupt = close_on_interrupt

    def push(self, item: StreamItem) -> None:
        if self._closed:
            return
        if len(self._items) >= SUBSCRIBER_QUEUE_LIMIT:
            self._overflowed = True
            self.close()
            return
        self._items.append(item)
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def events(self) -> AsyncIterator[bytes]:
        """Each event (an encoded StreamResponse) once it is durable, in order, until the subscriber is closed."""
        items = self._items
        while True:
            while items:
                response, durable = items.popleft()
                if durable is not None:
                    await wait_durable(durable)
                yield response
            if self._closed:
                if self._overflowed:
                    raise SubscriberOverflowError
                return
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None


class LiveTask:
    """A task that is being worked on or watched: the authoritative Task object and its listeners."""

    __slots__ = ("last_write", "owner", "pending", "run", "subscribers", "task", "version")

    def __init__(self, task: a2a_pb2.Task, owner: str, version: int) -> None:
        self.task = task
        self.owner = owner
        self.version = version  # of the last write handed to the store
        self.subscribers: list[Subscriber] = []
        self.run: TaskRun | None = None
        self.pending: TaskWrite | None = None
        self.last_write: asyncio.Future[None] | None = None

    @property
    def state(self) -> int:
        return self.task.status.state

    async def durable(self) -> None:
        await wait_durable(self.last_write)


class TaskRun:
    """One execution of the agent for one accepted message."""

    __slots__ = ("context", "live", "runner", "settled")

    def __init__(self, live: LiveTask, context: RequestContext) -> None:
        self.live = live
        self.context = context
        self.settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.runner: asyncio.Task[None] | None = None


class TaskManager:
    def __init__(self, store: TaskStore, executor: AgentExecutor) -> None:
        self.store = store
        self.executor = executor
        self._live: dict[str, LiveTask] = {}
        self._runs: set[asyncio.Task[None]] = set()

    # ---- reads -------------------------------------------------------------------------------

    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task:
        """The task as far as it is durable: nothing a crash could still take back."""
        live = self._live.get(task_id)
        if live is not None:
            if live.owner != owner:
                raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
            write = live.last_write
            if write is None or write.done():
                return live.task
            snapshot = a2a_pb2.Task()
            snapshot.CopyFrom(live.task)
            await wait_durable(write)
            return snapshot
        task = await self.store.get_task(task_id, owner)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return task

    async def _live_task(self, task_id: str, owner: str) -> LiveTask:
        """The live entry of a task, loaded from the store if nobody works on or watches it.

        A caller that loads one and then refuses the request hands it back with `_release`.
        """
        live = self._live.get(task_id)
        if live is None:
            task = await self.store.get_task(task_id, owner)
            version = None if task is None else await self.store.task_version(task_id)
            live = self._live.get(task_id)  # another call may have loaded it meanwhile
            if live is None:
                if task is None or version is None:
                    raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
                live = self._live[task_id] = LiveTask(task, owner, version)
        if live.owner != owner:
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return live

    # ---- messages ----------------------------------------------------------------------------

    async def submit(
        self,
        request: a2a_pb2.SendMessageRequest,
        call: CallState,
        subscriber: Subscriber | None = None,
    ) -> TaskRun:
        """Accept the request's message into a new or existing task and start the agent on it."""
        message = request.message
        created = not message.task_id
        live = self._create(message, call.caller) if created else await self._resume(message, call.caller)
        context = RequestContext(
            message,
            live.task,
            call,
            request.metadata if request.HasField("metadata") else None,
        )
        run = live.run = TaskRun(live, context)
        if subscriber is not None:
            live.subscribers.append(subscriber)
        runner = asyncio.get_running_loop().create_task(self._execute(run))
        run.runner = runner
        self._runs.add(runner)
        runner.add_done_callback(lambda _: self._run_finished(run))
        if created:
            # Queued after the agent's first step, so what the agent does straight away (an echo agent:
            # everything) is in the task's first write.
            self._pending_write(live).task = live.task
        return run

    def _create(self, message: a2a_pb2.Message, owner: str) -> LiveTask:
        task_id = new_id()
        message.task_id = task_id
        if not message.context_id:
            message.context_id = new_id()
        task = a2a_pb2.Task(
            id=task_id,
            context_id=message.context_id,
            status=a2a_pb2.TaskStatus(state=TaskState.TASK_STATE_SUBMITTED, timestamp=now_timestamp()),
            history=(message,),
        )
        live = self._live[task_id] = LiveTask(task, owner, 0)
        return live

    async def _resume(self, message: a2a_pb2.Message, owner: str) -> LiveTask:
        live = await self._live_task(message.task_id, owner)
        try:
            _check_resumable(live, message)
        except A2AError:
            self._release(live)
            raise
        message.context_id = live.task.context_id
        self._set_status(live, TaskState.TASK_STATE_WORKING, None, message)
        return live

    # ---- events from the agent ---------------------------------------------------------------

    def record_status(self, run: TaskRun, state: int, message: a2a_pb2.Message | None) -> None:
        live = run.live
        if live.run is not run or live.state in TERMINAL_STATES:
            raise InvalidRequestError("the task is no longer being worked on by this agent run")
        self._set_status(live, state, message)
        if state in SETTLED_STATES:
            self._settle(run, state)

    def _set_status(
        self,
        live: LiveTask,
        state: int,
        message: a2a_pb2.Message | None,
        user_message: a2a_pb2.Message | None = None,
    ) -> None:
        """Apply, persist and publish a new status; its message (and a user message) join the history."""
        task = live.task
        status = a2a_pb2.TaskStatus(state=state, timestamp=now_timestamp())  # type: ignore[arg-type]
        history: tuple[a2a_pb2.Message, ...] = ()
        if user_message is not None:
            task.history.append(user_message)
            history = (user_message,)
        if message is not None:
            message.task_id = task.id
            message.context_id = task.context_id
            status.message.CopyFrom(message)
            task.history.append(message)
            history = (*history, message)
        task.status.CopyFrom(status)
        write = self._pending_write(live)
        write.status = status
        write.history.extend(history)
        if live.subscribers:
            event = a2a_pb2.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
            self._publish(live, a2a_pb2.StreamResponse(status_update=event))
        if state in TERMINAL_STATES:
            for subscriber in live.subscribers:
                subscriber.close()
            live.subscribers.clear()

    def record_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        live = run.live
        if live.run is not run or live.state in TERMINAL_STATES:
            raise InvalidRequestError("the task is no longer being worked on by this agent run")
        task = live.task
        apply_artifact_chunk(task.artifacts, artifact, append)
        self._pending_write(live).artifacts.append((artifact, append))
        if live.subscribers:
            event = a2a_pb2.TaskArtifactUpdateEvent(
                task_id=task.id, context_id=task.context_id, artifact=artifact, append=append, last_chunk=last_chunk
            )
            self._publish(live, a2a_pb2.StreamResponse(artifact_update=event))

    def _pending_write(self, live: LiveTask) -> TaskWrite:
        """The write collecting this task's changes of the current event-loop turn.

        Changes made in one turn (a new task, its artifact and its completion, say) reach the store
        as one versioned write at the end of the turn; `live.last_write` resolves once it is durable.
        """
        write = live.pending
        if write is None:
            live.version += 1
            write = live.pending = TaskWrite(live.task.id, live.version, owner=live.owner)
            loop = asyncio.get_running_loop()
            live.last_write = loop.create_future()
            loop.call_soon(self._flush, live)
        return write

    def _flush(self, live: LiveTask) -> None:
        write, durable = live.pending, live.last_write
        live.pending = None
        assert write is not None and durable is not None
        if write.task is not None:  # a create: the task as it stands now holds every change since
            write.history.clear()
            write.artifacts.clear()
        self.store.apply(write).add_done_callback(lambda stored: self._stored(live, durable, stored))

    def _stored(self, live: LiveTask, durable: asyncio.Future[None], stored: asyncio.Future[None]) -> None:
        error = stored.exception()
        if error is not None:
            self._write_failed(live, error)
        if durable.done():
            return
        if error is None:
            durable.set_result(None)
        else:
            durable.set_exception(error)

    def _publish(self, live: LiveTask, response: a2a_pb2.StreamResponse) -> None:
        item = (response.SerializeToString(), live.last_write)  # encoded once for every subscriber
        for subscriber in live.subscribers:
            subscriber.push(item)

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
        publisher = EventPublisher(self, run)
        try:
            await self.executor.execute(run.context, publisher)
        except asyncio.CancelledError:  # only shutdown cancels a run that CancelTask did not settle
            if live.run is run and live.state not in SETTLED_STATES:
                self.record_status(run, TaskState.TASK_STATE_FAILED, _stopped_message(publisher.agent_message()))
        except Exception:
            log.exception("agent failed on task %s", live.task.id)
            if live.run is run and live.state not in TERMINAL_STATES:
                self.record_status(run, TaskState.TASK_STATE_FAILED, publisher.agent_message("The agent failed."))
        else:
            if live.run is run and live.state not in SETTLED_STATES and run.context.cancel_requested:
                self.record_status(run, TaskState.TASK_STATE_CANCELED, None)
            elif live.run is run and live.state not in SETTLED_STATES:
                log.warning("agent returned without settling task %s", live.task.id)
                message = publisher.agent_message("The agent ended without a result.")
                self.record_status(run, TaskState.TASK_STATE_FAILED, message)

    def _run_finished(self, run: TaskRun) -> None:
        """Runs when the agent's task ends in any way, even cancelled before it started."""
        if run.runner is not None:
            self._runs.discard(run.runner)
        live = run.live
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

    def _write_failed(self, live: LiveTask, error: BaseException) -> None:
        """The store refused or lost a write: the live task no longer matches what is stored, so it is
        dropped (the next request reloads the stored task) and its run, if any, is stopped."""
        log.error("could not persist task %s: %s", live.task.id, error)
        if self._live.get(live.task.id) is live:
            del self._live[live.task.id]
        run = live.run
        if run is not None and run.runner is not None:
            run.runner.cancel()

    # ---- subscribe and cancel ----------------------------------------------------------------

    async def subscribe(
        self, task_id: str, owner: str
    ) -> tuple[a2a_pb2.Task, asyncio.Future[None] | None, Subscriber, LiveTask]:
        """A subscriber to a non-terminal task, with the snapshot its stream begins with and the write
        that snapshot must wait for."""
        live = await self._live_task(task_id, owner)
        if live.state in TERMINAL_STATES:
            self._release(live)
            raise UnsupportedOperationError(
                f"task {task_id} is in a terminal state; use GetTask", metadata={"taskId": task_id}
            )
        subscriber = Subscriber(close_on_interrupt=False)
        live.subscribers.append(subscriber)
        snapshot = a2a_pb2.Task()
        snapshot.CopyFrom(live.task)
        return snapshot, live.last_write, subscriber, live

    async def unsubscribe(self, live: LiveTask, subscriber: Subscriber) -> None:
        subscriber.close()
        if subscriber in live.subscribers:
            live.subscribers.remove(subscriber)
        self._release(live)

    async def cancel(self, task_id: str, owner: str) -> a2a_pb2.Task:
        live = await self._live_task(task_id, owner)
        if live.state in TERMINAL_STATES:
            self._release(live)
            raise TaskNotCancelableError(
                f"task {task_id} is already {TaskState.Name(live.state)}", metadata={"taskId": task_id}
            )
        run = live.run
        if run is None:  # interrupted: no agent is running, so cancel it here
            self._set_status(live, TaskState.TASK_STATE_CANCELED, None)
        else:  # shielded: a caller giving up must not leave the cancel half done
            await asyncio.shield(self._cancel_run(run))
        self._release(live)
        await live.durable()
        return live.task

    async def _cancel_run(self, run: TaskRun) -> None:
        run.context.request_cancel()
        try:
            async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                await self.executor.cancel(run.context, EventPublisher(self, run))
        except Exception:
            log.exception("agent cancel handler failed on task %s", run.live.task.id)
        if run.live.state not in TERMINAL_STATES and run.live.run is run:
            self.record_status(run, TaskState.TASK_STATE_CANCELED, None)
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()

    async def fail_orphaned_tasks(self) -> int:
        """Fail the tasks a previous process left running: no agent works on them any more."""
        orphans = await self.store.running_tasks()
        for task_id, owner in orphans:
            live = await self._live_task(task_id, owner)
            message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
            self._set_status(live, TaskState.TASK_STATE_FAILED, _stopped_message(message))
            await live.durable()
            self._release(live)
        return len(orphans)

    async def close(self) -> None:
        """At shutdown: cancel every running agent (its task FAILS and its streams see that), then end
        the streams still watching tasks that wait for input."""
        for runner in list(self._runs):
            runner.cancel()
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)
        for live in list(self._live.values()):
            for subscriber in live.subscribers:
                subscriber.close()


def _check_resumable(live: LiveTask, message: a2a_pb2.Message) -> None:
    task = live.task
    if live.state in TERMINAL_STATES:
        raise UnsupportedOperationError(
            f"task {task.id} is in a terminal state and accepts no more messages", metadata={"taskId": task.id}
        )
    if message.context_id and message.context_id != task.context_id:
        raise InvalidRequestError(
            "message.context_id does not match the task's context",
            violations=[("message.context_id", f"task {task.id} belongs to context {task.context_id}")],
        )
    if live.run is not None:
        raise UnsupportedOperationError(
            f"task {task.id} is still processing an earlier message", metadata={"taskId": task.id}
        )


def _stopped_message(message: a2a_pb2.Message) -> a2a_pb2.Message:
    message.parts.add(text="The server stopped while this task was running.")
    return message


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
