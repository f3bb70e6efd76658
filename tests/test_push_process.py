"""Push notifications survive a SIGKILL: `a2a-grpc serve` on a SQLite store runs the writer agent while its
webhook is down, is killed with SIGKILL and started again on the same store; the webhook, up by then, gets
every notification that was due, in order (a repeat is allowed, a loss is not). Loopback only."""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import grpc
from aiohttp import web
from google.protobuf import json_format
from process import REPO, V1, ServerProcess, free_port, serve_process

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER

WRITER = ("--agent", "a2a_grpc.agents.writer:WriterAgent", "--card", str(REPO / "examples" / "writer-card.json"))
PUSH = ("--push-allow", "127.0.0.1", "--push-allow-http")
CALL_SECONDS = 30.0
DELIVERY_SECONDS = 45.0  # the killed process's claims lapse within 5 s; a sweep runs every second
TOKEN = "tok-restart"


def text(body: str, task_id: str = "") -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=f"m-{time.monotonic_ns()}", task_id=task_id, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=body)]
    )


def run_writer(target: str, url: str) -> str:
    """Both turns of the writer, the first with a push config for `url`; the task's id, once COMPLETED."""
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        configuration = a2a_pb2.SendMessageConfiguration(
            task_push_notification_config=a2a_pb2.TaskPushNotificationConfig(url=url, token=TOKEN)
        )
        first = stub.SendMessage(
            a2a_pb2.SendMessageRequest(message=text("the sea"), configuration=configuration),
            metadata=V1,
            timeout=CALL_SECONDS,
        )
        assert first.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
        second = stub.SendMessage(
            a2a_pb2.SendMessageRequest(message=text("calm", first.task.id)), metadata=V1, timeout=CALL_SECONDS
        )
        assert second.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        task_id: str = first.task.id
        return task_id


def event_log(target: str, task_id: str) -> list[bytes]:
    """The task's log as SubscribeToTask replays it after event 0, each event serialized without its number."""
    metadata = (*V1, ("a2a-extensions", RESUME_EXTENSION_URI), (STREAM_AFTER_HEADER, "0"))
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=metadata, timeout=CALL_SECONDS)
        events: list[a2a_pb2.StreamResponse] = list(call)
    assert events[0].HasField("task")
    logged = []
    for event in events[1:]:
        payload = getattr(event, event.WhichOneof("payload") or "")
        del payload.metadata.fields[RESUME_EXTENSION_URI]
        if not payload.metadata.fields:
            payload.ClearField("metadata")
        logged.append(event.SerializeToString(deterministic=True))
    return logged


def start_server(log_dir: Path, store: str, stack: ExitStack) -> ServerProcess:
    return stack.enter_context(serve_process(log_dir, *WRITER, *PUSH, store=store))


async def test_notifications_due_when_the_server_is_killed_arrive_after_its_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    port = free_port()  # the webhook's: nothing listens on it until the first server is dead
    url = f"http://127.0.0.1:{port}/hook"
    bodies: list[bytes] = []
    tokens: set[str | None] = set()
    arrived = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        tokens.add(request.headers.get("X-A2A-Notification-Token"))
        bodies.append(await request.read())
        arrived.set()
        return web.Response(status=204)

    with ExitStack() as stack:
        first = await asyncio.to_thread(start_server, tmp_path / "first", store, stack)
        task_id = await asyncio.to_thread(run_writer, first.grpc_target, url)
        await asyncio.sleep(1.0)  # the worker has tried the webhook, and is waiting to try again
        first.send_signal(signal.SIGKILL)
        assert await first.exited() == -signal.SIGKILL

        app = web.Application()
        app.router.add_post("/hook", hook)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", port).start()
            second = await asyncio.to_thread(start_server, tmp_path / "second", store, stack)
            logged = await asyncio.to_thread(event_log, second.grpc_target, task_id)
            assert len(logged) == 14  # INPUT_REQUIRED, WORKING, WORKING, 5 x (chunk, WORKING), COMPLETED
            received: list[bytes] = []
            try:
                async with asyncio.timeout(DELIVERY_SECONDS):
                    while True:
                        received = [
                            json_format.Parse(body.decode(), a2a_pb2.StreamResponse()).SerializeToString(
                                deterministic=True
                            )
                            for body in bodies
                        ]
                        if len(set(received)) >= len(logged):
                            break
                        arrived.clear()
                        await arrived.wait()
            except TimeoutError:
                raise AssertionError(
                    f"{len(set(received))} of {len(logged)} notifications arrived; the server's log:\n{second.stderr}"
                ) from None
        finally:
            await runner.cleanup()

    assert set(received) == set(logged)  # nothing lost, nothing else
    firsts: list[int] = []
    for position in (logged.index(body) for body in received):
        if position not in firsts:
            firsts.append(position)
    assert firsts == list(range(len(logged)))  # in the log's order (a repeat may come, after its first)
    assert tokens == {TOKEN}
