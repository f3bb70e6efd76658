"""One task this process holds, and the state machine that owns its transitions.

A `TaskMachine` holds the authoritative Task (its `TaskContent`), its subscribers, its push config until its
first write, its pending write, and the run of the agent on it (`TaskRun`), if any. Its fields are its own
(tests/test_machine_fields.py checks that nobody else assigns them): everything that changes them goes
through one of its named transitions: `subscribe`, `unsubscribe`, `stop_subscribers` and `note_events` (the
streams that watch the task), `use_push_config`, `submit` (a message starts a run), `publish_status`,
`publish_artifact` and `reply` (what the run's agent publishes; a settled state settles the run), `conclude`
(the server settles a task no run here works on), `cancel` and `open_cancel_run`, `end_run`, `flush` and
`stored` (the pending write handed to the store, and its answer), `write_failed` and `take_over` (a newer
version another replica stored replaces the task). Each checks the task's `phase` first: a transition the
phase does not allow raises `TransitionError` (or, for what the agent publishes, `PublisherError`, or the A2A
error its caller answers with).

The machines of one manager share a `TaskHome` (`a2a_grpc.tasks.home`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from a2a_grpc import compaction
from a2a_grpc.agent import PublisherError, RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.store.base import TaskEvent, TaskWrite, WriteChain
from a2a_grpc.tasks.agent_view import CallClock
from a2a_grpc.tasks.content import TaskContent
from a2a_grpc.tasks.events import artifact_event, status_event
from a2a_grpc.tasks.home import TaskHome
from a2a_grpc.tasks.live import SETTLED_STATES, TaskState, copy_artifact, copy_task
from a2a_grpc.tasks.phase import RUN_PHASES, Phase, TransitionError, resting_phase
from a2a_grpc.tasks.rules import check_resumable, not_cancelable, stopped_message
from a2a_grpc.tasks.run import TaskRun
from a2a_grpc.tasks.subscriber import Subscriber, wait_durable
from a2a_grpc.tasks.watchers import Watchers

if TYPE_CHECKING:  # opentelemetry is an optional extra: tracing is imported only where it is on
    from a2a_grpc.trace_context import TraceContext


class TaskMachine:
    """A task this process works on or watches.

    `version` is that of the last write handed to the store, `seq` the number of the last event of its log;
    version 0 means no write yet: the task of a new message is not shown to anyone, nor stored, until its
    agent first publishes something (or the caller asked for it at once), so that an agent may answer with a
    Message instead. A status or artifact change may swap `task` for a rebuilt copy (`a2a_grpc.compaction`):
    read `task` afresh rather than keep it.
    """

    __slots__ = (
        "_chain",
        "_content",
        "_home",
        "_last_write",
        "_owner",
        "_pending",
        "_phase",
        "_push_config",
        "_run",
        "_seq",
        "_subscribers",
        "_version",
        "_write_error",
    )

    def __init__(self, home: TaskHome[TaskMachine], task: a2a_pb2.Task, owner: str, version: int, seq: int = 0) -> None:
        self._home = home
        self._content = TaskContent(task)
        self._owner = owner
        self._version = version
        self._seq = seq
        self._phase = resting_phase(task.status.state)
        self._subscribers = Watchers()
        self._run: TaskRun | None = None  # the run of the agent that publishes into the task now
        self._pending: TaskWrite | None = None
        self._chain = WriteChain()  # the writes made on top of the version loaded (`WriteChain`)
        self._push_config: a2a_pb2.TaskPushNotificationConfig | None = None  # stored with the task's create
        self._last_write: asyncio.Future[None] | None = None
        self._write_error: BaseException | None = None  # what callers got for the first write that failed

    @property
    def task(self) -> a2a_pb2.Task:
        return self._content.task

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def version(self) -> int:
        return self._version

    @property
    def seq(self) -> int:
        return self._seq

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def run(self) -> TaskRun | None:
        return self._run

    @property
    def last_write(self) -> asyncio.Future[None] | None:
        return self._last_write

    @property
    def write_error(self) -> BaseException | None:
        return self._write_error

    @property
    def watched(self) -> bool:
        """Whether a subscriber watches the task."""
        return bool(self._subscribers)

    @property
    def in_use(self) -> bool:
        """Whether a run works on the task here or a subscriber watches it."""
        return self._run is not None or bool(self._subscribers)

    @property
    def state(self) -> int:
        return self._content.task.status.state

    @property
    def shown(self) -> bool:
        return self._version > 0

    def is_running(self, run: TaskRun) -> bool:
        """Whether `run` is the task's run and has not settled it yet."""
        return self._run is run and self._phase in RUN_PHASES

    async def durable(self) -> None:
        await wait_durable(self._last_write)

    async def durable_task(self) -> a2a_pb2.Task:
        """The task as far as it is stored, for an answer: nothing in it a crash could still take back. The task
        once the write of its last change is durable; if the agent changed it meanwhile, the task as it stood
        then, once that newer write is durable too (changes made after that are not in it)."""
        write, version = self._last_write, self._version
        await wait_durable(write)  # raises the write's error, if it failed; done already: never suspends
        if self._version == version:  # nothing changed meanwhile: all of it is stored
            return self._content.task
        shown = copy_task(self._content.task)  # the agent went on: show where it stands once that is stored too
        await wait_durable(self._last_write)
        return shown

    # ---- subscribers and the push config --------------------------------------------------------

    def subscribe(self, subscriber: Subscriber, after: int | None = None, *, check_log: bool = False) -> None:
        """`subscriber` gets the task's events after `after` (by default, after the last one); `check_log` reads
        the stored log first (another replica may be writing it). A final task's subscriber ends once it has
        the events it missed."""
        start = self._seq if after is None else after
        subscriber.attach(self._home.log(self), start, self._seq, self._last_write, check_log=check_log)
        self._subscribers.append(subscriber)
        if self.state in TERMINAL_STATES:
            subscriber.close()

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """The subscriber's stream is over: it is closed, and the task released once nobody needs it."""
        self._subscribers.drop(subscriber)
        self._home.release(self)

    def stop_subscribers(self) -> None:
        """The server is stopping: each subscriber ends once it delivered what it knows."""
        self._subscribers.stop()

    def note_events(self, seq: int) -> None:
        """Another replica stored the task's events up to `seq`: its subscribers read them from the log."""
        self._subscribers.note(seq)

    def use_push_config(self, config: a2a_pb2.TaskPushNotificationConfig) -> None:
        """A config the message creating the task carries: a copy of it, made the task's (with an id of its own
        when it has none), is stored with the task's first write."""
        if self._version > 0:
            raise TransitionError(f"task {self.task.id} was stored already: its configs are the store's")
        own = self._push_config = a2a_pb2.TaskPushNotificationConfig()
        own.CopyFrom(config)
        own.task_id = self._content.task.id
        own.id = own.id or new_id()

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
        if created and (self._version > 0 or self._phase is not Phase.IDLE):
            raise TransitionError(f"task {self.task.id} was created already")
        if created:
            self._content.count_history(None, caller=True, limit=self._home.max_history_bytes, new_task=True)
        else:
            if self._phase is Phase.DROPPED:
                raise TransitionError(f"task {self.task.id} was dropped: it takes nothing more")
            check_resumable(self._content.task, message, busy=self._phase is not Phase.INTERRUPTED)
            self._content.count_history(message, caller=True, limit=self._home.max_history_bytes)
            self._change_status(a2a_pb2.TASK_STATE_WORKING, None, message)  # before the run: see flush
        run = self._run = TaskRun(self, context, self._home.loop, created=created, trace=trace, clock=clock)
        self._phase = Phase.RUNNING
        if subscriber is not None:
            subscriber.attach(self._home.log(self), self._seq, self._seq)
            self._subscribers.append(subscriber)
        if not created:
            self._show(run)
        elif show_now:
            self._pending_write()  # shows the task now: the caller wants its id at once
        return run

    def _show(self, run: TaskRun) -> None:
        """The task is shown from now on: the call's answer will be a task."""
        if run.opened.done():
            return
        run.show(copy_task(self._content.task) if self._subscribers else None, self._seq)

    # ---- what the run's agent publishes --------------------------------------------------------

    def publish_status(
        self, run: TaskRun, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None, *, limited: bool = True
    ) -> None:
        """`limited`: a message past the task's history bytes raises TaskLimitError (the agent's)."""
        self._check_publishing(run)
        if message is not None:
            self._content.count_history(message, caller=False, limit=self._home.max_history_bytes if limited else None)
        self._change_status(state, message)
        if state in SETTLED_STATES:
            self._settle(run, state)

    def publish_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        self._check_publishing(run)
        self._content.count_artifact(artifact, append, self._home.max_artifact_bytes)
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
        message.context_id = self._content.task.context_id
        self._subscribers.close()
        self._run = None
        self._phase = Phase.DROPPED
        self._home.forget(self)
        run.answer(message)

    def _check_publishing(self, run: TaskRun) -> None:
        if self._run is not run:
            raise PublisherError(f"the agent's run on task {self.task.id} is over: it can publish nothing more")
        if self._phase is Phase.FINAL:
            raise PublisherError(f"task {self.task.id} is already {TaskState.Name(self.state)}")

    def _settle(self, run: TaskRun, state: int) -> None:
        if state in INTERRUPTED_STATES:
            self._subscribers.close(on_interrupt=True)
            self._run = None  # the task waits for the client now: the reply may come before the agent returns
            self._phase = Phase.INTERRUPTED
        run.settle()

    # ---- the server settles a task ---------------------------------------------------------------

    def conclude(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        """Settle a task no run of this process works on (canceled, or failed for a runner that is gone)."""
        if self._phase not in (Phase.IDLE, Phase.INTERRUPTED) or state not in TERMINAL_STATES:
            raise TransitionError(
                f"task {self.task.id} cannot be made {TaskState.Name(state)} while {self._phase.value}"
            )
        if message is not None:
            self._content.count_history(message, caller=False, limit=None)
        self._change_status(state, message)

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, run: TaskRun) -> None:
        """The client asked to cancel the task's run (a second ask joins the first)."""
        if self._phase is Phase.FINAL:
            raise not_cancelable(self._content.task.id, self.state)
        if self._run is not run or self._phase not in RUN_PHASES:
            raise TransitionError(f"task {self.task.id} has no run to cancel while {self._phase.value}")
        self._phase = Phase.CANCELLING

    def open_cancel_run(self, context: RequestContext, trace: TraceContext | None) -> TaskRun:
        """A run made only to cancel a task no agent runs on here (one waiting for input, say): the agent's
        cancel handler publishes into it. It is the task's at once, so a concurrent cancel joins it and a
        message continuing the task is refused meanwhile."""
        if self._phase is Phase.FINAL:
            raise not_cancelable(self._content.task.id, self.state)
        if self._phase not in (Phase.IDLE, Phase.INTERRUPTED):
            raise TransitionError(f"task {self.task.id} cannot open a cancel run while {self._phase.value}")
        run = self._run = TaskRun(self, context, self._home.loop, created=False, trace=trace, clock=None)
        self._phase = Phase.CANCELLING
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
        if self._run is None:  # nothing more of the run is coming this turn (a newer run's write keeps its turn)
            self.flush(run.trace)
        self._home.release(self)

    def end_cancel_run(self, run: TaskRun) -> None:
        """The end of a run made by `open_cancel_run` (it has no agent of its own to end)."""
        if self._run is run:
            self._run = None
        if not run.settled.done():
            run.settle()

    # ---- a replica's reload ----------------------------------------------------------------------

    def take_over(self, task: a2a_pb2.Task, version: int, seq: int) -> None:
        """A newer version of the task another replica stored replaces the one held here."""
        if self._run is not None or self._pending is not None:
            raise TransitionError(f"task {self.task.id} is worked on here: no other replica's version replaces it")
        self._content, self._version, self._seq = TaskContent(task), version, seq
        self._phase = resting_phase(task.status.state)
        self._chain = WriteChain()  # its next write follows the version loaded, not its own last one

    # ---- changes, events and the pending write ---------------------------------------------------

    def _change_status(
        self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None, user_message: a2a_pb2.Message | None = None
    ) -> None:
        """Apply, persist and publish a new status; its message (and a user message) join the history."""
        write = self._pending_write()
        task = self._content.task
        if message is not None:
            message.task_id, message.context_id = task.id, task.context_id
        response = status_event(task, state, message)
        status = response.status_update.status
        self._content.join_history(write, user_message, message, self._home.max_history)
        if compaction.set_status(self._content, status):
            self._rebuilt()
        write.status = status
        self._publish(write, response, state)
        if state in TERMINAL_STATES:
            self._phase = Phase.FINAL
            if self._subscribers:
                self._subscribers.close()

    def _add_artifact(self, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        """Apply, persist and publish an artifact chunk."""
        task = self._content.task
        write = self._pending_write()
        if write.task is None:  # a delta keeps the chunk as published, whatever the agent does with it later
            write.artifacts.append((copy_artifact(artifact), append))
        if compaction.apply_artifact(self._content, artifact, append):
            self._rebuilt()
        self._publish(write, artifact_event(task, artifact, append, last_chunk), 0)

    def _rebuilt(self) -> None:
        pending = self._pending
        if pending is not None and pending.task is not None:  # a create write takes the task as it is at the flush
            pending.task = self._content.task

    def _pending_write(self) -> TaskWrite:
        """The write collecting this task's changes of the current event-loop turn, opened before a
        change is applied (the first one shows the task, and a stream's snapshot precedes it).

        Changes made in one turn (a new task, its artifact and its completion, say) reach the store
        as one versioned write at the end of the turn; `last_write` resolves once it is durable.
        """
        write = self._pending
        if write is None:
            run = self._run
            if not self.shown and run is not None:
                self._show(run)
            self._version += 1
            write = self._pending = TaskWrite(
                self._content.task.id, self._version, owner=self._owner, chain=self._chain
            )
            if self._version == 1:
                write.task = self._content.task  # a create: the task as it stands at the flush holds every change
                write.push_config, self._push_config = self._push_config, None
            loop = self._home.loop
            self._last_write = loop.create_future()
            loop.call_soon(self.flush, run.trace if run is not None else None)
        return write

    def _publish(self, write: TaskWrite, response: a2a_pb2.StreamResponse, state: int) -> None:
        """Add the change as the task's next event: stored with the write, and pushed to every subscriber."""
        self._seq += 1
        event = TaskEvent(self._seq, state, response.SerializeToString())
        write.events.append(event)
        if self._subscribers:
            self._subscribers.push(event, self._last_write)

    # ---- the store ---------------------------------------------------------------------------------

    def flush(self, trace: TraceContext | None) -> None:
        """Hand the pending write, if any, to the store (at the end of the turn, or now); `trace` is the run's,
        when the write was opened (else the run's now: a resumed task's message is written before its run)."""
        write, durable = self._pending, self._last_write
        if write is None:
            return
        self._pending = None
        assert durable is not None
        if trace is None and self._run is not None:
            trace = self._run.trace
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
        if self._write_error is not None:
            return
        self._write_error = error
        self._phase = Phase.DROPPED
        self._home.forget(self)
        run, self._run = self._run, None  # the run is over: it can record nothing more
        if run is not None and run.runner is not None:
            run.runner.cancel()
