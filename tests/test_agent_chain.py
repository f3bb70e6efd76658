"""An agent chain: agent A (one server) calls agent B (another server) through our client."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BASE_CARD, StartServer

from a2a_grpc.agents.relay import RelayAgent
from a2a_grpc.client import A2AClient
from a2a_grpc.ext import timestamp, traceability
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer

BOTH = [traceability.URI, timestamp.URI]
NEEDED = "https://example.com/ext/needed-downstream/v1"


async def _chain(
    start_server: StartServer, *, b_card: dict[str, Any] | None = None, via_card: bool = False
) -> tuple[A2AServer, A2AServer]:
    b = await start_server(agent=RelayAgent(), card=b_card)
    downstream = f"http://127.0.0.1:{b.http_port}" if via_card else b.grpc_target
    a = await start_server(agent=RelayAgent(downstream=downstream, downstream_timeout=10))
    return a, b


@pytest.mark.parametrize("via_card", [False, True], ids=["host-port", "card-url"])
async def test_a_traced_call_nests_the_downstream_trace_in_its_own(start_server: StartServer, via_card: bool) -> None:
    a, b = await _chain(start_server, via_card=via_card)
    async with A2AClient(a.grpc_target, extensions=BOTH) as client:
        result = await client.send_message("three little words")
    task = result.value.task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert result.activated_extensions == tuple(BOTH)
    assert task.artifacts[0].parts[0].text == "3 words\ndownstream: 3 words"

    trace = traceability.find_trace(result.value)
    assert trace is not None
    assert [(s.call_type, s.name) for s in trace.steps] == [
        (traceability.CallType.TOOL, "word_count"),
        (traceability.CallType.AGENT, "downstream"),
    ]
    agent_step = trace.steps[1]
    assert agent_step.agent_url == b.grpc_target
    assert agent_step.requests is not None and agent_step.requests["parts"] == [{"text": "three little words"}]
    nested = agent_step.response_trace
    assert nested is not None and nested.trace_id != trace.trace_id
    assert [(s.call_type, s.name) for s in nested.steps] == [(traceability.CallType.TOOL, "word_count")]

    # the nested trace is exactly the one B returned for the task A created there
    async with A2AClient(b.grpc_target) as b_client:
        b_task = (await b_client.get_task(agent_step.additional_attributes["task_id"])).value
    b_trace = traceability.find_trace(b_task)
    assert b_trace is not None and b_trace.to_dict() == nested.to_dict()
    # A forwarded the timestamp extension its caller activated, so B stamped its answer
    assert timestamp.timestamp_of(b_task.artifacts[0]) is not None
    assert timestamp.timestamp_of(task.artifacts[0]) is not None


async def test_an_untraced_call_carries_no_trace_anywhere(start_server: StartServer) -> None:
    a, b = await _chain(start_server)
    async with A2AClient(a.grpc_target) as client:
        result = await client.send_message("two words")
    assert result.value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert result.activated_extensions == ()
    assert traceability.find_trace(result.value) is None
    async with A2AClient(b.grpc_target) as b_client:
        listed = (await b_client.list_tasks(include_artifacts=True)).value.tasks
    assert len(listed) == 1
    assert traceability.find_trace(listed[0]) is None
    assert timestamp.timestamp_of(listed[0].artifacts[0]) is None


async def test_a_failing_downstream_call_is_a_step_with_its_error(start_server: StartServer) -> None:
    b_card = {
        **BASE_CARD,
        "capabilities": {**BASE_CARD["capabilities"], "extensions": [{"uri": NEEDED, "required": True}]},
    }
    a, _ = await _chain(start_server, b_card=b_card)
    async with A2AClient(a.grpc_target, extensions=[traceability.URI]) as client:
        result = await client.send_message("hello")
    task = result.value.task
    assert task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert "EXTENSION_SUPPORT_REQUIRED" in task.status.message.parts[0].text
    trace = traceability.find_trace(task)
    assert trace is not None
    agent_step = trace.steps[-1]
    assert agent_step.call_type is traceability.CallType.AGENT and agent_step.response_trace is None
    assert agent_step.error is not None and agent_step.error.startswith("ExtensionSupportRequiredError")
