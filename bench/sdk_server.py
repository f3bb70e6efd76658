# mypy: disable-error-code="import-not-found", allow-subclassing-any
"""The reference SDK's gRPC server (a2a-sdk) for the bench; runs in the SDK's own venv, never in ours.

`python -m bench.sdk_server --agent echo|chunks [--uvloop]` serves the SDK's GrpcHandler over its
DefaultRequestHandler with an InMemoryTaskStore, the way the SDK documents a gRPC server, on a free
loopback port; prints READY_PREFIX + port and serves until SIGTERM. The agents behave like ours: the echo
agent answers with a COMPLETED task holding one artifact with the text; the chunk agent streams
CHUNKS appended artifact chunks (after an INPUT_REQUIRED pause for a HOLD_TEXT task) and completes.
Only the standard library, grpc and the SDK are imported here (plus bench.protocol, which is stdlib).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import grpc
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2, a2a_pb2_grpc

from bench.protocol import CHUNKS, HOLD_TEXT, chunk_text, serve_until_signalled


class _Agent(AgentExecutor):
    async def _updater(self, context: RequestContext, event_queue: EventQueue) -> tuple[TaskUpdater, a2a_pb2.Task]:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        return TaskUpdater(event_queue, task.id, task.context_id), task

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater, _ = await self._updater(context, event_queue)
        await updater.cancel()


class EchoExecutor(_Agent):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater, _ = await self._updater(context, event_queue)
        await updater.add_artifact([a2a_pb2.Part(text=context.get_user_input())], name="echo", last_chunk=True)
        await updater.complete()


class ChunkExecutor(_Agent):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        first_message = context.current_task is None
        updater, task = await self._updater(context, event_queue)
        if first_message and context.get_user_input() == HOLD_TEXT:
            await updater.requires_input(updater.new_agent_message([a2a_pb2.Part(text="waiting for the go message")]))
            return
        artifact_id = f"{task.id}-chunks"
        for index in range(CHUNKS):
            await updater.add_artifact(
                [a2a_pb2.Part(text=chunk_text(index))],
                artifact_id=artifact_id,
                name="chunks",
                append=index > 0,
                last_chunk=index == CHUNKS - 1,
            )
        await updater.complete()


AGENTS: dict[str, type[_Agent]] = {"echo": EchoExecutor, "chunks": ChunkExecutor}


def agent_card(port: int) -> a2a_pb2.AgentCard:
    return a2a_pb2.AgentCard(
        name="a2a-sdk bench agent",
        description="Echoes text, or streams chunks.",
        version="1.0.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="1.0")
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a_pb2.AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"])],
    )


async def serve(agent: str) -> int:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    handler = DefaultRequestHandler(
        agent_executor=AGENTS[agent](), task_store=InMemoryTaskStore(), agent_card=agent_card(port)
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    await server.start()
    return await serve_until_signalled(port, lambda: server.stop(1.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agent", choices=sorted(AGENTS), default="echo")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (must be installed in the SDK venv)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.uvloop:
        import uvloop

        return int(uvloop.run(serve(args.agent)))
    return asyncio.run(serve(args.agent))


if __name__ == "__main__":
    sys.exit(main())
