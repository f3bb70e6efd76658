"""The A2A 0.3 service (`a2a.v1.A2AService`): each call translated to 1.0 and served by the 1.0 servicer.

The same interceptor chain admits its calls (a2a_grpc.interceptors.server.faces), and the 1.0 servicer
validates them and calls the same task manager: a task is one task whichever face made or reads it, within
the owner's scope. Nothing of 0.3 reaches below this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

from google.protobuf import empty_pb2

from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2 as v10
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.servicer import A2AServicer, StreamEvents
from a2a_grpc.v0_3 import requests, responses
from a2a_grpc.v0_3.card import agent_card


class V03Servicer:
    def __init__(self, servicer: A2AServicer) -> None:
        self._servicer = servicer
        self._cards: tuple[v03.AgentCard, v03.AgentCard | None] | None = None  # made at the first GetAgentCard

    async def SendMessage(self, request: v03.SendMessageRequest, call: CallContext) -> v03.SendMessageResponse:
        answer = await self._servicer.SendMessage(requests.send_request(request, self._servicer.max_parts), call)
        return responses.send_response(v10.SendMessageResponse.FromString(answer))

    async def SendStreamingMessage(
        self, request: v03.SendMessageRequest, call: CallContext
    ) -> AsyncIterator[v03.StreamResponse]:
        events = self._servicer.SendStreamingMessage(requests.send_request(request, self._servicer.max_parts), call)
        async for event in _events(events, ends_on_interrupt=True):
            yield event

    async def GetTask(self, request: v03.GetTaskRequest, call: CallContext) -> v03.Task:
        converted = v10.GetTaskRequest(id=requests.task_name(request.name))
        if request.history_length:
            converted.history_length = request.history_length
        return responses.task(await self._servicer.GetTask(converted, call))

    async def CancelTask(self, request: v03.CancelTaskRequest, call: CallContext) -> v03.Task:
        converted = v10.CancelTaskRequest(id=requests.task_name(request.name))
        return responses.task(await self._servicer.CancelTask(converted, call))

    async def TaskSubscription(
        self, request: v03.TaskSubscriptionRequest, call: CallContext
    ) -> AsyncIterator[v03.StreamResponse]:
        converted = v10.SubscribeToTaskRequest(id=requests.task_name(request.name))
        async for event in _events(self._servicer.SubscribeToTask(converted, call), ends_on_interrupt=False):
            yield event

    async def CreateTaskPushNotificationConfig(
        self, request: v03.CreateTaskPushNotificationConfigRequest, call: CallContext
    ) -> v03.TaskPushNotificationConfig:
        config = requests.create_push_config(request)
        return responses.push_config(await self._servicer.CreateTaskPushNotificationConfig(config, call))

    async def GetTaskPushNotificationConfig(
        self, request: v03.GetTaskPushNotificationConfigRequest, call: CallContext
    ) -> v03.TaskPushNotificationConfig:
        task_id, config_id = requests.config_name(request.name)
        converted = v10.GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        return responses.push_config(await self._servicer.GetTaskPushNotificationConfig(converted, call))

    async def ListTaskPushNotificationConfig(
        self, request: v03.ListTaskPushNotificationConfigRequest, call: CallContext
    ) -> v03.ListTaskPushNotificationConfigResponse:
        converted = v10.ListTaskPushNotificationConfigsRequest(
            task_id=requests.task_name(request.parent, "parent"),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        page = await self._servicer.ListTaskPushNotificationConfigs(converted, call)
        return v03.ListTaskPushNotificationConfigResponse(
            configs=[responses.push_config(config) for config in page.configs], next_page_token=page.next_page_token
        )

    async def DeleteTaskPushNotificationConfig(
        self, request: v03.DeleteTaskPushNotificationConfigRequest, call: CallContext
    ) -> empty_pb2.Empty:
        task_id, config_id = requests.config_name(request.name)
        converted = v10.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        return await self._servicer.DeleteTaskPushNotificationConfig(converted, call)

    async def GetAgentCard(self, request: v03.GetAgentCardRequest, call: CallContext) -> v03.AgentCard:
        """The extended card to an authenticated caller when the card declares one (what 0.3 clients ask this for),
        else the public card."""
        if self._cards is None:  # not before: the server fills in the port it bound after making this servicer
            extended = self._servicer.extended_card if self._servicer.declares_extended_card else None
            self._cards = agent_card(self._servicer.card), agent_card(extended) if extended is not None else None
        public, extended_card = self._cards
        return extended_card if call.principal and extended_card is not None else public


async def _events(events: StreamEvents, *, ends_on_interrupt: bool) -> AsyncIterator[v03.StreamResponse]:
    """The 1.0 stream's events in 0.3's terms; the 1.0 stream is closed with this one (its subscription ends)."""
    async with contextlib.aclosing(cast(AsyncGenerator[v10.StreamResponse | bytes, None], events)):
        async for event in events:
            parsed = v10.StreamResponse.FromString(event) if isinstance(event, bytes) else event
            yield responses.stream_response(parsed, ends_on_interrupt=ends_on_interrupt)
