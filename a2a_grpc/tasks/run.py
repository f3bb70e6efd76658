"""One run of the agent on one accepted message: a record its task's machine (`TaskMachine`) owns, and what the
agent's publisher records into. Its state changes only through its named transitions: `started` (the agent's
asyncio task), `traced_by` (where its spans belong), `begin_cancel` (the client's cancel, once), and those its
machine calls: `show`, `answer` and `settle`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from a2a_grpc.agent import RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.tasks.agent_view import CallClock
from a2a_grpc.tasks.subscriber import Subscriber

if TYPE_CHECKING:  # opentelemetry is an optional extra: tracing is imported only where it is on
    from a2a_grpc.trace_context import TraceContext


class RunMachine(Protocol):
    """What a run, and whoever holds one, may ask of its task's machine (`TaskMachine`)."""

    @property
    def task(self) -> a2a_pb2.Task: ...

    @property
    def last_write(self) -> asyncio.Future[None] | None: ...

    def is_running(self, run: TaskRun) -> bool: ...

    def publish_status(
        self, run: TaskRun, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None, *, limited: bool = True
    ) -> None: ...

    def publish_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None: ...

    def reply(self, run: TaskRun, message: a2a_pb2.Message) -> None: ...

    def cancel(self, run: TaskRun) -> None: ...

    def end_run(self, run: TaskRun) -> None: ...

    def unsubscribe(self, subscriber: Subscriber) -> None: ...

    async def durable(self) -> None: ...

    async def durable_task(self) -> a2a_pb2.Task: ...


class TaskRun:
    """One execution of the agent for one accepted message. Others read its fields; they change only through its
    transitions (tests/test_machine_fields.py checks that nobody else assigns them).

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
        machine: RunMachine,
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

    # ---- transitions -------------------------------------------------------------------------------

    def started(self, runner: asyncio.Task[None]) -> None:
        """The agent runs in `runner` (an asyncio task of its own) from now on."""
        self.runner = runner

    def traced_by(self, trace: TraceContext) -> None:
        """The run's spans (and its store writes') belong under `trace` from now on: the agent's span."""
        self.trace = trace

    def begin_cancel(self, cancel: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        """The client asked to cancel the run: its machine goes CANCELLING and `cancel` runs, in an asyncio task
        a later ask joins (`cancelling`); `cancel` is closed, never run, when the machine refuses."""
        try:
            self.machine.cancel(self)
        except BaseException:
            cancel.close()
            raise
        cancelling = self.cancelling = asyncio.ensure_future(cancel)
        return cancelling

    def show(self, snapshot: a2a_pb2.Task | None, seq: int) -> None:
        """The task is shown from now on: the call's answer will be a task (`snapshot`, for a stream)."""
        self.snapshot, self.snapshot_seq = snapshot, seq
        self.opened.set_result(None)

    def answer(self, message: a2a_pb2.Message) -> None:
        """The agent answers with `message` instead of a task; the run is settled."""
        self.reply = message
        self.opened.set_result(message)
        self.settle()

    def settle(self) -> None:
        """The run's part is over: its task settled, or the run ended (a second call changes nothing)."""
        if not self.settled.done():
            self.settled.set_result(None)

    def call_over(self) -> None:
        """The call that sent the message has its answer: the agent's time_remaining() is None from now on."""
        if self.clock is not None:
            self.clock.over()

    # ---- the task, and what the agent's publisher records ------------------------------------------

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
