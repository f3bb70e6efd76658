"""The read-load scenario (issue 31): clients that flood the server with its heaviest listings, beside the
usual storm of calls, on a SQLite store filled before the server starts.

The store holds STORED_TASKS completed tasks of the anonymous caller (bench.readload.fill: through the store's
write API). A flooding client runs FLOOD concurrent ListTasks with a status filter (each counts every stored
task) and, while they are in flight, asks for readiness and GetTasks a stored task. Invariants, besides every
scenario's (the server up, nothing unhandled, memory bounded, health probed with its latency in the summary):
readiness answers SERVING while the listings run, and the GetTask answers (the listings take a bounded share
of the store's readers, so neither the readiness check nor a point read waits behind them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.generated import a2a_pb2
from bench import readload
from bench.chaos.ledger import Caller
from bench.chaos.workload import CALL_SECONDS, OPERATIONS, Client, Operations

STORED_TASKS = 20_000
FLOOD = 8  # listings in flight at once from one flooding client
V1 = ("a2a-version", "1.0")
SERVING = health_pb2.HealthCheckResponse.SERVING


def setup(workdir: Path) -> tuple[list[str], list[Caller]]:
    with concurrent.futures.ThreadPoolExecutor(1) as filler:  # setup runs on the harness's loop: fill beside it
        filler.submit(readload.fill, workdir / "tasks.db", STORED_TASKS).result()
    return [], [Caller("anonymous", (V1,))]


async def flood(client: Client) -> None:
    """FLOOD heavy listings at once; readiness and a stored task asked for while they run."""
    request = a2a_pb2.ListTasksRequest(status=a2a_pb2.TASK_STATE_COMPLETED)
    listings = [
        asyncio.ensure_future(
            client.unary("ListTasks", client.stub.ListTasks(request, metadata=client.metadata(), timeout=CALL_SECONDS))
        )
        for _ in range(FLOOD)
    ]
    try:
        await _ready(client)
        stored = a2a_pb2.GetTaskRequest(id=readload.task_id(client.rnd.randrange(STORED_TASKS)))
        answer = await client.unary(
            "GetTask under read load", client.stub.GetTask(stored, metadata=client.metadata(), timeout=CALL_SECONDS)
        )
        if answer is None:
            client.ledger.violation(f"GetTask of the stored task {stored.id} was refused under read load")
    finally:
        await asyncio.gather(*listings)


async def _ready(client: Client) -> None:
    try:
        answer = await health_pb2_grpc.HealthStub(client.channel).Check(
            health_pb2.HealthCheckRequest(), timeout=CALL_SECONDS
        )
    except grpc.aio.AioRpcError as error:
        client.record(error.code(), "readiness under read load")
        return
    if answer.status != SERVING:
        client.ledger.violation(
            f"readiness answered {health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)} under read load"
        )


READ_LOAD_OPERATIONS: Operations = (*OPERATIONS, (flood, 8))
