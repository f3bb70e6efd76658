"""Agents that tests can steer: held at a gate, stepped chunk by chunk, failing on purpose.

Each instance keeps its own controls, so a test gives every server its own agent. The server runs in
the test's event loop, so the asyncio primitives here are shared by the agent and the test.
"""

from __future__ import annotations

import asyncio

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2

TaskState = a2a_pb2.TaskState

SECRET = "db password is hunter2"  # text that must never reach a client


def chunk_text(index: int) -> str:
    return f"chunk {index};"


class PacedAgent:
    """WORKING at once, then `chunks` appends to one artifact, then COMPLETED.

    Every step after WORKING (each chunk, then the completion) waits for a permit: `step(n)` lets n
    steps out, `finish()` lets all out. `paced=False` needs no permits at all.
    """

    def __init__(self, chunks: int = 3, *, paced: bool = True) -> None:
        self.chunks = chunks
        self.started = asyncio.Event()
        self.emitted = 0
        self.cancel_calls: list[str] = []
        self._permits = asyncio.Semaphore(0)
        self._unpaced = not paced

    def step(self, count: int = 1) -> None:
        for _ in range(count):
            self._permits.release()

    def finish(self) -> None:
        self._unpaced = True
        self._permits.release()

    async def _permit(self) -> None:
        if not self._unpaced:
            await self._permits.acquire()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working("started")
        self.started.set()
        artifact_id = f"{context.task_id}-out"
        for index in range(self.chunks):
            await self._permit()
            await events.artifact(
                text=chunk_text(index),
                artifact_id=artifact_id,
                name="out",
                append=index > 0,
                last_chunk=index == self.chunks - 1,
            )
            self.emitted += 1
        await self._permit()
        await events.complete("done")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        self.cancel_calls.append(context.task_id)
        await events.canceled("stopped")


class CancelProbeAgent:
    """Works until canceled; records each cancel() call and whether the running execute saw the cancel.

    With `publish_canceled=False` its cancel() publishes nothing, so the server has to cancel the task.
    """

    def __init__(self, *, publish_canceled: bool = True) -> None:
        self.publish_canceled = publish_canceled
        self.started = asyncio.Event()
        self.cancel_calls: list[str] = []
        self.execute_saw_cancel = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working("working until canceled")
        self.started.set()
        try:
            await context.wait_cancel_requested()
        except asyncio.CancelledError:
            self.execute_saw_cancel.set()
            raise
        self.execute_saw_cancel.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        self.cancel_calls.append(context.task_id)
        if self.publish_canceled:
            await events.canceled("canceled on request")


class RaisingAgent:
    """Reports WORKING, then raises an exception whose text must stay on the server."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working()
        raise RuntimeError(SECRET)

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class SilentAgent:
    """Reports WORKING and returns without a terminal or interrupted state."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working("thinking")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


OUTCOMES: dict[str, TaskState] = {
    "complete": TaskState.TASK_STATE_COMPLETED,
    "fail": TaskState.TASK_STATE_FAILED,
    "reject": TaskState.TASK_STATE_REJECTED,
    "input": TaskState.TASK_STATE_INPUT_REQUIRED,
    "auth": TaskState.TASK_STATE_AUTH_REQUIRED,
}


class OutcomeAgent:
    """Ends in the state the message names ("complete", "fail", "input", ...), with an artifact."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        outcome = context.text().split()[0] if context.text().strip() else "complete"
        await events.artifact(text=f"outcome {outcome}", name="outcome", last_chunk=True)
        await events.status(OUTCOMES.get(outcome, TaskState.TASK_STATE_COMPLETED), f"outcome {outcome}")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


REQUIRED_EXTENSION = "https://example.com/ext/required/v1"


class RequiredExtensionAgent:
    """Echoes like the default agent, but declares an extension every call must activate."""

    extensions = [Extension(uri=REQUIRED_EXTENSION, description="Must be requested.", required=True)]

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.artifact(text=context.text(), last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()
