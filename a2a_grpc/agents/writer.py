"""An example agent that exercises streaming and multi-turn conversations.

Asked to write about something, it first asks for the tone (INPUT_REQUIRED). Given the tone in a
second message on the same task, it reports progress, streams the piece as a multi-chunk artifact
and completes. Cancelling it mid-way reaches `cancel` and stops the writing.

Run it with `a2a-grpc serve --agent a2a_grpc.agents.writer:WriterAgent`.
"""

from __future__ import annotations

import asyncio

from a2a_grpc.agent import EventPublisher, RequestContext

CHUNKS = 5


class WriterAgent:
    def __init__(self, chunk_delay: float = 0.05) -> None:
        self.chunk_delay = chunk_delay

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        topic = _first_user_text(context)
        if len(context.task.history) <= 1:
            await events.input_required(f"What tone should the piece about {topic!r} have?")
            return
        tone = context.text().strip() or "plain"
        await events.working(f"Writing a {tone} piece about {topic!r}.")
        artifact_id = f"{context.task_id}-piece"
        for index in range(CHUNKS):
            if context.cancel_requested:
                return
            await asyncio.sleep(self.chunk_delay)
            await events.artifact(
                text=f"[{tone}] part {index + 1} of {CHUNKS} about {topic}. ",
                artifact_id=artifact_id,
                name="piece",
                append=index > 0,
                last_chunk=index == CHUNKS - 1,
            )
            await events.working(f"{index + 1}/{CHUNKS} parts written.")
        await events.complete("Done.")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled("Writing stopped on request.")


def _first_user_text(context: RequestContext) -> str:
    first = context.task.history[0]
    return "\n".join(part.text for part in first.parts if part.HasField("text")) or "nothing"
