"""The A2AService servicer: checks a request against the card, validates it, and hands it on.

The interceptors have already authenticated the caller, checked the version and negotiated the
extensions (`current_call()`); every error raised here is an `A2AError`, which the error
interceptor turns into a rich gRPC status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

from google.protobuf import empty_pb2

from a2a_grpc.call import CallState, begin_call, current_call
from a2a_grpc.encoding import send_message_response
from a2a_grpc.errors import (
    AuthenticationError,
    ExtendedAgentCardNotConfiguredError,
    InvalidRequestError,
    PushNotificationConfigNotFoundError,
    PushNotificationNotSupportedError,
    SubscriberTooSlowError,
    UnsupportedOperationError,
)
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.ids import new_id
from a2a_grpc.store.base import InvalidPageTokenError, TaskQuery
from a2a_grpc.tasks import Subscriber, SubscriberOverflowError, TaskManager, task_view, wait_durable
from a2a_grpc.validation import (
    validate,
    validate_get,
    validate_list,
    validate_push_config,
    validate_push_config_page_size,
    validate_send,
)

Context: TypeAlias = Any  # grpc.aio.ServicerContext (grpcio ships no type information)


class A2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    def __init__(
        self,
        manager: TaskManager,
        card: a2a_pb2.AgentCard,
        extensions: ExtensionRegistry,
        extended_card: a2a_pb2.AgentCard | None = None,
    ) -> None:
        self.manager = manager
        self.store = manager.store
        self.card = card
        self.extensions = extensions
        self.extended_card = extended_card
        capabilities = card.capabilities
        self._streaming = capabilities.streaming
        self._push = capabilities.push_notifications
        self._extended = capabilities.extended_agent_card

    # ---- messages ----------------------------------------------------------------------------

    def _accept_send(self, request: a2a_pb2.SendMessageRequest) -> None:
        configuration = request.configuration
        push_config = configuration.HasField("task_push_notification_config")
        if push_config and not self._push:  # capability before validation (notes §2)
            raise PushNotificationNotSupportedError("this agent does not send push notifications")
        validate_send(request)
        if push_config:
            validate_push_config(
                configuration.task_push_notification_config,
                "configuration.task_push_notification_config.",
                needs_task_id=False,
            )
        activated = current_call().activated_extensions
        if activated:
            violations = self.extensions.payload_violations(activated, request)
            if violations:
                field = violations[0][0]
                raise InvalidRequestError(f"invalid extension data at {field}", violations=violations)

    async def _store_send_push_config(self, request: a2a_pb2.SendMessageRequest, task_id: str) -> None:
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config"):
            config = configuration.task_push_notification_config
            config.task_id = task_id
            config.id = config.id or new_id()
            await self.store.put_push_config(current_call().caller, config)

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, context: Context) -> bytes:
        """Answers a SendMessageResponse, already encoded (see a2a_grpc.encoding)."""
        self._accept_send(request)
        call = _call_for_agent(context)
        run = await self.manager.submit(request, call)
        live = run.live
        await self._store_send_push_config(request, live.task.id)
        configuration = request.configuration
        if not configuration.return_immediately:
            await run.settled
        await wait_durable(live.last_write)
        history_length = configuration.history_length if configuration.HasField("history_length") else None
        return send_message_response(task_view(live.task, history_length))

    async def SendStreamingMessage(
        self, request: a2a_pb2.SendMessageRequest, context: Context
    ) -> AsyncIterator[a2a_pb2.StreamResponse | bytes]:
        self._require_streaming()
        self._accept_send(request)
        subscriber = Subscriber(close_on_interrupt=True)
        run = await self.manager.submit(request, _call_for_agent(context), subscriber)
        live = run.live
        configuration = request.configuration
        history_length = configuration.history_length if configuration.HasField("history_length") else None
        # The snapshot (a copy) must be taken before anything awaits: the agent is already running
        # and every event it publishes from here on is queued for this subscriber.
        snapshot = a2a_pb2.StreamResponse(task=task_view(live.task, history_length))
        created = live.last_write
        try:
            await self._store_send_push_config(request, live.task.id)
            await wait_durable(created)
            yield snapshot
            async for event in subscriber.events():
                yield event
        except SubscriberOverflowError:
            raise SubscriberTooSlowError("the stream fell too far behind the task's events") from None
        finally:
            await self.manager.unsubscribe(live, subscriber)

    # ---- tasks -------------------------------------------------------------------------------

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, context: Context) -> a2a_pb2.Task:
        validate_get(request)
        task = await self.manager.get_task(request.id, current_call().caller)
        return task_view(task, request.history_length if request.HasField("history_length") else None)

    async def ListTasks(self, request: a2a_pb2.ListTasksRequest, context: Context) -> a2a_pb2.ListTasksResponse:
        page_size = validate_list(request)
        query = TaskQuery(
            owner=current_call().caller,
            page_size=page_size,
            context_id=request.context_id,
            state=request.status,
            page_token=request.page_token,
            include_artifacts=request.HasField("include_artifacts") and request.include_artifacts,
        )
        if request.HasField("status_timestamp_after"):
            after = request.status_timestamp_after
            query.status_after_us = after.seconds * 1_000_000 + after.nanos // 1000
        try:
            page = await self.store.list_tasks(query)
        except InvalidPageTokenError:
            raise _bad_page_token() from None
        history_length = request.history_length if request.HasField("history_length") else None
        return a2a_pb2.ListTasksResponse(
            tasks=[task_view(task, history_length, query.include_artifacts) for task in page.tasks],
            next_page_token=page.next_page_token,
            page_size=page_size,
            total_size=page.total_size,
        )

    async def CancelTask(self, request: a2a_pb2.CancelTaskRequest, context: Context) -> a2a_pb2.Task:
        validate(request)
        return await self.manager.cancel(request.id, current_call().caller)

    async def SubscribeToTask(
        self, request: a2a_pb2.SubscribeToTaskRequest, context: Context
    ) -> AsyncIterator[a2a_pb2.StreamResponse | bytes]:
        self._require_streaming()
        validate(request)
        snapshot, written, subscriber, live = await self.manager.subscribe(request.id, current_call().caller)
        try:
            await wait_durable(written)
            yield a2a_pb2.StreamResponse(task=snapshot)
            async for event in subscriber.events():
                yield event
        except SubscriberOverflowError:
            raise SubscriberTooSlowError("the stream fell too far behind the task's events") from None
        finally:
            await self.manager.unsubscribe(live, subscriber)

    def _require_streaming(self) -> None:
        if not self._streaming:
            raise UnsupportedOperationError("this agent does not support streaming")

    # ---- push notification configs -----------------------------------------------------------

    def _require_push(self) -> None:
        if not self._push:
            raise PushNotificationNotSupportedError("this agent does not send push notifications")

    async def _caller_seeing(self, task_id: str) -> str:
        """The caller, once the task is known to exist for them (TaskNotFoundError otherwise)."""
        caller = current_call().caller
        await self.manager.get_task(task_id, caller)
        return caller

    async def CreateTaskPushNotificationConfig(
        self, request: a2a_pb2.TaskPushNotificationConfig, context: Context
    ) -> a2a_pb2.TaskPushNotificationConfig:
        self._require_push()
        validate_push_config(request)
        caller = await self._caller_seeing(request.task_id)
        request.id = request.id or new_id()
        await self.store.put_push_config(caller, request)
        return request

    async def GetTaskPushNotificationConfig(
        self, request: a2a_pb2.GetTaskPushNotificationConfigRequest, context: Context
    ) -> a2a_pb2.TaskPushNotificationConfig:
        self._require_push()
        validate(request)
        caller = await self._caller_seeing(request.task_id)
        config = await self.store.get_push_config(caller, request.task_id, request.id)
        if config is None:
            raise _config_not_found(request.task_id, request.id)
        return config

    async def ListTaskPushNotificationConfigs(
        self, request: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: Context
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        self._require_push()
        page_size = validate_push_config_page_size(request)
        caller = await self._caller_seeing(request.task_id)
        try:
            configs, token = await self.store.list_push_configs(caller, request.task_id, page_size, request.page_token)
        except InvalidPageTokenError:
            raise _bad_page_token() from None
        return a2a_pb2.ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token=token)

    async def DeleteTaskPushNotificationConfig(
        self, request: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> empty_pb2.Empty:
        self._require_push()
        validate(request)
        caller = await self._caller_seeing(request.task_id)
        if not await self.store.delete_push_config(caller, request.task_id, request.id):
            raise _config_not_found(request.task_id, request.id)
        return empty_pb2.Empty()

    # ---- card --------------------------------------------------------------------------------

    async def GetExtendedAgentCard(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, context: Context
    ) -> a2a_pb2.AgentCard:
        if not self._extended:
            raise UnsupportedOperationError("this agent declares no extended agent card")
        if not current_call().caller:
            raise AuthenticationError("the extended agent card requires an authenticated caller")
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError("the extended agent card is declared but not configured")
        return self.extended_card


def _call_for_agent(context: Context) -> CallState:
    """This call's state, with the deadline the agent should keep to (None when the client set none)."""
    call = begin_call()
    call.deadline = context.time_remaining()
    return call


def _bad_page_token() -> InvalidRequestError:
    return InvalidRequestError("invalid page_token", violations=[("page_token", "is not a token this server issued")])


def _config_not_found(task_id: str, config_id: str) -> PushNotificationConfigNotFoundError:
    return PushNotificationConfigNotFoundError(
        f"task {task_id} has no push notification config {config_id}",
        metadata={"taskId": task_id, "configId": config_id},
    )
