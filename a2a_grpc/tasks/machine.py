"""One task this process holds, and the state machine that owns its transitions.

A `TaskMachine` holds the authoritative Task object, its subscribers and its pending write, and the run of
the agent on it, if any. Everything that changes a task goes through one of its named transitions: `submit`
(a message starts a run), `publish_status`, `publish_artifact` and `reply` (what the run's agent publishes;
a settled state settles the run), `conclude` (the server settles a task no run here works on), `cancel` and
`open_cancel_run`, `end_run`, `flush` and `stored` (the pending write handed to the store, and its answer),
`write_failed` and `take_over` (a newer version another replica stored replaces the task). Each checks the
task's `phase` first: a transition the phase does not allow raises `TransitionError` (or, for what the agent
publishes, `PublisherError`, or the A2A error its caller answers with).

The machines of one manager share a `TaskHome` (the registry of live tasks): the loop, the limits, and the
writer that stores their writes (`Storage`).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from a2a_grpc import compaction
from a2a_grpc.agent import PublisherError, RequestContext, TaskLimitError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.store.base import TaskEvent, TaskWrite, WriteChain
from a2a_grpc.tasks.agent_view import CallClock
from a2a_grpc.tasks.live import SETTLED_STATES, TaskState, copy_artifact, copy_task, stamp_now
from a2a_grpc.tasks.rules import check_resumable, history_full, not_cancelable, stopped_message
from a2a_grpc.tasks.subscriber import Subscriber, TaskLog, wait_durable

if TYPE_CHECKING:  # opentelemetry is an optional extra: tracing is imported only where it is on
    from a2a_grpc.telemetry.tracing import TraceContext


class Phase(enum.Enum):
    IDLE = "idle"  # held for reads or streams, no run of the agent here; not settled (maybe run elsewhere)
    RUNNING = "running"  # a run of the agent here, its task shown or not yet
    CANCELLING = "cancelling"  # a run here, asked to cancel
    INTERRUPTED = "interrupted"  # waiting for input or auth; no run here
    FINAL = "final"  # a terminal state; the run that got there may still be ending
    DROPPED = "dropped"  # forgotten: the agent replied with a Message, or the store refused a write


_RUN_PHASES = (Phase.RUNNING, Phase.CANCELLING)


class TransitionError(RuntimeError):
    """A transition the task's phase does not allow: a bug of the server, never of a caller or an agent."""


class Storage(Protocol):
    """What stores a machine's writes (the TaskWriter): it answers through `stored` and `write_failed`."""

    def write(
        self, machine: TaskMachine, write: TaskWrite, durable: asyncio.Future[None], trace: TraceContext | None
    ) -> None: ...


class TaskHome(Protocol):
    """What the machines of one manager share (the registry of live tasks)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def max_history(self) -> int: ...

    @property
    def max_artifact_bytes(self) -> int: ...

    @property
    def max_history_bytes(self) -> int: ...

    def log(self, machine: TaskMachine) -> TaskLog: ...

    def forget(self, machine: TaskMachine) -> None: ...

    def release(self, machine: TaskMachine) -> None: ...


class TaskRun:
    """One execution of the agent for one accepted message: a record its machine owns, and what the agent's
    publisher records into (each `record_*` is its machine's transition for this run).

    `opened` resolves when the call's answer begins: None once the task is shown (the agent published
    something, or the caller wanted the task at once), or the agent's reply Message. `snapshot` is the task
    as a stream shows it first, taken when the task was shown to a run with subscribers, and `snapshot_seq`
    the number of the last event it includes. `trace` is where the run's spans belong with tracing on: the
    server span of the call that started it, then the agent's own span while it runs.
    """

    __slots__ = (
        "cancelling",
        "clock",
        "context",
        "created",
        "machine",
        "opened",
        "reply",
        "runner",
        "settled",
        "snapshot",
        "snapshot_seq",
        "trace",
    )

    def __init__(
        self,
        machine: TaskMachine,
        context: RequestContext,
        loop: asyncio.AbstractEventLoop,
        *,
        created: bool,
        trace: TraceContext | None,
        clock: CallClock | None,
    ) -> None:
        self.machine = machine
        self.context = context
        self.created = created  # the message created the task (else it continues one)
        self.opened: asyncio.Future[a2a_pb2.Message | None] = loop.create_future()
        self.settled: asyncio.Future[None] = loop.create_future()
        self.runner: asyncio.Task[None] | None = None
        self.cancelling: asyncio.Future[None] | None = None
        self.reply: a2a_pb2.Message | None = None
        self.snapshot: a2a_pb2.Task | None = None
        self.snapshot_seq = 0
        self.trace = trace
        self.clock = clock  # the agent's time_remaining(), told when the call is over

    def call_over(self) -> None:
        """The call that sent the message has its answer: the agent's time_remaining() is None from now on."""
        if self.clock is not None:
            self.clock.over()

    @property
    def task_id(self) -> str:
        return self.machine.task.id

    @property
    def context_id(self) -> str:
        return self.machine.task.context_id

    @property
    def task(self) -> a2a_pb2.Task:
        """The task as it stands now (the object may be replaced as the task changes)."""
        return self.machine.task

    async def durable(self) -> None:
        """Wait until the task's last change is stored."""
        await self.machine.durable()

    async def durable_task(self) -> a2a_pb2.Task:
        return await self.machine.durable_task()

    def record_status(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        self.machine.publish_status(self, state, message)

    def record_outcome(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        """The server settles the run for its agent (failed, stopped, canceled): its short message joins the
        history even past the task's history bytes, and nothing joins it after that."""
        self.machine.publish_status(self, state, message, limited=False)

    def record_artifact(self, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        self.machine.publish_artifact(self, artifact, append, last_chunk)

    def record_reply(self, message: a2a_pb2.Message) -> None:
        self.machine.reply(self, message)


class TaskMachine:
    """A task this process works on or watches.

    `version` is that of the last write handed to the store, `seq` the number of the last event of its log;
    version 0 means no write yet: the task of a new message is not shown to anyone, nor stored, until its
    agent first publishes something (or the caller asked for it at once), so that an agent may answer with a
    Message instead. A status or artifact change may swap `task` for a rebuilt copy (`a2a_grpc.compaction`):
    read `task` afresh rather than keep it.
    """

    __slots__ = (
        "_home",
        "artifact_bytes",
        "chain",
        "history_bytes",
        "last_write",
        "owner",
        "pending",
        "phase",
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

    def __init__(self, home: TaskHome, task: a2a_pb2.Task, owner: str, version: int, seq: int = 0) -> None:
        self._home = home
        self.task = task
        self.owner = owner
        self.version = version
        self.seq = seq
        self.phase = _resting_phase(task.status.state)
        self.replaced = 0
        self.rebuild_after = compaction.REBUILD_FLOOR
        self.subscribers: list[Subscriber] = []
        self.run: TaskRun | None = None  # the run of the agent that publishes into the task now
        self.pending: TaskWrite | None = None
        self.chain = WriteChain()  # the writes made on top of the version loaded (`WriteChain`)
        self.push_config: a2a_pb2.TaskPushNotificationConfig | None = None  # stored with the task's create
        self.last_write: asyncio.Future[None] | None = None
        self.write_error: BaseException | None = None  # what callers got for the first write that failed
        self.artifact_bytes: int | None = None  # counted from the task's artifacts when first needed
        self.history_bytes: int | None = None  # counted from the task's history when first needed

    @property
    def state(self) -> int:
        return self.task.status.state

    @property
    def shown(self) -> bool:
        return self.version > 0

    def is_running(self, run: TaskRun) -> bool:
        """Whether `run` is the task's run and has not settled it yet."""
        return self.run is run and self.phase in _RUN_PHASES

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

    # ---- a message starts a run --------------------------------------------------------------

    def submit(
        self,
        context: RequestContext,
        *,
        created: bool,
        trace: TraceContext | None = None,
        clock: CallClock | None = None,
        subscriber: Subscriber | None = None,
        show_now: bool = False,
    ) -> TaskRun:
        """Start a run of the agent on the context's message: the message of a new task (`created`), or one
        that continues it (joins the history as the task goes back to WORKING; A2A errors when the task takes
        no message now). `subscriber` watches the task from now on; `show_now` shows a new task at once."""
        message = context.message
        if created and (self.version > 0 or self.phase is not Phase.IDLE):
            raise TransitionError(f"task {self.task.id} was created already")
        if created:
            self._count_history(None, caller=True)  # the new task's history holds its message
        else:
            self._check_not_dropped()
            check_resumable(self.task, message, busy=self.phase is not Phase.INTERRUPTED)
            self._count_history(message, caller=True)
            message.context_id = self.task.context_id
            self._change_status(a2a_pb2.TASK_STATE_WORKING, None, message)  # before the run: see _flush_pending
        run = self.run = TaskRun(self, context, self._home.loop, created=created, trace=trace, clock=clock)
        self.phase = Phase.RUNNING
        if subscriber is not None:
            subscriber.attach(self._home.log(self), self.seq, self.seq)
            self.subscribers.append(subscriber)
        if not created:
            self._show(run)
        elif show_now:
            self._pending_write()  # shows the task now: the caller wants its id at once
        return run

    def _show(self, run: TaskRun) -> None:
        """The task is shown from now on: the call's answer will be a task."""
        if run.opened.done():
            return
        if self.subscribers:
            run.snapshot = copy_task(self.task)
            run.snapshot_seq = self.seq
        run.opened.set_result(None)

    # ---- what the run's agent publishes --------------------------------------------------------

    def publish_status(
        self, run: TaskRun, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None, *, limited: bool = True
    ) -> None:
        """`limited`: a message past the task's history bytes raises TaskLimitError (the agent's)."""
        self._check_publishing(run)
        if message is not None:
            self._count_history(message, caller=False, limited=limited)
        self._change_status(state, message)
        if state in SETTLED_STATES:
            self._settle(run, state)

    def publish_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        self._check_publishing(run)
        held = self._artifact_bytes_with(artifact, append)
        limit = self._home.max_artifact_bytes
        if held > limit:
            raise TaskLimitError(
                f"task {self.task.id} may hold at most {limit} artifact bytes; this chunk would make {held}"
            )
        self.artifact_bytes = held
        self._add_artifact(artifact, append, last_chunk)

    def reply(self, run: TaskRun, message: a2a_pb2.Message) -> None:
        """The agent answers with `message` instead of a task: the task is dropped, never stored."""
        self._check_publishing(run)
        if run.opened.done():
            raise PublisherError(
                f"reply() must come before anything else is published for task {self.task.id}, "
                "and only for a new message the caller did not ask to return at once"
            )
        message.task_id = ""
        message.context_id = self.task.context_id
        run.reply = message
        run.opened.set_result(message)
        for subscriber in self.subscribers:
            subscriber.close()
        self.subscribers.clear()
        self.run = None
        self.phase = Phase.DROPPED
        self._home.forget(self)
        run.settled.set_result(None)

    def _check_publishing(self, run: TaskRun) -> None:
        if self.run is not run:
            raise PublisherError(f"the agent's run on task {self.task.id} is over: it can publish nothing more")
        if self.phase is Phase.FINAL:
            raise PublisherError(f"task {self.task.id} is already {TaskState.Name(self.state)}")

    def _settle(self, run: TaskRun, state: int) -> None:
        if state in INTERRUPTED_STATES:
            for subscriber in self.subscribers:
                if subscriber.close_on_interrupt:
                    subscriber.close()
            self.subscribers = [s for s in self.subscribers if not s.closed]
            self.run = None  # the task waits for the client now: the reply may come before the agent returns
            self.phase = Phase.INTERRUPTED
        if not run.settled.done():
            run.settled.set_result(None)

    # ---- the server settles a task ---------------------------------------------------------------

    def conclude(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        """Settle a task no run of this process works on (canceled, or failed for a runner that is gone)."""
        if self.phase not in (Phase.IDLE, Phase.INTERRUPTED) or state not in TERMINAL_STATES:
            raise TransitionError(
                f"task {self.task.id} cannot be made {TaskState.Name(state)} while {self.phase.value}"
            )
        if message is not None:
            self._count_history(message, caller=False, limited=False)
        self._change_status(state, message)

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, run: TaskRun) -> None:
        """The client asked to cancel the task's run (a second ask joins the first)."""
        if self.phase is Phase.FINAL:
            raise not_cancelable(self.task.id, self.state)
        if self.run is not run or self.phase not in _RUN_PHASES:
            raise TransitionError(f"task {self.task.id} has no run to cancel while {self.phase.value}")
        self.phase = Phase.CANCELLING

    def open_cancel_run(self, context: RequestContext, trace: TraceContext | None) -> TaskRun:
        """A run made only to cancel a task no agent runs on here (one waiting for input, say): the agent's
        cancel handler publishes into it. It is the task's at once, so a concurrent cancel joins it and a
        message continuing the task is refused meanwhile."""
        if self.phase is Phase.FINAL:
            raise not_cancelable(self.task.id, self.state)
        if self.phase not in (Phase.IDLE, Phase.INTERRUPTED):
            raise TransitionError(f"task {self.task.id} cannot open a cancel run while {self.phase.value}")
        run = self.run = TaskRun(self, context, self._home.loop, created=False, trace=trace, clock=None)
        self.phase = Phase.CANCELLING
        return run

    # ---- the end of a run ------------------------------------------------------------------------

    def end_run(self, run: TaskRun) -> None:
        """The agent of `run` ended in any way, even cancelled before it started: a run that had not settled
        its task fails it; its last changes go to the store now, and the machine is released once nobody
        needs it."""
        if self.is_running(run):  # cancelled before the agent's first step
            stopped = stopped_message(a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT))
            run.record_outcome(a2a_pb2.TASK_STATE_FAILED, stopped)
        self.end_cancel_run(run)
        if self.run is None:  # nothing more of the run is coming this turn (a newer run's write keeps its turn)
            self.flush(run.trace)
        self._home.release(self)

    def end_cancel_run(self, run: TaskRun) -> None:
        """The end of a run made by `open_cancel_run` (it has no agent of its own to end)."""
        if self.run is run:
            self.run = None
        if not run.settled.done():
            run.settled.set_result(None)

    # ---- a replica's reload ----------------------------------------------------------------------

    def take_over(self, task: a2a_pb2.Task, version: int, seq: int) -> None:
        """A newer version of the task another replica stored replaces the one held here."""
        if self.run is not None or self.pending is not None:
            raise TransitionError(f"task {self.task.id} is worked on here: no other replica's version replaces it")
        self.task, self.version, self.seq = task, version, seq
        self.phase = _resting_phase(task.status.state)
        self.replaced = 0
        self.rebuild_after = compaction.REBUILD_FLOOR
        self.artifact_bytes = self.history_bytes = None  # counted afresh from what it holds now
        self.chain = WriteChain()  # its next write follows the version loaded, not its own last one

    # ---- changes, events and the pending write ---------------------------------------------------

    def _change_status(
        self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None, user_message: a2a_pb2.Message | None = None
    ) -> None:
        """Apply, persist and publish a new status; its message (and a user message) join the history."""
        write = self._pending_write()
        task = self.task
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
        excess = len(task.history) - self._home.max_history
        if excess > 0:
            if self.history_bytes is not None:
                self.history_bytes -= sum(map(a2a_pb2.Message.ByteSize, task.history[:excess]))
            del task.history[:excess]
            write.history_kept = self._home.max_history
        if compaction.set_status(self, status):
            self._rebuilt()
        write.status = status
        self._publish(write, response, state)
        if state in TERMINAL_STATES:
            self.phase = Phase.FINAL
            for subscriber in self.subscribers:
                subscriber.close()
            self.subscribers.clear()

    def _add_artifact(self, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        """Apply, persist and publish an artifact chunk."""
        task = self.task
        write = self._pending_write()
        if write.task is None:  # a delta keeps the chunk as published, whatever the agent does with it later
            write.artifacts.append((copy_artifact(artifact), append))
        if compaction.apply_artifact(self, artifact, append):
            self._rebuilt()
        response = a2a_pb2.StreamResponse()  # the event, built in place: one copy of the chunk
        event = response.artifact_update
        event.task_id, event.context_id = task.id, task.context_id
        event.artifact.CopyFrom(artifact)
        event.append, event.last_chunk = append, last_chunk
        self._publish(write, response, 0)

    def _artifact_bytes_with(self, chunk: a2a_pb2.Artifact, append: bool) -> int:
        """The bytes the task's artifacts would take with `chunk` applied (a chunk that is not appended
        replaces the artifact of its id)."""
        if self.artifact_bytes is None:
            self.artifact_bytes = sum(map(a2a_pb2.Artifact.ByteSize, self.task.artifacts))
        held = self.artifact_bytes
        if not append:
            for artifact in self.task.artifacts:
                if artifact.artifact_id == chunk.artifact_id:
                    held -= artifact.ByteSize()
                    break
        return held + chunk.ByteSize()

    def _count_history(self, message: a2a_pb2.Message | None, *, caller: bool, limited: bool = True) -> None:
        """Count `message` into the history bytes before it joins the history (None: count the history as it
        is); past the limit, a `caller`'s message is TaskHistoryFullError, the agent's TaskLimitError."""
        task = self.task
        held = self.history_bytes
        if held is None:
            held = sum(map(a2a_pb2.Message.ByteSize, task.history))
        if message is not None:
            message.task_id, message.context_id = task.id, task.context_id  # as it will be stored
            held += message.ByteSize()
        limit = self._home.max_history_bytes
        if limited and held > limit:
            if caller:
                raise history_full(task.id, limit, held, new_task=self.version == 0)
            raise TaskLimitError(
                f"task {task.id} may hold at most {limit} history bytes; this message would make {held}"
            )
        self.history_bytes = held

    def _rebuilt(self) -> None:
        pending = self.pending
        if pending is not None and pending.task is not None:  # a create write takes the task as it is at the flush
            pending.task = self.task

    def _pending_write(self) -> TaskWrite:
        """The write collecting this task's changes of the current event-loop turn, opened before a
        change is applied (the first one shows the task, and a stream's snapshot precedes it).

        Changes made in one turn (a new task, its artifact and its completion, say) reach the store
        as one versioned write at the end of the turn; `last_write` resolves once it is durable.
        """
        write = self.pending
        if write is None:
            run = self.run
            if not self.shown and run is not None:
                self._show(run)
            self.version += 1
            write = self.pending = TaskWrite(self.task.id, self.version, owner=self.owner, chain=self.chain)
            if self.version == 1:
                write.task = self.task  # a create: the task as it stands at the flush holds every change
                write.push_config, self.push_config = self.push_config, None
            loop = self._home.loop
            self.last_write = loop.create_future()
            loop.call_soon(self._flush_pending, run.trace if run is not None else None)
        return write

    def _publish(self, write: TaskWrite, response: a2a_pb2.StreamResponse, state: int) -> None:
        """Add the change as the task's next event: stored with the write, and pushed to every subscriber."""
        self.seq += 1
        event = TaskEvent(self.seq, state, response.SerializeToString())
        write.events.append(event)
        for subscriber in self.subscribers:
            subscriber.push(event, self.last_write)

    # ---- the store ---------------------------------------------------------------------------------

    def flush(self, trace: TraceContext | None) -> None:
        """Hand the pending write, if any, to the store now rather than at the end of the turn."""
        if self.pending is not None:
            self._flush_pending(trace)

    def _flush_pending(self, trace: TraceContext | None) -> None:
        """Hand the pending write to the store, unless `flush` did; `trace` is the run's, when the write was
        opened (else the run's now: a resumed task's message is written before its run starts)."""
        write, durable = self.pending, self.last_write
        if write is None:
            return
        self.pending = None
        assert durable is not None
        if trace is None and self.run is not None:
            trace = self.run.trace
        self._home.storage.write(self, write, durable, trace)

    def stored(self, durable: asyncio.Future[None], error: BaseException | None) -> None:
        """The store's answer to the write `durable` stands for."""
        if durable.done():
            return
        if error is None:
            durable.set_result(None)
        else:
            durable.set_exception(error)
            durable.exception()  # logged by the writer: asyncio need not log it again when nobody waits

    def write_failed(self, error: BaseException) -> None:
        """The store refused or lost a write: the task no longer matches what is stored, so it is dropped
        (the next request reloads the stored task) and its run, if any, is stopped. Every later write of it
        fails too, and its callers get `error`, the first failure's."""
        if self.write_error is not None:
            return
        self.write_error = error
        self.phase = Phase.DROPPED
        self._home.forget(self)
        run, self.run = self.run, None  # the run is over: it can record nothing more
        if run is not None and run.runner is not None:
            run.runner.cancel()

    def _check_not_dropped(self) -> None:
        if self.phase is Phase.DROPPED:
            raise TransitionError(f"task {self.task.id} was dropped: it takes nothing more")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A stream's start on a task: the task as the stream shows it first, the number of the last event
    that task includes, the write it must wait for, and the subscriber that yields the events after it."""

    snapshot: a2a_pb2.Task
    seq: int
    written: asyncio.Future[None] | None
    subscriber: Subscriber
    machine: TaskMachine


def _resting_phase(state: int) -> Phase:
    """The phase of a task with no run here."""
    if state in TERMINAL_STATES:
        return Phase.FINAL
    if state in INTERRUPTED_STATES:
        return Phase.INTERRUPTED
    return Phase.IDLE
