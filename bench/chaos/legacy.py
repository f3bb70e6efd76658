"""The chaos clients' A2A 0.3 calls: the same caller on the 0.3 face (`a2a.v1.A2AService`), sending what the 0.3
SDKs send (no `a2a-version`), with streams cut as on the 1.0 face. A task a 0.3 send was answered with is
acknowledged like any other, and the invariants look for it through the 1.0 face."""

from __future__ import annotations

import time
from typing import Any

from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_grpc
from bench.chaos.agent import ASK, ECHO
from bench.chaos.workload import CALL_SECONDS, STREAM_SECONDS, Client, Operations


def _stub(client: Client) -> Any:
    return v03_grpc.A2AServiceStub(client.channel)  # type: ignore[no-untyped-call]


def _metadata(client: Client) -> tuple[tuple[str, str], ...]:
    """The caller's headers but its `a2a-version`: a 0.3 client sends none (and 1.0 is refused on this face)."""
    return tuple((key, value) for key, value in client.caller.metadata if key != "a2a-version")


def _request(text: str, task_id: str = "") -> v03.SendMessageRequest:
    message = v03.Message(message_id=f"chaos-v03-{time.time_ns()}", role=v03.ROLE_USER, task_id=task_id)
    message.content.add(text=text)
    return v03.SendMessageRequest(request=message)


async def send(client: Client) -> None:
    """SendMessage on the 0.3 face, blocking (0.3's default); its task is acknowledged."""
    request = _request(client.rnd.choice((ECHO, ASK)))
    call = _stub(client).SendMessage(request, metadata=_metadata(client), timeout=CALL_SECONDS)
    answer = await client.unary("v0.3 SendMessage", call)
    if answer is not None and answer.HasField("task"):
        client.ledger.acknowledge(answer.task.id, client.caller)


async def stream(client: Client, cut: bool | None = None) -> None:
    call = _stub(client).SendStreamingMessage(_request(ECHO), metadata=_metadata(client), timeout=STREAM_SECONDS * 2)
    await client.read_stream("v0.3 SendStreamingMessage", call, cut)


async def subscribe(client: Client) -> None:
    """TaskSubscription of a task of this caller's, always cut (an open task would otherwise wait for input)."""
    request = v03.TaskSubscriptionRequest(name=f"tasks/{client.pick_known()}")
    call = _stub(client).TaskSubscription(request, metadata=_metadata(client), timeout=STREAM_SECONDS * 2)
    await client.read_stream("v0.3 TaskSubscription", call, cut=True)


async def get_task(client: Client) -> None:
    request = v03.GetTaskRequest(name=f"tasks/{client.pick_known()}")
    await client.unary("v0.3 GetTask", _stub(client).GetTask(request, metadata=_metadata(client), timeout=CALL_SECONDS))


LEGACY_OPERATIONS: Operations = (
    (send, 2),
    (stream, 3),
    (subscribe, 2),
    (get_task, 1),
)
LEGACY_CUT_OPERATIONS: Operations = ((lambda client: stream(client, cut=True), 10),)
