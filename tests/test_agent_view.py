"""What an agent sees of its caller's request headers: everything but the credentials, unless it asks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, send_request
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.auth import AuthSettings
from a2a_grpc.generated import a2a_pb2

TEST_SECONDS = 30
PARTNER_KEY = "partner-key-5c1d"
CARD = {
    **BASE_CARD,
    "securitySchemes": {"partner": {"apiKeySecurityScheme": {"location": "header", "name": "X-Partner-Key"}}},
    "securityRequirements": [{"schemes": {"partner": {}}}],
}
SENT = (
    *V1,
    ("x-partner-key", PARTNER_KEY),
    ("authorization", "Bearer not-for-agents"),
    ("x-api-key", "not-for-agents"),
    ("cookie", "session=not-for-agents"),
    ("x-request-origin", "billing"),
)


class HeaderAgent:
    def __init__(self, *, sees_credentials: bool = False) -> None:
        if sees_credentials:
            self.sees_credentials = True
        self.seen: list[dict[str, str]] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.seen.append({key: str(value) for key, value in context.call.metadata})
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def api_keys_file(tmp_path: Path) -> str:
    path = tmp_path / "keys.txt"
    path.write_text(f"{PARTNER_KEY}=partner\n")
    return str(path)


@pytest.mark.parametrize("sees_credentials", [False, True])
async def test_an_agent_sees_the_headers_but_not_the_credentials_unless_it_asks(
    start_server: StartServer, tmp_path: Path, sees_credentials: bool
) -> None:
    agent = HeaderAgent(sees_credentials=sees_credentials)
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=CARD, agent=agent, auth=AuthSettings(api_keys=api_keys_file(tmp_path)))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            await make_stub(channel).SendMessage(send_request(), metadata=SENT)
    [seen] = agent.seen
    assert seen["x-request-origin"] == "billing" and seen["a2a-version"] == "1.0"
    credentials = {"x-partner-key", "authorization", "x-api-key", "cookie"}
    if sees_credentials:
        assert credentials <= seen.keys() and seen["x-partner-key"] == PARTNER_KEY, seen
    else:
        assert credentials.isdisjoint(seen), seen


class ClockAgent:
    """Reads time_remaining() while its call waits for the answer, asks for input (which answers the call),
    then reads it again once told to go on."""

    def __init__(self) -> None:
        self.go_on = asyncio.Event()
        self.done = asyncio.Event()
        self.readings: list[float | None] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.readings.append(context.call.time_remaining())
        await events.input_required("and then?")
        await self.go_on.wait()
        self.readings.append(context.call.time_remaining())
        self.done.set()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_time_remaining_is_none_once_the_call_that_started_the_run_is_over(start_server: StartServer) -> None:
    agent = ClockAgent()
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(agent=agent)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            task = (await make_stub(channel).SendMessage(send_request(), metadata=V1, timeout=20)).task
        assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, "the call has its answer"
        agent.go_on.set()
        await agent.done.wait()
    during, after = agent.readings
    assert during is not None and during > 0, "the call's deadline, while the call waits"
    assert after is None, "the call is over: its deadline is no longer the agent's"
