"""Runs our A2AServer for the bench: `python -m bench.our_server --store memory --agent echo [--no-extensions]`.

Listens on a free loopback port, prints READY_PREFIX + port, serves until SIGTERM. Runs on uvloop when
it is installed, like `a2a-grpc serve`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.cli import run_async
from a2a_grpc.server import A2AServer, ServerSettings
from bench.agents import ChunkAgent, RequiredExtensionEchoAgent
from bench.protocol import serve_until_signalled

AGENTS: dict[str, Callable[[], AgentExecutor]] = {
    "echo": EchoAgent,
    "echo-ext": RequiredExtensionEchoAgent,
    "chunks": ChunkAgent,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", default="memory", help="store URL: memory or sqlite:///PATH")
    parser.add_argument("--agent", choices=sorted(AGENTS), default="echo")
    parser.add_argument(
        "--no-extensions", action="store_true", help="negotiate_extensions=False: no extension interceptor"
    )
    parser.add_argument(
        "--unary-echo",
        choices=("headers", "trailers"),
        default="trailers",
        help="echo_unary_headers: where unary calls echo a2a-extensions (trailers always)",
    )
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    settings = ServerSettings(
        listen="127.0.0.1:0",
        http_listen="",
        store_url=args.store,
        grace_seconds=1.0,
        missing_version_means="0.3",
        negotiate_extensions=not args.no_extensions,
        echo_unary_headers=args.unary_echo == "headers",
    )
    agent: AgentExecutor = AGENTS[args.agent]()
    server = A2AServer(settings, agent=agent)
    await server.start()
    return await serve_until_signalled(server.port, lambda: server.stop(1.0))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    return run_async(serve(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
