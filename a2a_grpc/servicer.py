"""The A2AService servicer: checks a request against the card, validates it, and hands it on.

Every method receives the call's CallContext, built by the interceptor chain (which has already
authenticated the caller, checked the version and negotiated the extensions), and never the grpc.aio
context: nothing here or below can touch a call's transport after the call is over (a2a_grpc.arrival). Every error raised
here is an `A2AError`, which the chain's error layer turns into a rich gRPC status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeAlias

from google.protobuf import empty_pb2

from a2a_grpc import resume
from a2a_grpc.call import CallContext
from a2a_grpc.encoding import send_message_response
from a2a_grpc.errors import (
    AuthenticationError,
    ExtendedAgentCardNotConfiguredError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    UnavailableError,
    UnsupportedOperationError,
)
from a2a_grpc.extensions import MAX_EXTENSION_PAYLOAD_BYTES, ExtensionPayload, ExtensionRegistry, oversized_payloads
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.input_modes import enforced_input_modes
from a2a_grpc.protocol import STREAM_AFTER_HEADER
from a2a_grpc.push.guard import PushTargetRefused
from a2a_grpc.settings.defaults import ENFORCE_INPUT_MODES
from a2a_grpc.settings.defaults import MAX_LIST_PAGE_BYTES as MAX_LIST_PAGE_BYTES
from a2a_grpc.tasks import Subscriber, SubscriptionStoppedError, TaskManager, TaskRun, task_view, wait_durable
from a2a_grpc.tasks.answers import check_answer
from a2a_grpc.tasks.limits import DEFAULT_TASK_LIMITS
from a2a_grpc.validation import (
    MAX_PARTS,
    validate,
    validate_get,
    validate_list,
    validate_push_config,
    validate_push_config_page_size,
    validate_send,
)

# A SendMessageRequest is validated in a worker thread when its extension payloads total this many bytes
# (~1 ms of validation for the traceability schema), or the request this many (its JSON values are walked
# for their nesting, up to ~0.2 µs a byte), so the event loop keeps serving other calls meanwhile; smaller
# ones are validated inline, where the thread hop (~40 µs) would cost more than it spares.
INLINE_VALIDATION_BYTES = 2 * 1024
INLINE_WALK_BYTES = 16 * 1024

StreamEvents: TypeAlias = AsyncIterator[a2a_pb2.StreamResponse | bytes]


class A2AServicer:
    def __init__(
        self,
        manager: TaskManager,
        card: a2a_pb2.AgentCard,
        extensions: ExtensionRegistry,
        extended_card: a2a_pb2.AgentCard | None = None,
        max_list_page_bytes: int = MAX_LIST_PAGE_BYTES,
        *,
        max_extension_payload_bytes: int = MAX_EXTENSION_PAYLOAD_BYTES,
        check_webhook: Callable[[str], Awaitable[None]] | None = None,
        max_parts: int = MAX_PARTS,
        max_answer_bytes: int = DEFAULT_TASK_LIMITS.max_answer_bytes,
        enforce_input_modes: bool = ENFORCE_INPUT_MODES,
    ) -> None:
        self._input_modes = enforced_input_modes(card, enforce_input_modes)
        self._check_webhook = check_webhook
        self.max_answer_bytes = max_answer_bytes  # a larger GetTask answer is refused before it is built
        self.max_parts = max_parts
        self.manager = manager
        self.max_list_page_bytes = max_list_page_bytes
        self.max_extension_payload_bytes = max_extension_payload_bytes
        self.card = card
        self.extensions = extensions
        self.extended_card = extended_card
        capabilities = card.capabilities
        self._streaming = capabilities.streaming
        self._push = capabilities.push_notifications
        self._extended = capabilities.extended_agent_card

    @property
    def declares_extended_card(self) -> bool:
        return self._extended

    # ---- messages ----------------------------------------------------------------------------

    async def _accept_send(self, request: a2a_pb2.SendMessageRequest, call: CallContext) -> None:
        """The capability first, then the extension payloads' sizes (measured, not walked), then the request
        as a whole: a large one is walked and its payloads validated in a worker thread, so that the event
        loop keeps serving other calls meanwhile."""
        configuration = request.configuration
        push_config = configuration.HasField("task_push_notification_config")
        if push_config and not self._push:
            raise PushNotificationNotSupportedError("this agent does not send push notifications")
        payloads = (
            self.extensions.schema_payloads(call.activated_extensions, request) if call.activated_extensions else []
        )
        _refuse(oversized_payloads(payloads, self.max_extension_payload_bytes))
        if (
            sum(payload.size for payload in payloads) < INLINE_VALIDATION_BYTES
            and request.ByteSize() < INLINE_WALK_BYTES
        ):
            self._validate_send(request, payloads)
        else:
            await asyncio.to_thread(self._validate_send, request, payloads)
        if push_config:
            config = configuration.task_push_notification_config
            await self._check_destination(config.url, "configuration.task_push_notification_config.")
            if request.message.task_id:  # it joins the task's configs: refused before the message is taken
                room = a2a_pb2.TaskPushNotificationConfig(task_id=request.message.task_id, id=config.id)
                await self.manager.check_push_room(room, call)

    def _validate_send(self, request: a2a_pb2.SendMessageRequest, payloads: list[ExtensionPayload]) -> None:
        """Everything about a SendMessageRequest that reads it whole; safe in a worker thread."""
        validate_send(request, self.max_parts, self._input_modes)
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config"):
            path = "configuration.task_push_notification_config."
            validate_push_config(configuration.task_push_notification_config, path, needs_task_id=False)
        if payloads:
            _refuse(self.extensions.payload_violations(payloads))

    async def _put_send_push_config(self, request: a2a_pb2.SendMessageRequest, run: TaskRun, call: CallContext) -> None:
        """Store the request's push config for the task the message continues (a new task stores it with its
        first write)."""
        configuration = request.configuration
        if not run.created and configuration.HasField("task_push_notification_config"):
            config = configuration.task_push_notification_config
            await self.manager.put_push_config(config, call, from_start=True, task_id=run.task_id)

    async def SendMessage(self, request: a2a_pb2.SendMessageRequest, call: CallContext) -> bytes:
        """Answers a SendMessageResponse, already encoded (see a2a_grpc.encoding)."""
        await self._accept_send(request, call)
        run = await self.manager.submit(request, call)
        try:
            await self._put_send_push_config(request, run, call)
            configuration = request.configuration
            if not configuration.return_immediately:
                await run.settled
            if run.reply is not None:
                return a2a_pb2.SendMessageResponse(message=run.reply).SerializeToString()
            return send_message_response(task_view(await run.durable_task(), _history_length(configuration)))
        finally:
            run.call_over()

    async def SendStreamingMessage(self, request: a2a_pb2.SendMessageRequest, call: CallContext) -> StreamEvents:
        self._require_streaming()
        await self._accept_send(request, call)
        subscriber = self.manager.new_subscriber(close_on_interrupt=True)
        run = await self.manager.submit(request, call, subscriber)
        try:
            reply = await run.opened
            if reply is not None:
                yield a2a_pb2.StreamResponse(message=reply)
                return
            snapshot = run.snapshot
            assert snapshot is not None  # taken when the task was shown, since this stream subscribed
            await run.durable()
            await self._put_send_push_config(request, run, call)
            first = task_view(snapshot, _history_length(request.configuration))
            async for event in _stream(first, run.snapshot_seq, subscriber, call):
                yield event
        finally:
            run.call_over()
            await self.manager.unsubscribe(run.machine, subscriber)

    # ---- tasks -------------------------------------------------------------------------------

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, call: CallContext) -> a2a_pb2.Task:
        validate_get(request)
        task = await self.manager.get_task(request.id, call)
        history_length = request.history_length if request.HasField("history_length") else None
        check_answer(task, history_length, self.max_answer_bytes)
        return task_view(task, history_length)

    async def ListTasks(self, request: a2a_pb2.ListTasksRequest, call: CallContext) -> a2a_pb2.ListTasksResponse:
        page_size = validate_list(request)
        page = await self.manager.list_tasks(request, page_size, call, self.max_list_page_bytes)
        return a2a_pb2.ListTasksResponse(
            tasks=page.tasks, next_page_token=page.next_page_token, page_size=page_size, total_size=page.total_size
        )

    async def CancelTask(self, request: a2a_pb2.CancelTaskRequest, call: CallContext) -> a2a_pb2.Task:
        validate(request)
        return await self.manager.cancel(request.id, call)

    async def SubscribeToTask(self, request: a2a_pb2.SubscribeToTaskRequest, call: CallContext) -> StreamEvents:
        self._require_streaming()
        validate(request)
        subscription = await self.manager.subscribe(request.id, call, resume.stream_after(call))
        try:
            await wait_durable(subscription.written)
            async for event in _stream(subscription.snapshot, subscription.seq, subscription.subscriber, call):
                yield event
        finally:
            await self.manager.unsubscribe(subscription.machine, subscription.subscriber)

    def _require_streaming(self) -> None:
        if not self._streaming:
            raise UnsupportedOperationError("this agent does not support streaming")

    # ---- push notification configs -----------------------------------------------------------

    def _require_push(self) -> None:
        if not self._push:
            raise PushNotificationNotSupportedError("this agent does not send push notifications")

    async def CreateTaskPushNotificationConfig(
        self, request: a2a_pb2.TaskPushNotificationConfig, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        self._require_push()
        validate_push_config(request)
        await self._check_destination(request.url, "")
        return await self.manager.put_push_config(request, call)

    async def _check_destination(self, url: str, path: str) -> None:
        """Refuse a webhook the push worker would refuse to dial (INVALID_ARGUMENT naming the field)."""
        if self._check_webhook is None:
            return
        try:
            await self._check_webhook(url)
        except PushTargetRefused as refused:
            raise InvalidRequestError(
                f"{path}{refused.field} is not an allowed webhook", violations=[(path + refused.field, refused.reason)]
            ) from None

    async def GetTaskPushNotificationConfig(
        self, request: a2a_pb2.GetTaskPushNotificationConfigRequest, call: CallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        self._require_push()
        validate(request)
        return await self.manager.get_push_config(request.task_id, request.id, call)

    async def ListTaskPushNotificationConfigs(
        self, request: a2a_pb2.ListTaskPushNotificationConfigsRequest, call: CallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        self._require_push()
        page_size = validate_push_config_page_size(request)
        configs, token = await self.manager.list_push_configs(
            request.task_id, page_size, request.page_token, call, self.max_list_page_bytes
        )
        return a2a_pb2.ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token=token)

    async def DeleteTaskPushNotificationConfig(
        self, request: a2a_pb2.DeleteTaskPushNotificationConfigRequest, call: CallContext
    ) -> empty_pb2.Empty:
        self._require_push()
        validate(request)
        await self.manager.delete_push_config(request.task_id, request.id, call)
        return empty_pb2.Empty()

    # ---- card --------------------------------------------------------------------------------

    async def GetExtendedAgentCard(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, call: CallContext
    ) -> a2a_pb2.AgentCard:
        if not self._extended:
            raise UnsupportedOperationError("this agent declares no extended agent card")
        if not call.principal:
            raise AuthenticationError("the extended agent card requires an authenticated caller")
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError("the extended agent card is declared but not configured")
        return self.extended_card


async def _stream(first: a2a_pb2.Task, seq: int, subscriber: Subscriber, call: CallContext) -> AsyncIterator[bytes]:
    """A stream's events: the task as it starts, then what the subscriber yields, numbered when the call
    activated the resume extension."""
    task = a2a_pb2.StreamResponse(task=first).SerializeToString()
    numbered = resume.is_active(call)
    yield resume.with_seq(task, seq) if numbered else task
    try:
        async for event in subscriber.events():
            yield resume.with_seq(event.body, event.seq) if numbered else event.body
    except SubscriptionStoppedError:
        raise UnavailableError(
            f"the server is stopping; subscribe again ({STREAM_AFTER_HEADER} resumes after the last event seen)"
        ) from None


def _history_length(configuration: a2a_pb2.SendMessageConfiguration) -> int | None:
    return configuration.history_length if configuration.HasField("history_length") else None


def _refuse(violations: list[tuple[str, str]]) -> None:
    """An extension payload that is too large or does not fit its schema: INVALID_ARGUMENT naming its place."""
    if violations:
        raise InvalidRequestError(f"invalid extension data at {violations[0][0]}", violations=violations)
