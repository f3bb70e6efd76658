"""Responses a default client can take: ListTasks pages capped by bytes, streams that fall far behind."""

from __future__ import annotations

import grpc
from conftest import V1, StartServer, send_request
from rpc_helpers import make_stub, read_all

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2

BIG_TEXT = "x" * (600 * 1024)  # the echo agent keeps it twice: in the history and in its artifact
TASKS = 6
BURST = 200  # artifact events one agent publishes in a single loop turn
EVENT_TEXT = "y" * 1024


class BurstAgent:
    """Publishes BURST artifact chunks without ever yielding to the loop, then completes."""

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        for index in range(BURST):
            await events.artifact(text=EVENT_TEXT, artifact_id="burst", append=index > 0)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_list_tasks_pages_fit_a_default_client_and_lose_no_task(start_server: StartServer) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:  # gRPC's default 4 MiB receive limit
        stub = make_stub(channel)
        sent = {(await stub.SendMessage(send_request(BIG_TEXT), metadata=V1)).task.id for _ in range(TASKS)}
        seen: list[str] = []
        token = ""
        for _ in range(TASKS + 1):
            page = await stub.ListTasks(
                a2a_pb2.ListTasksRequest(page_size=50, include_artifacts=True, page_token=token), metadata=V1
            )
            assert page.ByteSize() <= 4 * 1024 * 1024
            assert page.total_size == TASKS
            seen.extend(task.id for task in page.tasks)
            token = page.next_page_token
            if not token:
                break
    assert len(seen) == len(set(seen)) == TASKS
    assert set(seen) == sent


async def test_a_stream_that_falls_many_bytes_behind_reads_the_log_and_misses_nothing(
    start_server: StartServer,
) -> None:
    small = await start_server(agent=BurstAgent(), max_subscriber_buffer_bytes=64 * 1024)
    roomy = await start_server(agent=BurstAgent())
    async with (
        grpc.aio.insecure_channel(small.grpc_target) as small_channel,
        grpc.aio.insecure_channel(roomy.grpc_target) as roomy_channel,
    ):
        behind = await read_all(make_stub(small_channel).SendStreamingMessage(send_request("burst"), metadata=V1))
        kept_up = await read_all(make_stub(roomy_channel).SendStreamingMessage(send_request("burst"), metadata=V1))
    assert [_shape(event) for event in behind] == [_shape(event) for event in kept_up]
    assert sum(event.HasField("artifact_update") for event in behind) == BURST
    assert behind[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


def _shape(event: a2a_pb2.StreamResponse) -> tuple[str, int, str]:
    """What a stream event says, apart from ids and times."""
    kind = event.WhichOneof("payload") or ""
    if kind == "artifact_update":
        update = event.artifact_update
        return kind, int(update.append), update.artifact.parts[0].text
    if kind == "status_update":
        return kind, event.status_update.status.state, ""
    return kind, event.task.status.state, ""
