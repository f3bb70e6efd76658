"""The agents our server runs in the bench: the stock echo agent with a required extension, the chunk agent
and the tick agent."""

from __future__ import annotations

import asyncio
import time

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.extensions import Extension
from bench.protocol import BENCH_EXTENSION_URI, CHUNKS, HOLD_TEXT, chunk_text, parse_ticks_text, tick_text


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


class TickAgent:
    """For ticks_text(COUNT, INTERVAL_MS): COUNT artifact chunks on a fixed timetable INTERVAL_MS apart, each
    stamped with the moment it was published (tick_text), then completes.

    A task whose first message is HOLD_TEXT waits in INPUT_REQUIRED first (so a subscriber can attach);
    the next message on it says how to tick.
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if context.text() == HOLD_TEXT and len(context.task.history) <= 1:
            await events.input_required("waiting for the ticks message")
            return
        count, interval_ms = parse_ticks_text(context.text())
        await events.working()
        began = time.monotonic()
        for index in range(count):
            await asyncio.sleep(max(0.0, began + index * interval_ms / 1000 - time.monotonic()))
            await events.artifact(
                text=tick_text(index, time.monotonic_ns()), artifact_id="ticks", name="ticks", append=index > 0
            )
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()
