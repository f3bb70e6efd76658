"""The agent API: what a team implements to plug its own agent into the server.

An agent is an `AgentExecutor`. For every message the server accepts it calls `execute(context, events)`:
the `RequestContext` says what was asked, and the `EventPublisher` is how the agent answers (status
updates, artifacts, input-required, completion, failure). The server owns task state, ordering and
persistence: the agent never builds or stores a Task itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from google.protobuf import json_format

from a2a_grpc.call import CallState
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id

if TYPE_CHECKING:
    from a2a_grpc.tasks import TaskManager, TaskRun

TaskState = a2a_pb2.TaskState


class ExtensionNotActiveError(ValueError):
    """Extension data was attached for an extension the caller did not activate."""


class RequestContext:
    """What the agent is asked to do: the incoming message, its task, and the negotiated call."""

    __slots__ = ("_cancel_requested", "call", "message", "request_metadata", "task")

    def __init__(
        self,
        message: a2a_pb2.Message,
        task: a2a_pb2.Task,
        call: CallState,
        request_metadata: Any = None,
    ) -> None:
        self.message = message
        self.task = task  # read-only for the agent: the server keeps it current
        self.call = call
        self.request_metadata = request_metadata  # the SendMessageRequest.metadata Struct, if any
        self._cancel_requested = asyncio.Event()

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def context_id(self) -> str:
        return self.task.context_id

    @property
    def caller(self) -> str:
        return self.call.caller

    @property
    def activated_extensions(self) -> tuple[str, ...]:
        return self.call.activated_extensions

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested.is_set()

    async def wait_cancel_requested(self) -> None:
        await self._cancel_requested.wait()

    def request_cancel(self) -> None:
        self._cancel_requested.set()

    def text(self) -> str:
        """The text parts of the incoming message, joined with newlines."""
        return "\n".join(part.text for part in self.message.parts if part.HasField("text"))

    def extension_active(self, uri: str) -> bool:
        return uri in self.call.activated_extensions

    def extension_payload(self, extension: Extension | str) -> Any:
        """The extension's data from Message.metadata, else the request metadata; None when absent or inactive.

        The data is read under the URI, or under the key an `Extension` names (`data_key`).
        """
        uri, key = _uri_and_key(extension)
        if not self.extension_active(uri):
            return None
        for metadata in (self.message.metadata, self.request_metadata):
            if metadata is not None and key in metadata.fields:
                return json_format.MessageToDict(metadata.fields[key])
        return None

    def attach_extension_data(
        self, target: a2a_pb2.Message | a2a_pb2.Artifact, extension: Extension | str, data: Any
    ) -> None:
        """Write `data` in target.metadata (under the URI or the extension's `data_key`) and list the URI
        in target.extensions."""
        uri, key = _uri_and_key(extension)
        if not self.extension_active(uri):
            raise ExtensionNotActiveError(f"extension {uri} is not active on this call")
        target.metadata.update({key: data})
        if uri not in target.extensions:
            target.extensions.append(uri)


def _uri_and_key(extension: Extension | str) -> tuple[str, str]:
    if isinstance(extension, Extension):
        return extension.uri, extension.data_key
    return extension, extension


class EventPublisher:
    """How an agent reports progress and results for the task it is working on."""

    __slots__ = ("_manager", "_run")

    def __init__(self, manager: TaskManager, run: TaskRun) -> None:
        self._manager = manager
        self._run = run

    def agent_message(self, text: str = "", parts: Iterable[a2a_pb2.Part] = ()) -> a2a_pb2.Message:
        """A new agent message in this task's context (not yet sent)."""
        task = self._run.live.task
        message = a2a_pb2.Message(
            message_id=new_id(),
            role=a2a_pb2.ROLE_AGENT,
            task_id=task.id,
            context_id=task.context_id,
            parts=parts,
        )
        if text:
            message.parts.add(text=text)
        return message

    async def status(self, state: int, message: a2a_pb2.Message | str | None = None) -> None:
        """Move the task to `state`, optionally with a status message (also appended to history)."""
        if isinstance(message, str):
            message = self.agent_message(message)
        self._manager.record_status(self._run, state, message)

    async def working(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(TaskState.TASK_STATE_WORKING, message)

    async def input_required(self, message: a2a_pb2.Message | str) -> None:
        await self.status(TaskState.TASK_STATE_INPUT_REQUIRED, message)

    async def auth_required(self, message: a2a_pb2.Message | str) -> None:
        await self.status(TaskState.TASK_STATE_AUTH_REQUIRED, message)

    async def complete(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(TaskState.TASK_STATE_COMPLETED, message)

    async def fail(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(TaskState.TASK_STATE_FAILED, message)

    async def reject(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(TaskState.TASK_STATE_REJECTED, message)

    async def canceled(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(TaskState.TASK_STATE_CANCELED, message)

    async def artifact(
        self,
        artifact: a2a_pb2.Artifact | None = None,
        *,
        text: str | None = None,
        artifact_id: str = "",
        name: str = "",
        append: bool = False,
        last_chunk: bool = False,
    ) -> None:
        """Publish an artifact, or one chunk of it (`append=True` extends the artifact with that id)."""
        if artifact is None:
            artifact = a2a_pb2.Artifact(artifact_id=artifact_id or new_id(), name=name)
            if text is not None:
                artifact.parts.add(text=text)
        elif not artifact.artifact_id:
            artifact.artifact_id = new_id()
        self._manager.record_artifact(self._run, artifact, append, last_chunk)


class AgentExecutor(Protocol):
    """An agent. `execute` runs once per accepted message; `cancel` when a client cancels the task.

    `execute` should end with the task in a terminal state (complete, fail, reject) or an interrupted
    one (input_required, auth_required). If it returns without either, the server fails the task; if
    it raises, the server fails the task with a generic message and logs the exception.
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None: ...

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None: ...
