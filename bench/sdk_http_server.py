# mypy: disable-error-code="import-not-found"
"""The reference SDK's JSON-RPC or HTTP+JSON server (a2a-sdk) for the bench; runs in its own venv, never in ours.

`python -m bench.sdk_http_server --binding jsonrpc|http+json` serves the SDK's Starlette routes for that binding
(`create_jsonrpc_routes` at `/`, or `create_rest_routes`) over its DefaultRequestHandler with an InMemoryTaskStore
and the bench's echo agent (bench.sdk_server), under uvicorn on a free loopback port, the way the SDK documents an
HTTP server; prints READY_PREFIX + port and serves until SIGTERM. On uvloop, as uvicorn picks it when installed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from starlette.applications import Starlette

from bench.protocol import serve_until_signalled
from bench.sdk_server import EchoExecutor, agent_card

PROTOCOL_BINDING = {"jsonrpc": "JSONRPC", "http+json": "HTTP+JSON"}


async def serve(binding: str) -> int:
    listening = socket.socket()  # bound before the card is made, which names its port; uvicorn serves on it
    listening.bind(("127.0.0.1", 0))
    port = int(listening.getsockname()[1])
    card = agent_card(port)
    del card.supported_interfaces[:]
    card.supported_interfaces.add(
        url=f"http://127.0.0.1:{port}", protocol_binding=PROTOCOL_BINDING[binding], protocol_version="1.0"
    )
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_jsonrpc_routes(handler, rpc_url="/") if binding == "jsonrpc" else create_rest_routes(handler)
    config = uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    running = asyncio.ensure_future(server.serve(sockets=[listening]))
    while not server.started:
        if running.done():
            return 1
        await asyncio.sleep(0.01)

    async def stop() -> None:
        server.should_exit = True
        await running

    return await serve_until_signalled(port, stop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binding", choices=sorted(PROTOCOL_BINDING), required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(serve(args.binding))
    return int(uvloop.run(serve(args.binding)))


if __name__ == "__main__":
    sys.exit(main())
