"""The agent's runs in this process: each in an asyncio task of its own (started eagerly where asyncio can:
`eager`), so a client that goes away never cancels the work; the agent's cancel handler; stopping them all at
shutdown. What the agent publishes goes to its task's machine (`TaskMachine`), and so does the end of each run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from a2a_grpc.agent import AgentExecutor, EventPublisher, TaskLimitError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.tasks.eager import start_eagerly
from a2a_grpc.tasks.rules import stopped_message
from a2a_grpc.tasks.run import TaskRun

log = logging.getLogger(__name__)

# How long CancelTask waits for the agent's own cancel handler before canceling the task itself.
CANCEL_GRACE_SECONDS = 5.0


class AgentRuns:
    """Runs the agent on accepted messages; `loop()` gives the loop the tasks live on."""

    def __init__(self, executor: AgentExecutor, loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
        self.executor = executor
        self._loop = loop
        self._runners: set[asyncio.Task[None]] = set()

    def start(self, run: TaskRun) -> None:
        """Run the agent on `run` in an asyncio task of its own; started eagerly, an agent that answers without
        waiting has settled the run, and its changes are handed to the store, on return."""
        runner = start_eagerly(self._loop(), self._execute(run))
        if runner.done():  # as the done callback would, with the task's outcome left to asyncio as there
            self._run_finished(run)
            return
        run.started(runner)
        self._runners.add(runner)
        runner.add_done_callback(lambda _: self._run_finished(run))

    async def stop(self) -> None:
        """Cancel every running agent (its task FAILS) and wait until all have ended."""
        for runner in list(self._runners):
            runner.cancel()
        if self._runners:
            await asyncio.gather(*self._runners, return_exceptions=True)

    # ---- the agent's asyncio task ------------------------------------------------------------

    async def _execute(self, run: TaskRun) -> None:
        traced = run.trace
        if traced is None:
            await self._run_agent(run)
            return
        with traced.agent_span(run.task_id, run.task.context_id) as span:
            run.traced_by(span.trace)  # the run's store writes are the agent span's children
            error = await self._run_agent(run)
            span.ended(run.task.status.state, run.reply is not None, error)

    async def _run_agent(self, run: TaskRun) -> BaseException | None:
        """Run the agent; what it raised, if anything (logged, and the task failed, here)."""
        machine = run.machine
        publisher = EventPublisher(run)
        try:
            await self.executor.execute(run.context, publisher)
        except asyncio.CancelledError as error:  # only shutdown cancels a run that CancelTask did not settle
            if machine.is_running(run):
                run.record_outcome(a2a_pb2.TASK_STATE_FAILED, stopped_message(publisher.agent_message()))
            return error
        except TaskLimitError as error:
            log.warning("agent failed on task %s: %s", run.task_id, error)
            if machine.is_running(run):
                failure = publisher.agent_message(f"The task reached a limit of this server: {error}.")
                run.record_outcome(a2a_pb2.TASK_STATE_FAILED, failure)
            return error
        except Exception as error:
            log.exception("agent failed on task %s", run.task_id)
            if machine.is_running(run):
                run.record_outcome(a2a_pb2.TASK_STATE_FAILED, publisher.agent_message("The agent failed."))
            return error
        else:
            if machine.is_running(run) and run.context.cancel_requested:
                run.record_outcome(a2a_pb2.TASK_STATE_CANCELED, None)
            elif machine.is_running(run):
                log.warning("agent returned without settling task %s", run.task_id)
                message = publisher.agent_message("The agent ended without a result.")
                run.record_outcome(a2a_pb2.TASK_STATE_FAILED, message)
        return None

    def _run_finished(self, run: TaskRun) -> None:
        """Runs when the agent's task ends in any way, even cancelled before it started."""
        if run.runner is not None:
            self._runners.discard(run.runner)
        run.machine.end_run(run)

    # ---- cancel ------------------------------------------------------------------------------

    def cancel_once(self, run: TaskRun) -> asyncio.Future[None]:
        """Ask the agent to cancel; once per run, so a concurrent CancelTask waits for that outcome (the
        future returned)."""
        cancelling = run.cancelling
        if cancelling is None:
            cancelling = run.begin_cancel(self._cancel_run(run))
        return cancelling

    async def _cancel_run(self, run: TaskRun) -> None:
        run.context.request_cancel()
        cancel = getattr(self.executor, "cancel", None)  # optional: the server warned at start when it is missing
        try:
            if cancel is not None:
                async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                    await cancel(run.context, EventPublisher(run))
        except Exception:
            log.exception("agent cancel handler failed on task %s", run.task_id)
        if run.machine.is_running(run):
            run.record_outcome(a2a_pb2.TASK_STATE_CANCELED, None)
        runner = run.runner
        if runner is not None and not runner.done():
            runner.cancel()
