"""Instructions per SendMessage, counted by valgrind: `python -m bench.instructions [--calls N] [--servers ...]`.

A measure that a busy machine does not move: each server runs under callgrind (valgrind's instruction counter,
from Debian's `valgrind` package) with counting off; a loopback client (in this process, on its own) sends it
warm-up calls, counting is turned on for N calls from CONCURRENCY callers and off again, and the count is
divided by N. Every thread of the server is counted (gRPC's, the SQLite writer's), nothing of the client's.
The servers are those of `scripts/bench`'s send cases (bench.bare_server, bench.our_server) with the same
requests and headers; `serve` servers run as `a2a-grpc serve` by default (the text access log on).

Instructions are not time: code that waits on memory runs fewer of them per second. But for the same work
on the same machine the ratio of two counts tracks the ratio of CPU per call, without the noise of the
machine's other work: `scripts/bench`'s ratios are the ones users see, these tell a change's effect apart.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.protocol import EXTENSIONS_HEADER, VERSION_HEADER
from bench.protocol import BENCH_EXTENSION_URI, ECHO_TEXT, READY_PREFIX

CONCURRENCY = 16
WARMUP_CALLS = 200
CALL_TIMEOUT_SECONDS = 120.0  # valgrind runs a server some 50 times slower
START_TIMEOUT_SECONDS = 300.0
OUR_SERVER = [sys.executable, "-m", "bench.our_server"]
MEMORY = [*OUR_SERVER, "--store", "memory"]
SQLITE = [*OUR_SERVER, "--store", "sqlite:///{scratch}/sqlite.db"]  # a file of its own for each server's run
EXT = ["--agent", "echo-ext"]
NOEXT = ["--agent", "echo", "--no-extensions"]
TELEMETRY_OFF = ["--telemetry", "off"]
SERVERS: dict[str, list[str]] = {
    "bare": [sys.executable, "-m", "bench.bare_server"],
    "bare-asks": [sys.executable, "-m", "bench.bare_server", "--asks"],
    "bare.interceptor": [sys.executable, "-m", "bench.bare_server", "--interceptor"],
    "memory.ext": [*MEMORY, *EXT],
    "memory.noext": [*MEMORY, *NOEXT],
    "memory.ext.telemetry-off": [*MEMORY, *EXT, *TELEMETRY_OFF],
    "memory.ext.input-modes": [*MEMORY, *EXT, "--enforce-input-modes"],
    "sqlite.ext": [*SQLITE, *EXT],
    "sqlite.noext": [*SQLITE, *NOEXT],
    "sqlite.ext.telemetry-off": [*SQLITE, *EXT, *TELEMETRY_OFF],
}
METADATA = ((VERSION_HEADER, "1.0"), (EXTENSIONS_HEADER, BENCH_EXTENSION_URI))


def instructions_per_call(argv: list[str], calls: int, scratch: Path) -> float:
    """Start `argv` under callgrind, count the instructions of `calls` SendMessages, and stop it."""
    out = scratch / "callgrind.out"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *argv]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = _ready_port(server)
        asyncio.run(_send(port, WARMUP_CALLS, "warm-up"))
        _instrument(server.pid, "on")
        asyncio.run(_send(port, calls, "counted"))
        _instrument(server.pid, "off")
    finally:
        server.terminate()
        server.wait(START_TIMEOUT_SECONDS)
    return _total(out) / calls


def _ready_port(server: subprocess.Popen[bytes]) -> int:
    assert server.stdout is not None
    for line in server.stdout:  # the server prints its port once it serves, and nothing before
        text = line.decode()
        if text.startswith(READY_PREFIX):
            return int(text[len(READY_PREFIX) :])
    raise RuntimeError(f"the server exited with {server.wait()} before it served")


async def _send(port: int, calls: int, prefix: str) -> None:
    """`calls` SendMessages from CONCURRENCY callers on one channel, each answered COMPLETED."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        numbers = iter(range(calls))

        async def caller() -> None:
            for number in numbers:
                request = a2a_pb2.SendMessageRequest()
                request.message.role = a2a_pb2.ROLE_USER
                request.message.message_id = f"{prefix}-{number}"
                request.message.parts.add(text=ECHO_TEXT)
                answer = await stub.SendMessage(request, metadata=METADATA, timeout=CALL_TIMEOUT_SECONDS)
                if answer.task.status.state != a2a_pb2.TASK_STATE_COMPLETED:
                    raise RuntimeError(f"call {number} was answered {answer}")

        await asyncio.wait_for(asyncio.gather(*(caller() for _ in range(CONCURRENCY))), START_TIMEOUT_SECONDS)


def _instrument(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True, capture_output=True)


def _total(out: Path) -> int:
    """The instructions callgrind counted: the `totals:` line of its output."""
    for line in reversed(out.read_text().splitlines()):
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"{out} holds no totals")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="counted calls per server (default 1000)")
    parser.add_argument(
        "--servers", default="bare,memory.ext,memory.noext", help=f"comma-separated, of: {', '.join(SERVERS)}"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = [name for name in names if name not in SERVERS]
    if unknown:
        parser.error(f"unknown servers: {', '.join(unknown)}")
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is missing: install Debian's valgrind package")
    counts: dict[str, float] = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="a2a-instructions-") as scratch:
            argv_of = [part.format(scratch=scratch) for part in SERVERS[name]]
            counts[name] = instructions_per_call(argv_of, args.calls, Path(scratch))
            print(f"{name:28} {counts[name]:>12,.0f} instructions per SendMessage", flush=True)
    if "bare" in counts:
        for name, count in counts.items():
            if name != "bare":
                print(f"bare / {name:21} {counts['bare'] / count:>12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
