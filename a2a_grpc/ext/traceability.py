"""The traceability extension (a2aproject/a2a-samples, `extensions/traceability/v1`).

When a caller activates it, the agent records the steps it took (tool calls, calls to other agents)
as a trace and returns it in the metadata of a Message or Artifact under `METADATA_KEY`. When the
agent calls another A2A agent through `Tracer.call_agent`, it asks that agent for its trace too and
nests it in the step of that call (`step_action.agent_invocation.response_trace`).

Each step carries the fields of the samples' Python implementation (step_id, trace_id, call_type,
name, parameters, requests, latency in ms, start/end time, ...) and the `step_action` of the spec's
data model, so readers of either shape find what they expect.

    tracer = Tracer(context)
    with tracer.tool("word_count", {"text": text}) as step:
        count = len(text.split())
    result = await tracer.call_agent(client, "summarise this")
    await events.complete(tracer.attach(events.agent_message("done")))
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar, Unpack

import jsonschema
from google.protobuf import json_format

from a2a_grpc.agent import RequestContext
from a2a_grpc.client.agent_client import A2AClient, CallOptions, Result, text_message
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "EXTENSION",
    "METADATA_KEY",
    "TRACE_SCHEMA",
    "URI",
    "CallType",
    "Step",
    "Trace",
    "Tracer",
    "find_trace",
]

_CORE_PATH = "github.com/a2aproject/a2a-samples/extensions/traceability/v1"
URI = f"https://{_CORE_PATH}"
METADATA_KEY = f"{_CORE_PATH}/traceability"


class CallType(StrEnum):
    AGENT = "AGENT"
    TOOL = "TOOL"
    HOST = "HOST"


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["step_id", "call_type"],
    "properties": {
        "step_id": {"type": "string"},
        "trace_id": _nullable("string"),
        "parent_step_id": _nullable("string"),
        "call_type": {"enum": [c.value for c in CallType]},
        "name": _nullable("string"),
        "parameters": _nullable("object"),
        "requests": _nullable("object"),
        "step_type": _nullable("string"),
        "cost": _nullable("number"),
        "total_tokens": _nullable("number"),
        "additional_attributes": _nullable("object"),
        "latency": _nullable("number"),
        "start_time": _nullable("string"),
        "end_time": _nullable("string"),
        "step_action": {
            "type": "object",
            "properties": {
                "tool_invocation": {
                    "type": "object",
                    "properties": {"tool_name": {"type": "string"}, "parameters": _nullable("object")},
                },
                "agent_invocation": {
                    "type": "object",
                    "properties": {
                        "agent_url": {"type": "string"},
                        "agent_name": {"type": "string"},
                        "requests": _nullable("object"),
                        "response_trace": {"$ref": "#"},
                    },
                },
            },
        },
    },
}

TRACE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["trace_id", "steps"],
    "properties": {"trace_id": {"type": "string"}, "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}},
    "$defs": {"step": _STEP_SCHEMA},
}

EXTENSION = Extension(
    uri=URI,
    description="Returns a trace of the agent's steps (tool calls, calls to other agents, nested traces).",
    metadata_key=METADATA_KEY,
    payload_schema=TRACE_SCHEMA,
)

_trace_validator = jsonschema.Draft202012Validator(TRACE_SCHEMA)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


def _parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class Step:
    """One operation of a trace. `end()` closes it (the `Tracer` does so when its block exits)."""

    call_type: CallType
    name: str = ""
    step_id: str = field(default_factory=lambda: _new_id("step"))
    trace_id: str = ""
    parent_step_id: str | None = None
    step_type: str | None = None
    parameters: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None
    agent_url: str | None = None
    response_trace: Trace | None = None
    cost: float | None = None
    total_tokens: int | None = None
    additional_attributes: dict[str, str] = field(default_factory=dict)
    start_time: datetime = field(default_factory=lambda: datetime.now(UTC))
    end_time: datetime | None = None
    error: str | None = None

    @property
    def latency_ms(self) -> int | None:
        if self.end_time is None:
            return None
        return int((self.end_time - self.start_time).total_seconds() * 1000)

    def end(self, *, cost: float | None = None, total_tokens: int | None = None, error: str | None = None) -> None:
        if self.end_time is None:
            self.end_time = datetime.now(UTC)
        self.cost = cost if cost is not None else self.cost
        self.total_tokens = total_tokens if total_tokens is not None else self.total_tokens
        self.error = error if error is not None else self.error

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "trace_id": self.trace_id,
            "parent_step_id": self.parent_step_id,
            "call_type": self.call_type.value,
            "name": self.name,
            "parameters": self.parameters,
            "requests": self.requests,
            "step_type": self.step_type,
            "cost": self.cost,
            "total_tokens": self.total_tokens,
            "additional_attributes": dict(self.additional_attributes),
            "latency": self.latency_ms,
            "start_time": self.start_time.isoformat(),
            "end_time": self.end_time.isoformat() if self.end_time else None,
            "error": self.error,
            **self._step_action(),
        }

    def _step_action(self) -> dict[str, Any]:
        if self.call_type is CallType.TOOL:
            return {"step_action": {"tool_invocation": {"tool_name": self.name, "parameters": self.parameters}}}
        if self.call_type is CallType.AGENT:
            invocation: dict[str, Any] = {
                "agent_url": self.agent_url or "",
                "agent_name": self.name,
                "requests": self.requests,
            }
            if self.response_trace is not None:
                invocation["response_trace"] = self.response_trace.to_dict()
            return {"step_action": {"agent_invocation": invocation}}
        return {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        """A step from a dict that fits TRACE_SCHEMA's step (as `Trace.from_dict` checks)."""
        invocation = (data.get("step_action") or {}).get("agent_invocation") or {}
        nested = invocation.get("response_trace")
        total_tokens = _number(data.get("total_tokens"))
        return cls(
            call_type=CallType(data["call_type"]),
            name=data.get("name") or "",
            step_id=data["step_id"],
            trace_id=data.get("trace_id") or "",
            parent_step_id=data.get("parent_step_id"),
            step_type=data.get("step_type"),
            parameters=data.get("parameters"),
            requests=data.get("requests"),
            agent_url=invocation.get("agent_url"),
            response_trace=Trace.from_dict(nested) if nested is not None else None,
            cost=_number(data.get("cost")),
            total_tokens=int(total_tokens) if total_tokens is not None else None,
            additional_attributes={str(k): str(v) for k, v in (data.get("additional_attributes") or {}).items()},
            start_time=_parse_time(data.get("start_time")) or datetime.fromtimestamp(0, UTC),
            end_time=_parse_time(data.get("end_time")),
            error=str(data["error"]) if data.get("error") is not None else None,
        )


@dataclass
class Trace:
    trace_id: str = field(default_factory=lambda: _new_id("trace"))
    steps: list[Step] = field(default_factory=list)

    def add(self, step: Step) -> Step:
        step.trace_id = self.trace_id
        self.steps.append(step)
        return step

    def to_dict(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "steps": [step.to_dict() for step in self.steps]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        return cls(trace_id=data["trace_id"], steps=[Step.from_dict(step) for step in data["steps"]])


def find_trace(response: a2a_pb2.SendMessageResponse | a2a_pb2.Task | a2a_pb2.Message) -> Trace | None:
    """The trace in an agent's response (its status message, artifacts or agent messages), None when
    there is none or it does not fit the schema (a downstream agent's trace is untrusted input)."""
    if isinstance(response, a2a_pb2.SendMessageResponse):
        payload = response.WhichOneof("payload")
        if payload is None:
            return None
        return find_trace(response.task if payload == "task" else response.message)
    if isinstance(response, a2a_pb2.Message):
        carriers: list[a2a_pb2.Message | a2a_pb2.Artifact] = [response]
    else:
        carriers = [response.status.message, *reversed(response.artifacts)]
        carriers.extend(m for m in reversed(response.history) if m.role == a2a_pb2.ROLE_AGENT)
    for carrier in carriers:
        value = carrier.metadata.fields.get(METADATA_KEY)
        if value is not None:
            data = json_format.MessageToDict(value)
            if _trace_validator.is_valid(data):
                return Trace.from_dict(data)
    return None


_open_step: ContextVar[Step | None] = ContextVar("a2a_grpc_trace_step", default=None)

Carrier = TypeVar("Carrier", a2a_pb2.Message, a2a_pb2.Artifact)


class Tracer:
    """Records one request's steps when the caller activated traceability (and only then)."""

    def __init__(self, context: RequestContext, trace: Trace | None = None) -> None:
        self.context = context
        self.active = context.extension_active(URI)
        self.trace = trace if trace is not None else Trace()

    @contextmanager
    def step(self, call_type: CallType, name: str, **fields: Any) -> Iterator[Step]:
        """A step around the block: timed, its error recorded if the block raises, nested under the
        step open around it (in this task) as its parent."""
        step = Step(call_type=call_type, name=name, **fields)
        parent = _open_step.get()
        if step.parent_step_id is None and parent is not None and parent.trace_id == self.trace.trace_id:
            step.parent_step_id = parent.step_id
        if self.active:
            self.trace.add(step)
        token = _open_step.set(step)
        try:
            yield step
        except Exception as error:
            step.end(error=f"{type(error).__name__}: {error}")
            raise
        finally:
            _open_step.reset(token)
            step.end()

    def tool(self, name: str, parameters: Mapping[str, Any] | None = None) -> AbstractContextManager[Step]:
        """`with tracer.tool(name, parameters) as step:` around a tool call."""
        return self.step(CallType.TOOL, name, parameters=dict(parameters or {}), step_type="tool_call")

    async def call_agent(
        self,
        client: A2AClient,
        message: a2a_pb2.Message | str,
        *,
        name: str = "",
        metadata: Mapping[str, Any] | None = None,
        **options: Unpack[CallOptions],
    ) -> Result[a2a_pb2.SendMessageResponse]:
        """SendMessage to another agent as a step of this trace. When this call is traced, the other
        agent is asked for its trace too, and the trace it returns is nested in the step."""
        if isinstance(message, str):
            message = text_message(message)
        requests = json_format.MessageToDict(message)
        with self.step(
            CallType.AGENT, name or client.target, requests=requests, agent_url=client.target, step_type="agent_call"
        ) as step:
            if self.active:
                options["extra_extensions"] = (*options.get("extra_extensions", ()), URI)
            result = await client.send_message(message, metadata=metadata, **options)
            if result.value.HasField("task"):
                step.additional_attributes["task_id"] = result.value.task.id
            if self.active and result.is_active(URI):
                step.response_trace = find_trace(result.value)
        return result

    def attach(self, target: Carrier) -> Carrier:
        """Write the trace into `target` when the call is traced. Returns `target`."""
        if self.active:
            self.context.attach_extension_data(target, EXTENSION, self.trace.to_dict())
        return target
