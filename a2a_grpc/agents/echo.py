"""The default agent: a text message gets a COMPLETED task whose artifact echoes the text."""

from __future__ import annotations

from a2a_grpc.agent import EventPublisher, RequestContext


class EchoAgent:
    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.artifact(text=context.text(), name="echo", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()
