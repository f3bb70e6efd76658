"""One scenario of the chaos harness: its servers (and PostgreSQL), its rounds of cut calls and faults, and
the invariants checked after each round and at the end. The checks' calls wait for their channel to be
ready (a server just restarted may still be in the backoff of a connection refused while it was down).

Invariants: every server process alive (no death by a signal or otherwise but the ones injected) and
nothing unhandled in its log (a traceback, a fatal error); health SERVING again once a fault ends; every
acknowledged task still there (GetTask by its caller), none listed twice; every stream the client did not cut
ended with a status; no event delivered twice to a resumed stream; a replica stopped past its lease writes
nothing to the tasks another replica failed meanwhile, and says it noticed; where the scenario limits streams
per caller, each accepted caller's whole limit of fresh SSE streams admitted at once after each round (every
stream cut, left unread or read to its end gave its slot back); resident memory growing by at most
RSS_GROWTH_BYTES from the end of the first round to the end of the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohttp
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_grpc.generated import a2a_pb2
from bench.chaos.agent import SLOW, SLOW_CHUNK_SECONDS
from bench.chaos.faces import streams_admitted
from bench.chaos.ledger import Caller, Ledger
from bench.chaos.scenarios import CARD, KILL, LEASE_SECONDS, POSTGRES_DOWN, STOP, Scenario
from bench.chaos.servers import UNHANDLED, Server
from bench.chaos.webhook import MisbehavingWebhook
from bench.chaos.workload import CALL_SECONDS, Client, one_call, stub_of
from bench.pg_cluster import PgCluster, start_cluster

CALLS_PER_ROUND = 60
CHANNELS_PER_SERVER = 3  # the last one is closed under its calls at a random moment
RSS_GROWTH_BYTES = 64 * 1024 * 1024
RECOVERY_SECONDS = 60.0  # a server must be SERVING again this soon after a fault ends
POSTGRES_DOWN_SECONDS = 10.0
STOPPED_LEASES = 3  # a stopped replica stays stopped this many lease periods
SLOW_TASKS = 3  # started on a replica just before it is stopped
NOTICE_SECONDS, NOTICE_POLL_SECONDS = 60.0, 0.1  # how long a replica may take to fail, or notice, a takeover
PROBE_SECONDS = 0.1
SCRAPE_SECONDS = 0.05
CHECK_CONCURRENCY = 16
RATE_LIMITED_TRIES, RATE_LIMITED_PAUSE = 100, 0.1  # a check refused by the rate limit is tried again
POSTGRES = "postgres"  # in `down` while PostgreSQL is stopped
NOTICED = re.compile(r"changed by another replica meanwhile")


@dataclass
class ScenarioRun:
    scenario: Scenario
    seed: int
    workdir: Path
    ledger: Ledger
    servers: list[Server] = field(default_factory=list)
    callers: list[Caller] = field(default_factory=list)
    postgres: PgCluster | None = None
    webhook: MisbehavingWebhook | None = None
    rss_first: dict[str, int] = field(default_factory=dict)  # server -> RSS after its first round
    rss_last: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    down: set[str] = field(default_factory=set)  # what a fault holds down now (servers, POSTGRES): not probed

    def rnd(self, round_number: int, what: str = "") -> random.Random:
        return random.Random(f"{self.seed}:{self.scenario.name}:{round_number}:{what}")

    def where(self, round_number: int) -> str:
        return f"[{self.scenario.name} round {round_number + 1}]"

    # ---- start and stop ---------------------------------------------------------------------------

    async def start(self) -> None:
        flags, self.callers = self.scenario.setup(self.workdir)
        store: list[str]
        if self.scenario.store == "postgres":
            self.postgres = await asyncio.to_thread(start_cluster)
            store = ["--store", self.postgres.url]
        else:
            store = ["--store", f"sqlite:///{self.workdir / 'tasks.db'}"]
        for index in range(self.scenario.replicas):
            name = f"{self.scenario.name}-{index + 1}"
            server = Server(name, [*store, "--card", str(CARD), *flags], self.workdir, self.scenario.env)
            self.servers.append(server)
            await asyncio.to_thread(server.start)
        if self.scenario.push:
            self.webhook = MisbehavingWebhook(self.rnd(0, "webhook"))
            await self.webhook.start()

    async def stop(self) -> None:
        for server in self.servers:
            await asyncio.to_thread(server.stop)
            for death in server.deaths:
                self.ledger.violation(f"[{self.scenario.name}] {server.name} {death}")
            self._scan(server, f"[{self.scenario.name}] at shutdown")
        if self.webhook is not None:
            await self.webhook.stop()
        if self.postgres is not None:
            await asyncio.to_thread(self.postgres.stop)

    # ---- rounds -----------------------------------------------------------------------------------

    async def round(self, number: int) -> None:
        began = time.monotonic()
        fault = self.scenario.fault_of(number)
        rnd = self.rnd(number)
        async with self._watched(number):
            if fault == STOP:
                await self._stop_a_replica(number)
            elif fault is None:
                await self._calls(number, rnd)
            else:  # calls go on while the fault lasts
                injected = asyncio.ensure_future(self._inject(fault, number, rnd.uniform(0.05, 0.3)))
                while not injected.done():
                    await self._calls(number, rnd)
                await injected
        await self._recover(number)
        await self._check(number)
        self.rounds += 1
        print(f"chaos: {self.where(number)} {time.monotonic() - began:.1f} s", file=sys.stderr)

    async def _calls(self, number: int, rnd: random.Random, servers: Sequence[Server] | None = None) -> None:
        """CALLS_PER_ROUND calls over a few channels to each server (not held down), one channel closed under them."""
        targets = [server for server in (servers or self.servers) if server.name not in self.down]
        channels = [grpc.aio.insecure_channel(server.target) for server in targets for _ in range(CHANNELS_PER_SERVER)]
        webhook = self.webhook.url if self.webhook is not None else ""
        clients = [
            Client(
                channels[index % len(channels)],
                rnd.choice(self.callers),
                self.ledger,
                self.rnd(number, str(index)),
                webhook,
                targets[index % len(channels) // CHANNELS_PER_SERVER].http,
            )
            for index in range(CALLS_PER_ROUND)
        ]
        table = self.scenario.operations
        calls = [asyncio.ensure_future(one_call(client, table)) for client in clients]
        await asyncio.sleep(rnd.random() * 0.004)
        closed = channels[CHANNELS_PER_SERVER - 1]
        await closed.close(grace=None)
        self.ledger.cuts += sum(1 for client in clients if client.channel is closed)
        await asyncio.gather(*calls)
        for channel in channels:
            await channel.close()

    async def _inject(self, fault: str, number: int, delay: float) -> None:
        await asyncio.sleep(delay)
        self.ledger.faults += 1
        if fault == KILL:
            victim = self.servers[-1]
            self.down.add(victim.name)
            await asyncio.to_thread(victim.kill)
            await asyncio.to_thread(victim.start)  # a new process on the same ports and store
            self.down.discard(victim.name)
        elif fault == POSTGRES_DOWN:
            assert self.postgres is not None
            self.down.add(POSTGRES)
            await asyncio.to_thread(self.postgres.pause)
            await asyncio.sleep(POSTGRES_DOWN_SECONDS)
            await asyncio.to_thread(self.postgres.resume)
            self.down.discard(POSTGRES)

    async def _stop_a_replica(self, number: int) -> None:
        """Start slow tasks on the first replica, SIGSTOP it for STOPPED_LEASES lease periods while the round
        runs against the other, then SIGCONT it. The other fails the tasks whose lease expired (not one it
        finds locked by a write the stopped replica had under way: that one is still the stopped replica's);
        the stopped one, back, must write nothing more to a task the other failed, and say it noticed."""
        self.ledger.faults += 1
        stopped, other = self.servers[0], self.servers[1]
        caller = self.callers[0]
        async with grpc.aio.insecure_channel(stopped.target) as channel:
            client = Client(channel, caller, self.ledger, self.rnd(number, "slow"))
            sent = [await client.send(SLOW, return_immediately=True) for _ in range(SLOW_TASKS)]
        running = [task_id for task_id in sent if task_id]
        await asyncio.sleep(SLOW_CHUNK_SECONDS)  # their first writes stored
        self.down.add(stopped.name)
        stopped.signal(signal.SIGSTOP)
        try:
            await self._calls(number, self.rnd(number), [other])
            await asyncio.sleep(STOPPED_LEASES * LEASE_SECONDS)
            seen = await self._failed_by(other, caller, running)
        finally:
            offset = stopped.log_size()
            stopped.signal(signal.SIGCONT)
            self.down.discard(stopped.name)
        failed = {task_id: task for task_id, task in seen.items() if task.status.state == a2a_pb2.TASK_STATE_FAILED}
        if running and not failed:
            self.ledger.violation(f"{self.where(number)} no task of a replica stopped past its lease was failed")
        if failed and not await self._noticed(stopped, offset):
            self.ledger.violation(f"{self.where(number)} the replica back from SIGSTOP did not say it lost its tasks")
        after = await self._tasks(other, caller, list(failed))
        changed = {
            task_id: _differences(failed[task_id], task) for task_id, task in after.items() if task != failed[task_id]
        }
        if changed:
            self.ledger.violation(
                f"{self.where(number)} a replica back from SIGSTOP wrote to tasks failed meanwhile: {changed}"
            )

    async def _failed_by(self, other: Server, caller: Caller, task_ids: Sequence[str]) -> dict[str, a2a_pb2.Task]:
        """The tasks as `other` shows them, once it failed one of them (it may be slow to: a busy machine),
        or as they are after NOTICE_SECONDS."""
        for _ in range(round(NOTICE_SECONDS / NOTICE_POLL_SECONDS)):
            tasks = await self._tasks(other, caller, task_ids)
            if any(task.status.state == a2a_pb2.TASK_STATE_FAILED for task in tasks.values()):
                return tasks
            await asyncio.sleep(NOTICE_POLL_SECONDS)
        return await self._tasks(other, caller, task_ids)

    async def _noticed(self, stopped: Server, offset: int) -> bool:
        """Whether the replica back from SIGSTOP says (after `offset` in its log), within NOTICE_SECONDS, that
        another changed its tasks (its agents wake and try to publish; their writes must be refused)."""
        for _ in range(round(NOTICE_SECONDS / NOTICE_POLL_SECONDS)):
            if NOTICED.search(stopped.output_since(offset)):
                return True
            await asyncio.sleep(NOTICE_POLL_SECONDS)
        return False

    async def _tasks(self, server: Server, caller: Caller, task_ids: Sequence[str]) -> dict[str, a2a_pb2.Task]:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = stub_of(channel)
            found = {}
            for task_id in task_ids:
                found[task_id] = await stub.GetTask(
                    a2a_pb2.GetTaskRequest(id=task_id),
                    metadata=caller.metadata,
                    timeout=CALL_SECONDS,
                    wait_for_ready=True,
                )
            return found

    # ---- what runs beside the rounds --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _watched(self, number: int) -> AsyncIterator[None]:
        """Health probed (its latency recorded) and /metrics scraped while the round runs."""
        helpers = [asyncio.ensure_future(self._probe())]
        if self.scenario.scrape_metrics:
            helpers.append(asyncio.ensure_future(self._scrape(number)))
        try:
            yield
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _probe(self) -> None:
        channels = {server.name: grpc.aio.insecure_channel(server.target) for server in self.servers}
        try:
            while True:
                for server in self.servers:
                    if server.name in self.down or POSTGRES in self.down:
                        continue
                    started = time.perf_counter()
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await health_pb2_grpc.HealthStub(channels[server.name]).Check(
                            health_pb2.HealthCheckRequest(), timeout=5
                        )
                        self.ledger.health_latencies.append(time.perf_counter() - started)
                await asyncio.sleep(PROBE_SECONDS)
        finally:
            for channel in channels.values():
                await channel.close()

    async def _scrape(self, number: int) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                for server in self.servers:
                    async with session.get(f"{server.http}/metrics") as response:
                        body = await response.read()
                        if response.status != 200 or b"a2a_" not in body:
                            self.ledger.violation(f"{self.where(number)} /metrics answered {response.status}")
                await asyncio.sleep(SCRAPE_SECONDS)

    # ---- invariants -------------------------------------------------------------------------------

    async def _recover(self, number: int) -> None:
        for server in self.servers:
            if not server.alive():
                self.ledger.violation(f"{self.where(number)} {server.name} {server.death()}: {server.tail(600)}")
                server.deaths.clear()
                await asyncio.to_thread(server.start)
                continue
            try:
                await asyncio.to_thread(server.wait_serving, RECOVERY_SECONDS)
            except RuntimeError as error:
                self.ledger.violation(f"{self.where(number)} {error}")

    async def _check(self, number: int) -> None:
        for server in self.servers:
            self._scan(server, self.where(number))
            rss = server.rss()
            self.rss_first.setdefault(server.name, rss)
            self.rss_last[server.name] = rss
        await self._acknowledged_are_there(number)
        if self.scenario.stream_slots:
            await self._stream_slots_returned(number)

    def _scan(self, server: Server, where: str) -> None:
        output = server.new_output()
        found = UNHANDLED.search(output)
        if found:
            start = max(0, found.start() - 200)
            self.ledger.violation(f"{where} {server.name} logged: {output[start : found.start() + 800]}")

    async def _stream_slots_returned(self, number: int) -> None:
        for server in self.servers:
            for caller in self.callers:
                if caller.accepted:
                    problem = await streams_admitted(server.http, caller, self.scenario.stream_slots)
                    if problem is not None:
                        self.ledger.violation(
                            f"{self.where(number)} {caller.name}'s fresh streams on {server.name}: {problem}"
                        )

    async def _acknowledged_are_there(self, number: int) -> None:
        """Every task answered so far is found by its caller (on a replica chosen by the dice)."""
        rnd = self.rnd(number, "check")
        limit = asyncio.Semaphore(CHECK_CONCURRENCY)
        channels = {server.name: grpc.aio.insecure_channel(server.target) for server in self.servers}

        async def check(task_id: str, caller: Caller) -> None:
            server = rnd.choice(self.servers)
            request = a2a_pb2.GetTaskRequest(id=task_id, history_length=0)
            get = stub_of(channels[server.name]).GetTask
            async with limit:
                try:
                    await patiently(
                        lambda: get(request, metadata=caller.metadata, timeout=CALL_SECONDS, wait_for_ready=True)
                    )
                except grpc.aio.AioRpcError as error:
                    self.ledger.violation(
                        f"{self.where(number)} acknowledged task {task_id} of {caller.name}: GetTask on "
                        f"{server.name} {error.code().name} {error.details()}"
                    )

        try:
            await asyncio.gather(*(check(task_id, caller) for task_id, caller in self.ledger.acknowledged.items()))
        finally:
            for channel in channels.values():
                await channel.close()
        self.ledger.acknowledged.clear()  # each task is checked once, in the round that acknowledged it

    async def finish(self) -> None:
        """The end-of-scenario invariants: memory growth, and no task listed twice to any accepted caller."""
        for name, first in self.rss_first.items():
            growth = self.rss_last[name] - first
            if self.rounds > 1 and growth > RSS_GROWTH_BYTES:
                self.ledger.violation(
                    f"[{self.scenario.name}] {name}'s memory grew {growth >> 20} MiB over the rounds "
                    f"(bound {RSS_GROWTH_BYTES >> 20} MiB)"
                )
        await self._no_task_twice()

    async def _no_task_twice(self) -> None:
        async with grpc.aio.insecure_channel(self.servers[0].target) as channel:
            stub = stub_of(channel)
            for caller in {caller for caller in self.callers if caller.accepted}:
                ids: list[str] = []
                first_messages: list[str] = []
                token = ""
                while True:
                    page = await patiently(
                        functools.partial(
                            stub.ListTasks,
                            a2a_pb2.ListTasksRequest(page_size=100, page_token=token),
                            metadata=caller.metadata,
                            timeout=CALL_SECONDS,
                            wait_for_ready=True,
                        )
                    )
                    ids += [task.id for task in page.tasks]
                    first_messages += [task.history[0].message_id for task in page.tasks if task.history]
                    token = page.next_page_token
                    if not token:
                        break
                if len(set(ids)) != len(ids) or len(set(first_messages)) != len(first_messages):
                    self.ledger.violation(f"[{self.scenario.name}] a task listed twice, or one message made two tasks")


def _differences(before: a2a_pb2.Task, after: a2a_pb2.Task) -> list[str]:
    """The fields of a task that differ between two readings of it."""
    return [
        field.name
        for field in a2a_pb2.Task.DESCRIPTOR.fields
        if getattr(before, field.name) != getattr(after, field.name)
    ]


Answer = TypeVar("Answer")


async def patiently(call: Callable[[], Awaitable[Answer]]) -> Answer:
    """`call`'s answer, tried again (a bounded number of times) while the rate limit refuses it, as a client that
    honours RetryInfo would."""
    for _ in range(RATE_LIMITED_TRIES - 1):
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
        await asyncio.sleep(RATE_LIMITED_PAUSE)
    return await call()
