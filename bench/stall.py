"""How long a large SendMessage holds up other calls: `python -m bench.stall` (scripts/bench-style, not a test).

Starts `a2a-grpc serve` (defaults: SQLite, access log on) with an echo agent that declares traceability, then,
while a prober sends a health check every PROBE_SECONDS and times each from when it was due, sends in turn:
a traceability payload of 40,000 steps (1.6 MB, refused for its size), a request over gRPC's 4 MiB limit
(refused), and one just under it of many small JSON objects (accepted: walked for its nesting). Prints the
health checks' p50, p99 and worst latency during each, ROUNDS times over, and at rest for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.ext import traceability
from a2a_grpc.generated import a2a_pb2
from bench.chaos.servers import Server
from bench.chaos.workload import text_message

PROBE_SECONDS = 0.005
REST_SECONDS = 1.0
ROUNDS = 5
TRACED = (("a2a-version", "1.0"), ("a2a-extensions", traceability.URI))
STEP = {"step_id": "", "call_type": "TOOL"}


class TracedEchoAgent(EchoAgent):
    extensions = (traceability.EXTENSION,)


def requests() -> dict[str, a2a_pb2.SendMessageRequest]:
    oversized = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    oversized.metadata.update({traceability.METADATA_KEY: {"trace_id": "", "steps": [STEP] * 40_000}})
    return {
        "a 1.6 MB traceability payload, refused": oversized,
        "a 4.3 MB request, refused": _notes(4_300_000),
        "a 3.9 MB request, walked and answered": _notes(3_900_000),
    }


def _notes(size: int) -> a2a_pb2.SendMessageRequest:
    """A request of about `size` bytes: metadata of many small JSON objects, each walked for its nesting."""
    request = a2a_pb2.SendMessageRequest(message=text_message("hi"))
    request.metadata.update({"notes": [{"n": 1}] * 1000})
    each = request.ByteSize() / 1000  # what a note adds, near enough
    request.metadata.update({"notes": [{"n": 1}] * round(size / each)})
    return request


async def probed(channel: grpc.aio.Channel, busy: Callable[[], Awaitable[object]]) -> list[float]:
    """Latencies of the health checks due every PROBE_SECONDS while `busy` runs, each from when it was due."""
    check = health_pb2_grpc.HealthStub(channel).Check
    loop = asyncio.get_running_loop()

    async def timed(due: float) -> float:
        await check(health_pb2.HealthCheckRequest(), timeout=30)
        return loop.time() - due

    work = asyncio.ensure_future(busy())
    due = loop.time()
    checks = []
    while not work.done():
        while due <= loop.time():
            checks.append(asyncio.ensure_future(timed(due)))
            due += PROBE_SECONDS
        await asyncio.sleep(max(0.0, due - loop.time()))
    await asyncio.gather(work, return_exceptions=True)
    return list(await asyncio.gather(*checks))


def describe(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p50, p99 = (ordered[math.ceil(q * len(ordered)) - 1] * 1000 for q in (0.5, 0.99))
    return f"health p50 {p50:.1f} ms, p99 {p99:.1f} ms, worst {ordered[-1] * 1000:.1f} ms ({len(ordered)} checks)"


async def measure(target: str) -> None:
    options = [("grpc.max_send_message_length", 8 * 1024 * 1024)]
    async with (
        grpc.aio.insecure_channel(target, options=options) as sending,
        grpc.aio.insecure_channel(target) as probing,
    ):
        print(f"at rest: {describe(await probed(probing, lambda: asyncio.sleep(REST_SECONDS)))}")
        send_bytes = sending.unary_unary("/lf.a2a.v1.A2AService/SendMessage")  # bytes in and out: the client's
        for name, request in requests().items():  # own encoding would stall the prober's loop
            body = request.SerializeToString()

            async def send(body: bytes = body) -> object:
                try:
                    return await send_bytes(body, metadata=TRACED, timeout=60)
                except grpc.aio.AioRpcError as error:
                    return error.code()

            latencies: list[float] = []
            outcome: object = None
            for _ in range(ROUNDS):
                started = time.perf_counter()
                latencies += await probed(probing, send)
                outcome = await send()
            code = outcome.name if isinstance(outcome, grpc.StatusCode) else "OK"
            print(f"{name} ({len(body):,} bytes, {code}, {time.perf_counter() - started:.3f} s): {describe(latencies)}")


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.stall", description=__doc__).parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="a2a-stall-") as workdir:
        flags = ["--store", f"sqlite:///{workdir}/tasks.db"]
        server = Server("stall", flags, Path(workdir), agent="bench.stall:TracedEchoAgent")
        server.start()
        try:
            asyncio.run(measure(server.target))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
