"""A request is copied into the task, never changed in place: the SendMessage whose message creates a task leaves
its message and its push config as the caller sent them, and the config the task stores is a copy (a change to
the request meanwhile does not reach it); a CreateTaskPushNotificationConfig answers with the stored copy, not
the request. The servicer, the task manager and the store are the real ones, in this process, so that the
request objects the server holds are the test's own."""

from __future__ import annotations

import asyncio

from conftest import send_request

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.call import CallContext
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.store import MemoryStore
from a2a_grpc.tasks import TaskManager

OWNER = "p"
HOOK = "https://hooks.example/a2a"
TEST_SECONDS = 10


class HeldAgent:
    """Publishes nothing until `go_on` is set (so the task is not written yet), then completes."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go_on = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.started.set()
        await self.go_on.wait()
        await events.complete("done")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


def push_servicer(store: MemoryStore, agent: HeldAgent) -> A2AServicer:
    card = a2a_pb2.AgentCard(name="test")
    card.capabilities.push_notifications = True
    return A2AServicer(TaskManager(store, agent), card, ExtensionRegistry([]))


async def test_a_send_message_leaves_its_request_as_sent_and_the_task_keeps_a_copy_of_its_push_config() -> None:
    store, agent = MemoryStore(), HeldAgent()
    servicer = push_servicer(store, agent)
    request = send_request("hello")
    request.configuration.task_push_notification_config.url = HOOK
    sent = a2a_pb2.SendMessageRequest()
    sent.CopyFrom(request)
    async with asyncio.timeout(TEST_SECONDS):
        answering = asyncio.ensure_future(servicer.SendMessage(request, CallContext(principal=OWNER)))
        await agent.started.wait()
        assert request == sent, "the request was changed in place"
        request.configuration.task_push_notification_config.url = "https://elsewhere.example/changed"
        agent.go_on.set()
        answer = a2a_pb2.SendMessageResponse.FromString(await answering)
        configs, _ = await store.list_push_configs(OWNER, answer.task.id, 10, "")
    assert [(config.url, config.task_id) for config in configs] == [(HOOK, answer.task.id)]
    assert configs[0].id, "the task's copy gets an id of its own"
    assert answer.task.history[0].task_id == answer.task.id and answer.task.history[0].context_id
    assert not request.message.task_id, "the task's copy of the message takes its ids, not the request"


async def test_create_push_config_answers_with_the_stored_copy_and_leaves_the_request_as_sent() -> None:
    store, agent = MemoryStore(), HeldAgent()
    servicer = push_servicer(store, agent)
    call = CallContext(principal=OWNER)
    agent.go_on.set()
    async with asyncio.timeout(TEST_SECONDS):
        task = a2a_pb2.SendMessageResponse.FromString(await servicer.SendMessage(send_request("hello"), call)).task
        request = a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=HOOK)
        answer = await servicer.CreateTaskPushNotificationConfig(request, call)
    assert answer is not request and answer.id and not request.id
    assert request == a2a_pb2.TaskPushNotificationConfig(task_id=task.id, url=HOOK)
