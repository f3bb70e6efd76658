"""What the servers and the load generator agree on. Standard library only (see bench/__init__.py)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable

# The one extension the "ext" cases declare as required and request on every call.
BENCH_EXTENSION_URI = "https://a2a-grpc.dev/bench/extensions/trace/v1"

# Message texts the bench agents react to.
ECHO_TEXT = "hello from the a2a-grpc bench"
CHUNKS_TEXT = "chunks"  # the chunk agent streams CHUNKS artifact chunks, then completes
HOLD_TEXT = "hold"  # the chunk agent asks for input first; the next message on the task streams the chunks
CHUNKS = 100
CHUNK_BYTES = 64
TICKS_PREFIX = "ticks"  # "ticks COUNT INTERVAL_MS": the tick agent publishes COUNT stamped chunks, then completes

# The push.* cases: the token of every push config the load generator sends, and how many events (so
# notifications) each echo task has: its artifact, then its COMPLETED status.
PUSH_TOKEN = "a2a-grpc-bench-push"
ECHO_EVENTS = 2

# Each server launcher prints this line, followed by its port, once it is serving.
READY_PREFIX = "BENCH-SERVER-PORT "


def chunk_text(index: int) -> str:
    """The text of artifact chunk `index` (same size for every index)."""
    return f"chunk {index:04d} ".ljust(CHUNK_BYTES, ".")


def ticks_text(count: int, interval_ms: float) -> str:
    return f"{TICKS_PREFIX} {count} {interval_ms}"


def parse_ticks_text(text: str) -> tuple[int, float]:
    """(COUNT, INTERVAL_MS) of a ticks_text."""
    _, count, interval_ms = text.split()
    return int(count), float(interval_ms)


def tick_text(index: int, published_ns: int) -> str:
    """Tick `index`, published at `published_ns` on CLOCK_MONOTONIC (one clock for every process of the machine)."""
    return f"tick {index} {published_ns}"


def parse_tick_text(text: str) -> tuple[int, int]:
    """(index, published_ns) of a tick_text."""
    _, index, published_ns = text.split()
    return int(index), int(published_ns)


async def serve_until_signalled(port: int, stop_server: Callable[[], Awaitable[object]]) -> int:
    """Announce a started server's port, serve until SIGTERM or SIGINT, then stop it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"{READY_PREFIX}{port}\n")  # one write, whole: the workers of one server share the pipe
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await stop_server()
    return 0
