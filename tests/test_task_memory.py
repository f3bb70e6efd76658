"""A task whose parts are replaced over and over keeps a memory proportional to its size, not to its history."""

from __future__ import annotations

import asyncio

import grpc
from conftest import V1, StartServer, send_request
from rpc_helpers import Stub, make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2

ARTIFACT_BYTES = 100_000
REPLACEMENTS = 2_000  # 200 MB of replaced artifacts, left in each long-lived copy of the task without a rebuild
RSS_GROWTH_LIMIT = 100 * 2**20  # the live task and the memory store's copy grew about 400 MB without rebuilds


def artifact_text(i: int) -> str:
    return f"{i:06d}" + "x" * ARTIFACT_BYTES


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class ReplacingAgent:
    """Replaces one artifact `replacements` times, each in its own loop turn (a write of its own) when
    `yielding`; with a gate after the first, so the test can read the memory once the task is there."""

    def __init__(self, replacements: int, yielding: bool) -> None:
        self.replacements = replacements
        self.yielding = yielding
        self.started = asyncio.Event()
        self.gate = asyncio.Event()
        self.finished = asyncio.Event()
        self.seen = ""  # the artifact's text as the agent's context shows it at the end

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.artifact(text=artifact_text(0), artifact_id="big", name="big")
        self.started.set()
        await self.gate.wait()
        for i in range(1, self.replacements + 1):
            await events.artifact(text=artifact_text(i), artifact_id="big", name="big")
            if self.yielding:
                await asyncio.sleep(0)
        self.seen = context.task.artifacts[0].parts[0].text
        await events.complete()
        self.finished.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def start(start_server: StartServer, agent: ReplacingAgent) -> tuple[Stub, grpc.aio.Channel]:
    server = await start_server(agent=agent)
    channel = grpc.aio.insecure_channel(server.grpc_target)
    return make_stub(channel), channel


async def assert_final_artifact(stub: Stub, task_id: str, agent: ReplacingAgent) -> None:
    task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [a.artifact_id for a in task.artifacts] == ["big"]
    expected = artifact_text(agent.replacements)
    assert task.artifacts[0].parts[0].text == expected
    assert agent.seen == expected


async def test_replacing_an_artifact_many_times_keeps_memory_bounded(start_server: StartServer) -> None:
    agent = ReplacingAgent(REPLACEMENTS, yielding=True)
    stub, channel = await start(start_server, agent)
    async with channel:
        immediately = a2a_pb2.SendMessageConfiguration(return_immediately=True)
        sent = await stub.SendMessage(send_request("go", configuration=immediately), metadata=V1)
        await agent.started.wait()
        before = rss_bytes()
        agent.gate.set()
        await agent.finished.wait()
        growth = rss_bytes() - before
        await assert_final_artifact(stub, sent.task.id, agent)
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / 2**20:.0f} MB over {REPLACEMENTS} replacements"


async def test_a_task_rebuilt_before_its_first_write_is_stored_as_it_ends(start_server: StartServer) -> None:
    """Replacements in the first loop turn outweigh the rebuild floor: the create write takes the rebuilt task."""
    agent = ReplacingAgent(30, yielding=False)
    agent.gate.set()
    stub, channel = await start(start_server, agent)
    async with channel:
        sent = await stub.SendMessage(send_request("go"), metadata=V1)
        assert sent.task.artifacts[0].parts[0].text == artifact_text(30)
        await assert_final_artifact(stub, sent.task.id, agent)
