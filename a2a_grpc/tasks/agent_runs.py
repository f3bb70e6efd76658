"""The agent's runs in this process: each in an asyncio task of its own (started eagerly where asyncio can:
`eager`), so a client that goes away never cancels the work; what the agent publishes, recorded into its task;
cancelling a run; stopping them all at shutdown."""

from __future__ import annotations

import asyncio
import logging

from a2a_grpc.agent import AgentExecutor, EventPublisher, PublisherError, TaskLimitError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.tasks.eager import start_eagerly
from a2a_grpc.tasks.limits import TaskLimits
from a2a_grpc.tasks.live import SETTLED_STATES, LiveTask, TaskState
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.rules import stopped_message
from a2a_grpc.tasks.run import TaskRun
from a2a_grpc.tasks.writes import TaskWriter

log = logging.getLogger(__name__)

# How long CancelTask waits for the agent's own cancel handler before canceling the task itself.
CANCEL_GRACE_SECONDS = 5.0


class AgentRuns:
    """Runs the agent on accepted messages; each `TaskRun` records what its agent publishes through here."""

    def __init__(self, executor: AgentExecutor, tasks: LiveTasks, writer: TaskWriter, limits: TaskLimits) -> None:
        self.executor = executor
        self._max_artifact_bytes = limits.max_artifact_bytes
        self._tasks = tasks
        self._writer = writer
        self._runners: set[asyncio.Task[None]] = set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._writer.loop

    def start(self, run: TaskRun) -> None:
        """Run the agent on `run` in an asyncio task of its own; started eagerly, an agent that answers without
        waiting has settled the run, and its changes are handed to the store, on return."""
        runner = start_eagerly(self.loop, self._execute(run))
        if runner is None:
            self._run_finished(run)
            return
        run.runner = runner
        self._runners.add(runner)
        runner.add_done_callback(lambda _: self._run_finished(run))

    async def stop(self) -> None:
        """Cancel every running agent (its task FAILS) and wait until all have ended."""
        for runner in list(self._runners):
            runner.cancel()
        if self._runners:
            await asyncio.gather(*self._runners, return_exceptions=True)

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
        self._writer.set_status(live, state, message)
        if state in SETTLED_STATES:
            self._settle(run, state)

    def record_artifact(self, run: TaskRun, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None:
        live = self._check_publishing(run)
        held = live.artifact_bytes_with(artifact, append)
        if held > self._max_artifact_bytes:
            raise TaskLimitError(
                f"task {live.task.id} may hold at most {self._max_artifact_bytes} artifact bytes; "
                f"this chunk would make {held}"
            )
        live.artifact_bytes = held
        self._writer.add_artifact(live, artifact, append, last_chunk)

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
        self._tasks.forget(live)
        run.settled.set_result(None)

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

    # ---- the agent's asyncio task ------------------------------------------------------------

    async def _execute(self, run: TaskRun) -> None:
        traced = run.trace
        if traced is None:
            await self._run_agent(run)
            return
        with traced.tracing.agent_span(traced, run.live.task) as span:
            run.trace = span.trace  # the run's store writes are the agent span's children
            error = await self._run_agent(run)
            span.ended(run.live.state, run.reply is not None, error)

    async def _run_agent(self, run: TaskRun) -> BaseException | None:
        """Run the agent; what it raised, if anything (logged, and the task failed, here)."""
        live = run.live
        publisher = EventPublisher(run)
        try:
            await self.executor.execute(run.context, publisher)
        except asyncio.CancelledError as error:  # only shutdown cancels a run that CancelTask did not settle
            if live.run is run and live.state not in SETTLED_STATES:
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, stopped_message(publisher.agent_message()))
            return error
        except TaskLimitError as error:
            log.warning("agent failed on task %s: %s", live.task.id, error)
            if live.run is run and live.state not in TERMINAL_STATES:
                failure = publisher.agent_message(f"The task reached a limit of this server: {error}.")
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, failure)
            return error
        except Exception as error:
            log.exception("agent failed on task %s", live.task.id)
            if live.run is run and live.state not in TERMINAL_STATES:
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, publisher.agent_message("The agent failed."))
            return error
        else:
            if live.run is run and live.state not in SETTLED_STATES and run.context.cancel_requested:
                self.record_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
            elif live.run is run and live.state not in SETTLED_STATES:
                log.warning("agent returned without settling task %s", live.task.id)
                message = publisher.agent_message("The agent ended without a result.")
                self.record_status(run, a2a_pb2.TASK_STATE_FAILED, message)
        return None

    def _run_finished(self, run: TaskRun) -> None:
        """Runs when the agent's task ends in any way, even cancelled before it started."""
        if run.runner is not None:
            self._runners.discard(run.runner)
        live = run.live
        if live.run is run and live.state not in SETTLED_STATES:  # cancelled before the agent's first step
            stopped = stopped_message(a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT))
            self.record_status(run, a2a_pb2.TASK_STATE_FAILED, stopped)
        if live.run is run:
            live.run = None
        if not run.settled.done():
            run.settled.set_result(None)
        self._writer.flush(live, run.trace)  # the run's last changes: nothing more of it is coming this turn
        self._tasks.release(live)

    # ---- cancel ------------------------------------------------------------------------------

    def cancel_once(self, run: TaskRun) -> asyncio.Future[None]:
        """Ask the agent to cancel; once per run, so a concurrent CancelTask waits for that outcome (the
        future returned)."""
        if run.cancelling is None:
            run.cancelling = asyncio.ensure_future(self._cancel_run(run))
        return run.cancelling

    def end_cancel_run(self, run: TaskRun) -> None:
        """The end of a run made only to cancel an interrupted task (it has no asyncio task of its own)."""
        if run.live.run is run:
            run.live.run = None
        if not run.settled.done():
            run.settled.set_result(None)

    async def _cancel_run(self, run: TaskRun) -> None:
        run.context.request_cancel()
        cancel = getattr(self.executor, "cancel", None)  # optional: the server warned at start when it is missing
        try:
            if cancel is not None:
                async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                    await cancel(run.context, EventPublisher(run))
        except Exception:
            log.exception("agent cancel handler failed on task %s", run.live.task.id)
        if run.live.state not in TERMINAL_STATES and run.live.run is run:
            self.record_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()
