"""The ceiling: a bare grpc.aio A2AService servicer with no checks, no store and no agent.

SendMessage returns one fixed, prebuilt Task shaped like the echo agent's answer; SendStreamingMessage
sends fixed, prebuilt events shaped like the chunk agent's stream. No interceptors. Runs on uvloop when
installed. `python -m bench.bare_server` prints READY_PREFIX + port and serves until SIGTERM.

With `--asks` (send.bare-asks), SendMessage also asks of gRPC what our interceptor chain asks on every call:
the request's metadata, the peer and the deadline, and it sets the trailers that echo an activated extension;
its answer is the same prebuilt Task, encoded once. What it costs beside send.bare is the part of our servers'
cost that is gRPC's own work for those asks, not our code. With `--front` (send.bare-front), calls reach it
through a2a_grpc.connection_front, what `--max-connections-per-address` puts in front of grpc.

With `--interceptor` (send.bare.interceptor), the server has our standard A2AServerInterceptor, declaring the
bench's extension as required: what that interceptor costs a servicer of one's own.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from a2a_grpc.cli import run_async
from a2a_grpc.connection_front import ConnectionFront
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.server import A2AServerInterceptor
from a2a_grpc.protocol import EXTENSIONS_HEADER
from bench.protocol import BENCH_EXTENSION_URI, CHUNKS, ECHO_TEXT, chunk_text, serve_until_signalled

TaskState = a2a_pb2.TaskState
TASK_ID = "0123456789abcdef0123456789abcdef"
CONTEXT_ID = "fedcba9876543210fedcba9876543210"
FRONT_PER_ADDRESS, FRONT_MAX_CONNECTIONS = 1_000, 100_000  # --front: caps the load never reaches


def _status(state: int) -> a2a_pb2.TaskStatus:
    ns = time.time_ns()
    stamp = timestamp_pb2.Timestamp(seconds=ns // 1_000_000_000, nanos=ns % 1_000_000_000)
    return a2a_pb2.TaskStatus(state=state, timestamp=stamp)  # type: ignore[arg-type]


def echo_response() -> a2a_pb2.SendMessageResponse:
    message = a2a_pb2.Message(
        message_id="bench-message", role=a2a_pb2.ROLE_USER, task_id=TASK_ID, context_id=CONTEXT_ID
    )
    message.parts.add(text=ECHO_TEXT)
    artifact = a2a_pb2.Artifact(artifact_id="0" * 32, name="echo")
    artifact.parts.add(text=ECHO_TEXT)
    task = a2a_pb2.Task(
        id=TASK_ID,
        context_id=CONTEXT_ID,
        status=_status(TaskState.TASK_STATE_COMPLETED),
        history=[message],
        artifacts=[artifact],
    )
    return a2a_pb2.SendMessageResponse(task=task)


def chunk_stream() -> list[a2a_pb2.StreamResponse]:
    message = a2a_pb2.Message(
        message_id="bench-message", role=a2a_pb2.ROLE_USER, task_id=TASK_ID, context_id=CONTEXT_ID
    )
    message.parts.add(text="chunks")
    snapshot = a2a_pb2.Task(
        id=TASK_ID, context_id=CONTEXT_ID, status=_status(TaskState.TASK_STATE_SUBMITTED), history=[message]
    )
    events = [a2a_pb2.StreamResponse(task=snapshot)]
    for index in range(CHUNKS):
        artifact = a2a_pb2.Artifact(artifact_id=f"{TASK_ID}-chunks", name="chunks")
        artifact.parts.add(text=chunk_text(index))
        update = a2a_pb2.TaskArtifactUpdateEvent(
            task_id=TASK_ID, context_id=CONTEXT_ID, artifact=artifact, append=index > 0, last_chunk=index == CHUNKS - 1
        )
        events.append(a2a_pb2.StreamResponse(artifact_update=update))
    done = a2a_pb2.TaskStatusUpdateEvent(
        task_id=TASK_ID, context_id=CONTEXT_ID, status=_status(TaskState.TASK_STATE_COMPLETED)
    )
    events.append(a2a_pb2.StreamResponse(status_update=done))
    return events


class BareServicer(a2a_pb2_grpc.A2AServiceServicer):
    def __init__(self) -> None:
        self._echo = echo_response()
        self._stream = chunk_stream()

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, context: Any) -> a2a_pb2.SendMessageResponse:
        return self._echo

    async def SendStreamingMessage(
        self, request: a2a_pb2.SendMessageRequest, context: Any
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        for event in self._stream:
            yield event


class AskingServicer(BareServicer):
    """BareServicer, asking gRPC on every SendMessage what our chain asks."""

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, context: Any) -> a2a_pb2.SendMessageResponse:
        metadata = context.invocation_metadata()
        context.peer()
        context.time_remaining()
        echo = next((value for key, value in metadata if key == EXTENSIONS_HEADER), "")
        context.set_trailing_metadata(((EXTENSIONS_HEADER, echo),))
        return self._echo


async def serve(asks: bool, intercepted: bool = False, front: bool = False) -> int:
    interceptors = [A2AServerInterceptor(extensions=[(BENCH_EXTENSION_URI, True)])] if intercepted else []
    server = grpc.aio.server(interceptors=interceptors)
    servicer = AskingServicer() if asks else BareServicer()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    if not front:
        return await serve_until_signalled(port, lambda: server.stop(1.0))
    relay = ConnectionFront(per_address=FRONT_PER_ADDRESS, max_connections=FRONT_MAX_CONNECTIONS)
    front_port = await relay.bind("127.0.0.1:0", reuse_port=False)
    await relay.start(port)

    async def stop() -> None:
        relay.close()
        await server.stop(1.0)

    return await serve_until_signalled(front_port, stop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--asks", action="store_true", help="ask gRPC on every SendMessage what our chain asks")
    parser.add_argument("--interceptor", action="store_true", help="with the standard A2AServerInterceptor")
    parser.add_argument(
        "--front", action="store_true", help="serve through a2a_grpc.connection_front (a cap per address)"
    )
    args = parser.parse_args()
    return run_async(serve(args.asks, args.interceptor, args.front))


if __name__ == "__main__":
    sys.exit(main())
