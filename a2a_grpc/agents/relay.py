"""An example agent built on the two bundled extensions, timestamp and traceability.

It counts the words of the message (a "tool" step) and, when it has a downstream agent, asks that
agent too (an "agent" step), forwarding the extensions its own caller activated. The answer is an
artifact; the final status message carries the trace. With timestamp active, both are stamped;
with traceability active, the trace nests the downstream agent's trace.

    a2a-grpc serve --agent a2a_grpc.agents.relay:RelayAgent                  # a leaf
    A2A_GRPC_RELAY_DOWNSTREAM=127.0.0.1:50051 a2a-grpc serve --listen 127.0.0.1:50052 \\
        --http-listen 127.0.0.1:8081 --agent a2a_grpc.agents.relay:RelayAgent   # a relay in front of it

`A2A_GRPC_RELAY_DOWNSTREAM` takes `host:port` or an agent card URL.
"""

from __future__ import annotations

import os
import uuid

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.client.agent_client import A2AClient, ExtensionPropagator
from a2a_grpc.errors import A2AError
from a2a_grpc.ext import timestamp, traceability
from a2a_grpc.generated import a2a_pb2

DOWNSTREAM_ENV = "A2A_GRPC_RELAY_DOWNSTREAM"


class RelayAgent:
    extensions = [timestamp.EXTENSION, traceability.EXTENSION]

    def __init__(self, downstream: str | None = None, downstream_timeout: float = 30.0) -> None:
        self.downstream = downstream if downstream is not None else os.environ.get(DOWNSTREAM_ENV) or None
        self.downstream_timeout = downstream_timeout

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        tracer = traceability.Tracer(context)
        text = context.text()
        with tracer.tool("word_count", {"text": text}):
            lines = [f"{len(text.split())} words"]
        if self.downstream:
            try:
                lines.append(f"downstream: {await self._ask_downstream(context, tracer, text)}")
            except A2AError as error:
                failure = events.agent_message(f"the downstream agent failed: {error.reason or error.message}")
                await events.fail(tracer.attach(timestamp.stamp(context, failure)))
                return
        artifact = a2a_pb2.Artifact(
            artifact_id=uuid.uuid4().hex, name="relay", parts=[a2a_pb2.Part(text="\n".join(lines))]
        )
        await events.artifact(timestamp.stamp(context, artifact), last_chunk=True)
        await events.complete(tracer.attach(timestamp.stamp(context, events.agent_message("done"))))

    async def _ask_downstream(self, context: RequestContext, tracer: traceability.Tracer, text: str) -> str:
        assert self.downstream is not None
        propagator = ExtensionPropagator(call=context.call)
        async with await A2AClient.connect(
            self.downstream, propagator=propagator, timeout=self.downstream_timeout
        ) as client:
            result = await tracer.call_agent(client, text, name="downstream")
        return answer_text(result.value)

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def answer_text(response: a2a_pb2.SendMessageResponse) -> str:
    """The text an agent answered with: its artifacts' text parts, else its message's."""
    if response.HasField("message"):
        parts = list(response.message.parts)
    else:
        parts = [part for artifact in response.task.artifacts for part in artifact.parts]
    return " ".join(part.text for part in parts if part.HasField("text"))
