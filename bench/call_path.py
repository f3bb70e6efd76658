"""The server's own work on one SendMessage, in process: `python -m bench.call_path [-n N] [--profile]`.

Calls the SendMessage handler our server registers with grpc (the interceptor chain, the servicer, the task
manager, the echo agent declaring one required extension, the memory store, the access log as `a2a-grpc serve`
writes it, to /dev/null) N times, one call after another on uvloop, with a stand-in for grpc's call context that
answers what the chain asks (metadata, peer, deadline) and keeps what it sets (trailers). What gRPC itself
does per call (HTTP/2, the completion queue, the call's asyncio task) is not in it: this is the part that
`scripts/bench` compares with a bare servicer. Prints microseconds per call, best of a few rounds; with
--profile, cProfile's top functions by their own time (cProfile slows every Python call down, so read its
shares, not its times).
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import time
from typing import Any, cast

import uvloop

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server.faces import V10_FACE
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.telemetry import configure_logs
from bench.agents import RequiredExtensionEchoAgent
from bench.protocol import BENCH_EXTENSION_URI, ECHO_TEXT

METADATA = (("a2a-version", "1.0"), ("a2a-extensions", BENCH_EXTENSION_URI))


class CallStandIn:
    """What the chain reads of a grpc.aio call context, and where it sets the trailers."""

    def __init__(self) -> None:
        self._trailers: tuple[tuple[str, str], ...] = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return METADATA

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> float | None:
        return None

    def set_trailing_metadata(self, trailers: tuple[tuple[str, str], ...]) -> None:
        self._trailers = trailers

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._trailers

    def done(self) -> bool:
        return False


async def per_call_us(calls: int, rounds: int, profile: cProfile.Profile | None) -> float:
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory")
    server = A2AServer(settings, agent=RequiredExtensionEchoAgent())
    await server.start()
    try:
        servicer = A2AServicer(server.manager, server.card, server.registry)
        handler: Any = server._parts.services.chain(V10_FACE).method_handlers(servicer)["SendMessage"].unary_unary
        request = a2a_pb2.SendMessageRequest()
        request.message.role = a2a_pb2.ROLE_USER
        request.message.parts.add(text=ECHO_TEXT)
        best = float("inf")
        for round_number in range(rounds):
            if profile is not None and round_number == rounds - 1:
                profile.enable()
            started = time.perf_counter()
            for sequence in range(calls):
                request.message.message_id = f"call-{round_number}-{sequence}"
                await handler(request.SerializeToString(), CallStandIn())
            best = min(best, time.perf_counter() - started)
            if profile is not None:
                profile.disable()
        return best / calls * 1e6
    finally:
        await server.stop(grace=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=5000, help="calls per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the last round")
    args = parser.parse_args(argv)
    configure_logs("INFO", "text")
    for handler in logging.getLogger().handlers:
        cast(logging.StreamHandler[Any], handler).setStream(open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    profile = cProfile.Profile() if args.profile else None
    us = uvloop.run(per_call_us(args.n, args.rounds, profile))
    print(f"{us:.1f} us per SendMessage (the server's own work)")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(35)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
