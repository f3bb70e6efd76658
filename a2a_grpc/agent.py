"""The agent API: what a team implements to plug its own agent into the server.

An agent is an `AgentExecutor`. For every message the server accepts it calls `execute(context, events)`:
the `RequestContext` says what was asked, and the `EventPublisher` is how the agent answers (status
updates, artifacts, input-required, completion, failure, or a single Message instead of a task). The
server owns task state, ordering and persistence: the agent never builds or stores a Task itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast
from urllib.parse import quote

from google.protobuf import json_format

from a2a_grpc.call import CallContext
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id

__all__ = [
    "AgentContractError",
    "AgentExecutor",
    "EventPublisher",
    "ExtensionNotActiveError",
    "PublisherError",
    "RequestContext",
    "TaskLimitError",
    "check_agent",
    "declared_extensions",
]

TaskState = a2a_pb2.TaskState


class PublisherError(RuntimeError):
    """An agent used its EventPublisher wrongly (published after a final state, for a run that is over,
    or replied with a Message after the task was already shown): a bug in the agent."""


class TaskLimitError(RuntimeError):
    """A publish would take the task past what the server lets one task hold (its artifact or history bytes); nothing
    was published. Left unhandled, it fails the task with a message that says so."""


class ExtensionNotActiveError(ValueError):
    """Extension data was attached for an extension the caller did not activate."""


class AgentContractError(TypeError, ValueError):
    """An agent the server cannot call as an `AgentExecutor` (an `execute` that is not `async def`, say):
    refused when the server is made, rather than failing each call. A ValueError too, as a bad setting."""


class RequestContext:
    """What the agent is asked to do: the incoming message, its task, and the negotiated call."""

    __slots__ = (
        "_agent_call",
        "_call",
        "_cancel_requested",
        "_copied_at",
        "_copied_from",
        "_copy",
        "_task",
        "_view",
        "message",
        "request_metadata",
    )
    _copied_from: a2a_pb2.Task  # set with `_copy`: the live task it copies, at its change `_copied_at`
    _copied_at: int

    def __init__(
        self,
        message: a2a_pb2.Message,
        task: a2a_pb2.Task | TaskHolder,
        call: CallContext,
        request_metadata: Any = None,
        *,
        view: Callable[[CallContext], CallContext] | None = None,
    ) -> None:
        self.message = message  # as the caller sent it: the task's copy carries the ids (`task_id`, `context_id`)
        self._task = task  # the task, or what keeps it current
        self._call = call
        self._view = view  # what the agent sees of `call`, made when it first looks (most agents never do)
        self._agent_call: CallContext | None = None
        self.request_metadata = request_metadata  # the SendMessageRequest.metadata Struct, if any
        self._cancel_requested: asyncio.Event | None = None  # made when first needed: most calls never are
        self._copy: a2a_pb2.Task | None = None  # what `task` gave, made when the agent first reads it

    @property
    def call(self) -> CallContext:
        """The call that sent the message, as the agent sees it (a2a_grpc.tasks.agent_view)."""
        if self._view is None:
            return self._call
        if self._agent_call is None:
            self._agent_call = self._view(self._call)
        return self._agent_call

    @property
    def task(self) -> a2a_pb2.Task:
        """A copy of the task as it stands at this read: the agent may read it (or even change it, which
        changes nothing the server keeps); the task itself changes only through what the agent publishes.
        A read after the task changed (the agent published, say) copies it again; reads in between share
        one copy. An agent that never reads it costs no copy."""
        live, changes = self._live_task()
        copy = self._copy
        if copy is None or self._copied_from is not live or self._copied_at != changes:
            copy = self._copy = a2a_pb2.Task()
            copy.CopyFrom(live)
            self._copied_from, self._copied_at = live, changes
        return copy

    def _live_task(self) -> tuple[a2a_pb2.Task, int]:
        """The task the server keeps, and how many changes it has seen (a task given as such never changes)."""
        task = self._task
        return (task, 0) if isinstance(task, a2a_pb2.Task) else (task.task, task.seq)

    @property
    def task_id(self) -> str:
        return self._live_task()[0].id

    @property
    def context_id(self) -> str:
        return self._live_task()[0].context_id

    @property
    def conversation_key(self) -> str:
        """A key for what the agent keeps of a conversation: the caller, the tenant and the context id, each
        percent-encoded and joined with "/" (no two such triples share a key). Key memory by it, not by
        `context_id` alone: a caller may send its message into any context id, another caller's too (the
        tasks stay apart; an agent's memory keyed by context id would not). The same for every message of
        one caller in one context; on an open server every caller is anonymous ("") and shares it."""
        call = self._call
        return "/".join(quote(part, safe="") for part in (call.principal, call.tenant, self.context_id))

    @property
    def caller(self) -> str:
        """The authenticated principal that sent the message ("" on an open server)."""
        return self._call.principal

    @property
    def tenant(self) -> str:
        """The tenant the request named, one the agent card names ("" on an agent without tenants)."""
        return self._call.tenant

    @property
    def caller_claims(self) -> Mapping[str, Any]:
        """What the caller's credential said about it, read-only: a JWT's claims, or a client certificate's
        `subject`, `common_name` and `subject_alternative_names`; empty for a static token or an API key."""
        return self._call.claims

    @property
    def activated_extensions(self) -> tuple[str, ...]:
        return self._call.activated_extensions

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested is not None and self._cancel_requested.is_set()

    async def wait_cancel_requested(self) -> None:
        await self._cancel_event().wait()

    def request_cancel(self) -> None:
        self._cancel_event().set()

    def _cancel_event(self) -> asyncio.Event:
        if self._cancel_requested is None:
            self._cancel_requested = asyncio.Event()
        return self._cancel_requested

    def text(self) -> str:
        """The text parts of the incoming message, joined with newlines."""
        return "\n".join(part.text for part in self.message.parts if part.HasField("text"))

    def extension_active(self, extension: Extension | str) -> bool:
        """Whether the caller activated the extension (named by its URI, or an `Extension`) on this call."""
        uri, _ = _uri_and_key(extension)
        return uri in self._call.activated_extensions

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


class TaskHolder(Protocol):
    """What keeps a task current while the server may swap it for a rebuilt copy (its live task), and
    counts its changes (`seq`: one more for each event of the task)."""

    @property
    def task(self) -> a2a_pb2.Task: ...

    @property
    def seq(self) -> int: ...


class TaskRecorder(Protocol):
    """What an EventPublisher reports to: the run of the agent on one accepted message.

    Each method raises PublisherError when the run no longer accepts it.
    """

    @property
    def task_id(self) -> str: ...

    @property
    def context_id(self) -> str: ...

    def record_status(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | None) -> None: ...

    def record_artifact(self, artifact: a2a_pb2.Artifact, append: bool, last_chunk: bool) -> None: ...

    def record_reply(self, message: a2a_pb2.Message) -> None: ...


class EventPublisher:
    """How an agent reports progress and results for the task it is working on."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder: TaskRecorder) -> None:
        self._recorder = recorder

    def agent_message(self, text: str = "", parts: Iterable[a2a_pb2.Part] = ()) -> a2a_pb2.Message:
        """A new agent message in this task's context (not yet sent)."""
        recorder = self._recorder
        message = a2a_pb2.Message(
            message_id=new_id(),
            role=a2a_pb2.ROLE_AGENT,
            task_id=recorder.task_id,
            context_id=recorder.context_id,
            parts=parts,
        )
        if text:
            message.parts.add(text=text)
        return message

    async def status(self, state: a2a_pb2.TaskState, message: a2a_pb2.Message | str | None = None) -> None:
        """Move the task to `state`, optionally with a status message (also appended to history)."""
        if isinstance(message, str):
            message = self.agent_message(message)
        self._recorder.record_status(state, message)

    async def reply(self, message: a2a_pb2.Message | str) -> None:
        """Answer the call with this Message instead of a task: SendMessage returns it, a stream carries
        it as its single event, and no task is created or stored.

        Only a new message can be answered so, and only before the agent published anything for its
        task; otherwise PublisherError. The message goes out without a task id.
        """
        if isinstance(message, str):
            message = self.agent_message(message)
        self._recorder.record_reply(message)

    async def working(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(a2a_pb2.TASK_STATE_WORKING, message)

    async def input_required(self, message: a2a_pb2.Message | str) -> None:
        await self.status(a2a_pb2.TASK_STATE_INPUT_REQUIRED, message)

    async def auth_required(self, message: a2a_pb2.Message | str) -> None:
        await self.status(a2a_pb2.TASK_STATE_AUTH_REQUIRED, message)

    async def complete(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(a2a_pb2.TASK_STATE_COMPLETED, message)

    async def fail(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(a2a_pb2.TASK_STATE_FAILED, message)

    async def reject(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(a2a_pb2.TASK_STATE_REJECTED, message)

    async def canceled(self, message: a2a_pb2.Message | str | None = None) -> None:
        await self.status(a2a_pb2.TASK_STATE_CANCELED, message)

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
        self._recorder.record_artifact(artifact, append, last_chunk)


class AgentExecutor(Protocol):
    """An agent. `execute` runs once per accepted message; `cancel` when a client cancels the task. Both are
    `async def`: the server refuses at start an agent whose `execute` or `cancel` is not (`check_agent`).

    `execute` should end with the task in a terminal state (complete, fail, reject), an interrupted one
    (input_required, auth_required), or a reply. If it returns without any, the server fails the task;
    if it raises, the server fails the task with a generic message and logs the exception.

    An agent may also have an `extensions` attribute, a sequence of `Extension`: those it declares in
    code. They join the card's `capabilities.extensions` and take part in every call's negotiation.
    `context.call.metadata` holds the request headers without the caller's credentials, unless the agent has
    a `sees_credentials = True` attribute (a2a_grpc.tasks.agent_view).
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None: ...

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None: ...


def check_agent(agent: object, name: str | None = None) -> AgentExecutor:
    """`agent`, if the server can call it: its `execute`, and its `cancel` when it has one, are coroutine
    functions (`async def`; a bound method, a functools.partial of one, or an object whose `__call__` is
    one). Else AgentContractError, naming the agent (`name`, or its class) and the method."""
    shown = name or f"{type(agent).__module__}:{type(agent).__qualname__}"
    for method in ("execute", "cancel"):
        handler = getattr(agent, method, None)
        if handler is None and method == "cancel":  # optional: CancelTask then cancels without asking the agent
            continue
        if handler is None:
            raise AgentContractError(f"{shown} is not an agent: it has no execute(context, events) method")
        if not _makes_coroutines(handler):
            raise AgentContractError(
                f"agent {shown}: its {method} is {_kind(handler)}, not a coroutine function "
                f"(async def {method}(self, context, events))"
            )
    return cast(AgentExecutor, agent)


def _makes_coroutines(handler: object) -> bool:
    if inspect.iscoroutinefunction(handler):  # an async def function or method, or a partial of one
        return True
    while isinstance(handler, functools.partial):
        handler = handler.func
    if inspect.isroutine(handler) or isinstance(handler, type) or not callable(handler):
        return False
    return inspect.iscoroutinefunction(type(handler).__call__)


def _kind(handler: object) -> str:
    if inspect.isasyncgenfunction(handler):
        return "an async generator function"
    return "a synchronous callable" if callable(handler) else f"a {type(handler).__name__}, not callable"


def declared_extensions(agent: AgentExecutor) -> list[Extension]:
    """The extensions an agent declares in code, in its optional `extensions` attribute."""
    declared: Sequence[object] = getattr(agent, "extensions", ())
    return [e for e in declared if isinstance(e, Extension)]
