# mypy: disable-error-code="import-not-found"
"""The reference SDK's own gRPC server with our A2AServerInterceptor added, and the SDK's own client against it;
run in the SDK's venv (tests/sdk_signing_env.py), never in ours: the SDK's generated a2a_pb2 registers lf.a2a.v1,
and our interceptor must not. Our package comes from PACKAGE_DIR (a2a_grpc as it installs), and what it needs that
the SDK's venv lacks (jsonschema) from OUR_SITE, searched after the SDK's own packages.

    python sdk_intercepted.py serve PORT URI PACKAGE_DIR OUR_SITE    the SDK's GrpcHandler over its
        DefaultRequestHandler (bench/sdk_server.py's echo agent), its card declaring URI as required, our
        interceptor made from that very AgentCard message; health-free: prints READY once serving, until killed
    python sdk_intercepted.py client PORT URI                        one JSON line: what the SDK's GrpcTransport
        meets on SendMessage and SendStreamingMessage without the extension, and on SendMessage with it
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import grpc
from a2a.client.client import ClientCallContext
from a2a.client.transports.grpc import GrpcTransport
from a2a.types import a2a_pb2, a2a_pb2_grpc


async def serve(port: int, uri: str) -> None:
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.tasks import InMemoryTaskStore

    from a2a_grpc.interceptors.server import A2AServerInterceptor
    from bench.sdk_server import EchoExecutor, agent_card

    card = agent_card(port)
    card.capabilities.extensions.add(uri=uri, required=True)
    server = grpc.aio.server(interceptors=[A2AServerInterceptor(card=card)])
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("READY", flush=True)
    await server.wait_for_termination()


async def client(port: int, uri: str) -> dict[str, Any]:
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hello")])
    )
    seen: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        transport = GrpcTransport(channel, None)
        try:
            await transport.send_message(request)
        except Exception as error:
            seen["send_without"] = [type(error).__name__, str(error)]
        try:
            async for _ in transport.send_message_streaming(request):
                pass
        except Exception as error:
            seen["stream_without"] = [type(error).__name__, str(error)]
        context = ClientCallContext(service_parameters={"A2A-Extensions": uri})
        response = await transport.send_message(request, context=context)
        seen["send_with"] = a2a_pb2.TaskState.Name(response.task.status.state)
    return seen


def main() -> int:
    mode, port, uri = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "serve":
        sys.path.insert(0, sys.argv[4])
        sys.path.append(sys.argv[5])
        asyncio.run(serve(port, uri))
        return 0
    print(json.dumps(asyncio.run(client(port, uri))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
