"""The agents our server runs in the bench: the stock echo agent with a required extension, and the chunk agent."""

from __future__ import annotations

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.extensions import Extension
from bench.protocol import BENCH_EXTENSION_URI, CHUNKS, HOLD_TEXT, chunk_text


class RequiredExtensionEchoAgent(EchoAgent):
    """The echo agent, declaring one required extension (so every call must request it)."""

    extensions = (Extension(BENCH_EXTENSION_URI, description="bench: a required extension", required=True),)


class ChunkAgent:
    """Streams CHUNKS appended artifact chunks, then completes.

    A task whose first message is HOLD_TEXT waits in INPUT_REQUIRED first (so subscribers can gather);
    the next message on it streams the chunks.
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if context.text() == HOLD_TEXT and len(context.task.history) <= 1:
            await events.input_required("waiting for the go message")
            return
        artifact_id = f"{context.task_id}-chunks"
        for index in range(CHUNKS):
            await events.artifact(
                text=chunk_text(index),
                artifact_id=artifact_id,
                name="chunks",
                append=index > 0,
                last_chunk=index == CHUNKS - 1,
            )
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()
