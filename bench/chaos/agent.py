"""The agent the chaos servers run (`--agent bench.chaos.agent:ChaosAgent`), steered by the message text:

- `echo`: one artifact, then COMPLETED;
- `ask`: INPUT_REQUIRED; the next message on the task streams STREAM_CHUNKS chunks a few ms apart, then
  COMPLETED (a task that stays open for subscribers, resumes and cancels);
- `slow`: WORKING, then a chunk every SLOW_CHUNK_SECONDS for SLOW_CHUNKS chunks, then COMPLETED (a task
  still running when a replica is killed or stopped);
- `grow` (and any message beginning with it): INPUT_REQUIRED, every time (a task whose history grows until
  the server refuses its next message: bench.chaos.growth).
"""

from __future__ import annotations

import asyncio

from a2a_grpc.agent import EventPublisher, RequestContext

ECHO, ASK, SLOW, GROW = "echo", "ask", "slow", "grow"
STREAM_CHUNKS = 6
STREAM_CHUNK_SECONDS = 0.01
SLOW_CHUNKS = 30
SLOW_CHUNK_SECONDS = 0.1


class ChaosAgent:
    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        first = len(context.task.history) <= 1
        text = context.text()
        if text.startswith(GROW):
            await events.input_required("more")
            return
        if first and text == ASK:
            await events.input_required("say go")
            return
        if first and text == SLOW:
            await self._chunks(context, events, SLOW_CHUNKS, SLOW_CHUNK_SECONDS)
            return
        if first:
            await events.artifact(text=text, name="echo", last_chunk=True)
            await events.complete()
            return
        await self._chunks(context, events, STREAM_CHUNKS, STREAM_CHUNK_SECONDS)

    async def _chunks(self, context: RequestContext, events: EventPublisher, count: int, pause: float) -> None:
        await events.working()
        for index in range(count):
            if context.cancel_requested:
                return
            await asyncio.sleep(pause)
            await events.artifact(
                text=f"chunk {index} ", artifact_id="chunks", append=index > 0, last_chunk=index == count - 1
            )
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()
