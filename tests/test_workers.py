"""`a2a-grpc serve --workers N`: N server processes sharing the ports on a PostgreSQL store, a parent that
replaces a worker that dies and stops them all on SIGTERM, the settings it refuses, and the
`a2a-grpc-worker` trailer that names the process behind each call."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, send_request
from process import (
    CALL_SECONDS,
    EXIT_SECONDS,
    SERVING,
    START_SECONDS,
    Ports,
    ServerProcess,
    free_port,
    health_status,
    http_get,
    launch,
    run_serve,
    serve_process,
)
from prometheus_client.parser import text_string_to_metric_families

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.server import WORKER_TRAILER
from a2a_grpc.protocol import EXTENSIONS_HEADER

WORKERS = 2
WORKER_LINE = re.compile(r"worker (\d+)/(\d+) \(pid (\d+)\) serving")
SERVING_LINE = re.compile(r"serving A2A on (\S+) \(card on http://(\S+?)/\.well-known/agent-card\.json\)")
CHANNELS_PER_ROUND = 20
SCRAPES = 10  # each on a connection of its own, which the kernel gives to either worker
EXTENSION = "https://example.com/ext/traced/v1"
Found = TypeVar("Found")


def eventually(find: Callable[[], Found | None], what: str, server: ServerProcess | None = None) -> Found:
    """What `find` returns once it is not None, within START_SECONDS."""
    deadline = time.monotonic() + START_SECONDS
    while (found := find()) is None:
        logs = server.stderr if server is not None else ""
        assert time.monotonic() < deadline, f"{what} not within {START_SECONDS}s\n{logs}"
        time.sleep(0.05)
    return found


def started_workers(server: ServerProcess) -> list[tuple[int, int]]:
    """(index, pid) of every worker that logged it was serving, in the order they did."""
    return [(int(index), int(pid)) for index, _, pid in WORKER_LINE.findall(server.stderr)]


def serving_workers(server: ServerProcess) -> dict[int, int]:
    """Once all WORKERS have logged they serve, each index's latest pid."""

    def all_serving() -> dict[int, int] | None:
        latest = dict(started_workers(server))
        return latest if len(latest) == WORKERS else None

    return eventually(all_serving, "every worker serving", server)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def serve_workers(log_dir: Path, store: str, *args: str) -> Iterator[ServerProcess]:
    """`serve --workers 2` on `store`, SERVING; the parent, then any worker left, killed when the test ends."""
    with serve_process(log_dir, "--workers", str(WORKERS), "--grace", "1", *args, store=store) as server:
        try:
            yield server
        finally:
            server.kill()
            for _, pid in started_workers(server):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def served_by(target: str) -> int:
    """The pid in the trailers of one GetExtendedAgentCard on a connection of its own (the demo card
    has no extended card, so its answer is FAILED_PRECONDITION)."""
    options = [("grpc.use_local_subchannel_pool", 1)]  # else channels to one target share a connection
    with grpc.insecure_channel(target, options=options) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as raised:
            stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=V1, timeout=CALL_SECONDS)
    error: Any = raised.value
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
    return int(dict(error.trailing_metadata())[WORKER_TRAILER])


def pids_serving(target: str, expected: set[int]) -> set[int]:
    """The pids seen in the trailers of calls on new connections, once `expected` are all among them."""
    seen: set[int] = set()

    def all_seen() -> set[int] | None:
        seen.update(served_by(target) for _ in range(CHANNELS_PER_ROUND))
        return seen if expected <= seen else None

    return eventually(all_seen, f"calls served by each of {expected}")


def test_two_workers_on_postgresql_serve_calls_from_both_processes(tmp_path: Path, postgres_url: str) -> None:
    with serve_workers(tmp_path, postgres_url) as server:
        workers = serving_workers(server)
        seen = pids_serving(server.grpc_target, set(workers.values()))
        card = http_get(server.card_url).json()
    assert sorted(workers) == [1, 2]
    assert seen == set(workers.values())
    assert server.process.pid not in seen, "the parent serves nothing itself"
    assert card["supportedInterfaces"][0]["url"] == server.grpc_target


def calls_from_each(target: str, expected: set[int]) -> int:
    """How many calls on new connections it took until each of `expected` served at least one."""
    seen: list[int] = []

    def all_seen() -> int | None:
        seen.extend(served_by(target) for _ in range(CHANNELS_PER_ROUND))
        return len(seen) if expected <= set(seen) else None

    return eventually(all_seen, f"calls served by each of {expected}")


def scraped_calls(server: ServerProcess) -> dict[str, float]:
    """The GetExtendedAgentCard calls one scrape of `/metrics` (on a connection of its own) counts, by worker."""
    reply = http_get(f"http://{server.ports.http_target}/metrics")
    assert reply.status == 200, reply
    wanted = {"method": "GetExtendedAgentCard", "code": "FAILED_PRECONDITION"}
    return {
        sample.labels["worker"]: sample.value
        for family in text_string_to_metric_families(reply.body.decode())
        for sample in family.samples
        if sample.name == "a2a_calls_total" and wanted.items() <= sample.labels.items()
    }


def test_a_scrape_of_any_worker_counts_the_calls_of_every_worker(tmp_path: Path, postgres_url: str) -> None:
    with serve_workers(tmp_path, postgres_url) as server:
        workers = serving_workers(server)
        calls = calls_from_each(server.grpc_target, set(workers.values()))
        scrapes = [scraped_calls(server) for _ in range(SCRAPES)]
    for scrape in scrapes:  # whichever worker answered it
        assert sorted(scrape) == ["1", "2"], scrape
        assert sum(scrape.values()) == calls, scrape
        assert min(scrape.values()) > 0, "each worker served some of the calls"


def test_a_killed_worker_is_replaced_and_calls_keep_being_served(tmp_path: Path, postgres_url: str) -> None:
    with serve_workers(tmp_path, postgres_url) as server:
        workers = serving_workers(server)
        os.kill(workers[1], signal.SIGKILL)
        replacement = eventually(
            lambda: next((pid for index, pid in started_workers(server) if index == 1 and pid != workers[1]), None),
            "a new worker 1",
            server,
        )
        seen = pids_serving(server.grpc_target, {workers[2], replacement})
    assert workers[1] not in seen
    warnings = [line for line in server.stderr.splitlines() if " WARNING a2a_grpc.workers: " in line]
    assert len(warnings) == 1, server.stderr
    assert warnings[0].endswith(f"worker 1/2 (pid {workers[1]}) was killed by SIGKILL; starting a new one")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_every_worker_and_the_parent_exits_zero(
    tmp_path: Path, postgres_url: str, signum: signal.Signals
) -> None:
    with serve_workers(tmp_path, postgres_url) as server:
        workers = serving_workers(server)
        server.send_signal(signum)
        code = server.wait()
    assert code == 0, server.stderr
    assert not [pid for pid in workers.values() if alive(pid)], "no worker outlives the parent"
    assert server.stderr.count("INFO a2a_grpc.server: stopped: ") == WORKERS, "each worker drained"
    assert "Traceback" not in server.stderr, server.stderr


def test_workers_stop_when_their_parent_is_killed(tmp_path: Path, postgres_url: str) -> None:
    with serve_workers(tmp_path, postgres_url) as server:
        workers = serving_workers(server)
        server.kill()
        eventually(lambda: True if not any(alive(pid) for pid in workers.values()) else None, "workers gone", server)
    assert server.stderr.count("INFO a2a_grpc.server: stopped: ") == WORKERS, server.stderr


def test_listen_on_port_zero_gives_every_worker_the_same_picked_ports(tmp_path: Path, postgres_url: str) -> None:
    flags = ["--workers", str(WORKERS), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"]
    server = launch(tmp_path, [*flags, "--store", postgres_url, "--grace", "1"], ports=Ports(0, 0))
    try:
        lines = eventually(
            lambda: found if len(found := SERVING_LINE.findall(server.stderr)) == WORKERS else None,
            "both serving lines",
            server,
        )
        [(grpc_target, http_target)] = set(lines)
        assert not grpc_target.endswith(":0") and not http_target.endswith(":0")
        assert health_status(grpc_target) == SERVING
        card = http_get(f"http://{http_target}/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == grpc_target
        again = run_serve([*flags[:2], "--store", postgres_url, "--listen", grpc_target], cwd=tmp_path)
        assert again.stderr.splitlines() == [
            f"a2a-grpc: cannot listen on {grpc_target}: address already in use (another process holds it: choose "
            "another port with --listen HOST:PORT)"
        ]
        assert again.returncode == 1, "a second group of workers does not join the first one's port"
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("store", "named"),
    [("memory", "the memory store"), ("sqlite:///tasks.db", "the SQLite store sqlite:///tasks.db")],
    ids=["memory", "sqlite"],
)
@pytest.mark.parametrize("via", ["flag", "env"])
def test_more_than_one_worker_on_a_store_of_one_process_is_refused(
    tmp_path: Path, store: str, named: str, via: str
) -> None:
    workers = ["--workers", "2"] if via == "flag" else []
    env = {"A2A_GRPC_WORKERS": "2"} if via == "env" else {}
    done = run_serve(
        [*workers, "--store", store, "--listen", "127.0.0.1:0", "--http-listen", ""], cwd=tmp_path, env=env
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"a2a-grpc: --workers 2 needs a store all processes share (postgresql://...), not {named}"
    ]
    assert not (tmp_path / "tasks.db").exists(), "the store is not opened"


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_worker_count_that_is_not_positive_is_a_usage_error(tmp_path: Path, value: str) -> None:
    done = run_serve(["--workers", value, "--store", "memory"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"a2a-grpc: argument --workers: must be a positive whole number, got {value!r} "
        "(`a2a-grpc serve --help` lists the options)"
    ]


def test_a_port_in_use_is_refused_by_the_parent(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        target = f"127.0.0.1:{taken.getsockname()[1]}"
        done = run_serve(["--workers", "2", "--store", "postgresql://nowhere/db", "--listen", target], cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"a2a-grpc: cannot listen on {target}: address already in use (another process holds it: choose another port "
        "with --listen HOST:PORT)"
    ]


def test_workers_that_keep_dying_make_the_parent_give_up(tmp_path: Path) -> None:
    closed = f"postgresql://a2a@127.0.0.1:{free_port()}/nothing"  # each worker fails to open it and exits 1
    done = run_serve(
        ["--workers", "2", "--store", closed, "--listen", "127.0.0.1:0", "--http-listen", ""],
        cwd=tmp_path,
        timeout=EXIT_SECONDS,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len([line for line in lines if "WARNING a2a_grpc.workers: " in line]) >= 4, done.stderr
    [error] = [line for line in lines if "ERROR a2a_grpc.workers: " in line]
    assert error.endswith("exited with status 1: 5 worker deaths within 10s, giving up")


# The trailer itself, in-process: a server in worker mode on its own.


def traced_card() -> dict[str, Any]:
    """A card with an extension for the calls to activate, and an extended card for a bearer token."""
    extensions = [{"uri": EXTENSION, "description": "Activated by the calls below."}]
    capabilities = {**BASE_CARD["capabilities"], "extensions": extensions, "extendedAgentCard": True}
    return {**BASE_CARD, "capabilities": capabilities}


async def test_in_worker_mode_unary_and_stream_trailers_carry_the_pid_beside_the_echo(
    start_server: StartServer, tmp_path: Path
) -> None:
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps(traced_card()))
    server = await start_server(
        card=traced_card(), extended_card_path=str(extended), bearer_tokens={"t": "alice"}, worker_mode=True
    )
    metadata = (*V1, (EXTENSIONS_HEADER, EXTENSION), ("authorization", "Bearer t"))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        unary = stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata)
        await unary
        stream = stub.SendStreamingMessage(send_request("stream"), metadata=metadata)
        _ = [event async for event in stream]
        refused = stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=V1)  # no token
        with pytest.raises(grpc.aio.AioRpcError):
            await refused
        trailers = [tuple(await call.trailing_metadata()) for call in (unary, stream, refused)]
    pid = str(os.getpid())
    assert trailers[0] == ((EXTENSIONS_HEADER, EXTENSION), (WORKER_TRAILER, pid))
    assert trailers[1] == ((EXTENSIONS_HEADER, EXTENSION), (WORKER_TRAILER, pid))
    assert (WORKER_TRAILER, pid) in trailers[2]
    assert await refused.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_outside_worker_mode_no_call_names_its_process(start_server: StartServer) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=V1)
        with pytest.raises(grpc.aio.AioRpcError):
            await call
        assert WORKER_TRAILER not in dict(await call.trailing_metadata())
