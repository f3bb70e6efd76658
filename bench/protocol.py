"""What the servers and the load generator agree on. Standard library only (see bench/__init__.py)."""

from __future__ import annotations

# The one extension the "ext" cases declare as required and request on every call.
BENCH_EXTENSION_URI = "https://a2a-grpc.dev/bench/extensions/trace/v1"

# Message texts the bench agents react to.
ECHO_TEXT = "hello from the a2a-grpc bench"
CHUNKS_TEXT = "chunks"  # the chunk agent streams CHUNKS artifact chunks, then completes
HOLD_TEXT = "hold"  # the chunk agent asks for input first; the next message on the task streams the chunks
CHUNKS = 100
CHUNK_BYTES = 64

# Each server launcher prints this line, followed by its port, once it is serving.
READY_PREFIX = "BENCH-SERVER-PORT "


def chunk_text(index: int) -> str:
    """The text of artifact chunk `index` (same size for every index)."""
    return f"chunk {index:04d} ".ljust(CHUNK_BYTES, ".")
