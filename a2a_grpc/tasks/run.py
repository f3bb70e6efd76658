"""One execution of the agent on one accepted message: what the agent's publisher records into."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from a2a_grpc.agent import RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.tasks.agent_view import CallClock
from a2a_grpc.tasks.live import LiveTask, copy_task

if TYPE_CHECKING:
    from a2a_grpc.tasks.agent_runs import AgentRuns
    from a2a_grpc.telemetry.tracing import TraceContext


class TaskRun:
    """One execution of the agent for one accepted message; the agent's publisher records into it.

    `opened` resolves when the call's answer begins: None once the task is shown (the agent published
    something, or the caller wanted the task at once), or the agent's reply Message. `snapshot` is the
    task as a stream shows it first, taken when the task was shown to a run with subscribers, and
    `snapshot_seq` the number of the last event it includes. `trace` is where the run's spans belong with
    tracing on: the server span of the call that started it, then the agent's own span while it runs.
    """

    __slots__ = (
        "_runs",
        "cancelling",
        "clock",
        "context",
        "created",
        "live",
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
        runs: AgentRuns,
        live: LiveTask,
        context: RequestContext,
        *,
        created: bool,
        trace: TraceContext | None = None,
    ) -> None:
        loop = runs.loop
        self._runs = runs
        self.live = live
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
        self.clock: CallClock | None = None  # the agent's time_remaining(), told when the call is over

    def call_over(self) -> None:
        """The call that sent the message has its answer: the agent's time_remaining() is None from now on."""
        if self.clock is not None:
            self.clock.over()

    @property
    def task_id(self) -> str:
        return self.live.task.id

    @property
    def task(self) -> a2a_pb2.Task:
        """The task as it stands now (the object may be replaced as the task changes)."""
        return self.live.task

    async def durable(self) -> None:
        """Wait until the task's last change is stored."""
        await self.live.durable()

    async def durable_task(self) -> a2a_pb2.Task:
        """The task as far as it is stored, for an answer (LiveTask.durable_task)."""
        return await self.live.durable_task()

    @property
    def context_id(self) -> str:
        return self.live.task.context_id

    def show(self) -> None:
        """The task is shown from now on: the call's answer will be a task."""
        if self.opened.done():
            return
        if self.live.subscribers:
            self.snapshot = copy_task(self.live.task)
            self.snapshot_seq = self.live.seq
        self.opened.set_result(None)

    def record_status(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None:
        self._runs.record_status(self, state, message)

    def record_artifact(self, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        self._runs.record_artifact(self, artifact, append, last_chunk)

    def record_reply(self, message: a2a_pb2.Message) -> None:
        self._runs.record_reply(self, message)
