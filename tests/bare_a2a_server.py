"""A user's own A2A server, for the standard interceptors' process tests: the bare servicer (tests/bare_a2a.py) on
A2A stubs generated at test time, plus grpc's health service, on a grpc.aio or a sync grpc.server with our
standard interceptor enforcing CARD. Our generated modules are never imported: the fresh stubs register
lf.a2a.v1 themselves, and a second registration would stop this process at start.

    python tests/bare_a2a_server.py STUBS_DIR PORT CARD_PATH aio|sync

Serves on 127.0.0.1:PORT (health SERVING once it does) until killed. The aio server echoes on unary calls in the
response headers too (`echo_unary_headers`); the sync server in the trailers alone, as our server does by default.
"""

from __future__ import annotations

import asyncio
import sys
from concurrent import futures

import grpc
from bare_a2a import bare_servicer
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from a2a_grpc.interceptors.server import A2AServerInterceptor, A2ASyncServerInterceptor


def main(stubs: str, port: str, card: str, mode: str) -> int:
    sys.path.insert(0, stubs)
    import a2a_pb2  # type: ignore[import-not-found]
    import a2a_pb2_grpc  # type: ignore[import-not-found]

    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    address = f"127.0.0.1:{port}"
    if mode == "sync":
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8), interceptors=[A2ASyncServerInterceptor(card=card)]
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(
            bare_servicer(a2a_pb2_grpc.A2AServiceServicer, service, asynchronous=False), server
        )
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
        server.add_insecure_port(address)
        server.start()
        server.wait_for_termination()
        return 0

    async def serve() -> None:
        interceptor = A2AServerInterceptor(card=card, echo_unary_headers=True)
        server = grpc.aio.server(interceptors=[interceptor])
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(
            bare_servicer(a2a_pb2_grpc.A2AServiceServicer, service, asynchronous=True), server
        )
        health_servicer = health.aio.HealthServicer()
        await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        server.add_insecure_port(address)
        await server.start()
        await server.wait_for_termination()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
