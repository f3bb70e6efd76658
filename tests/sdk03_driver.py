# mypy: disable-error-code="import-not-found"
"""Drives an A2A server with the a2a-sdk 0.3 Python client; runs in the SDK's venv (tests/sdk03_env.py), never
in ours: `python -I tests/sdk03_driver.py PLAN_JSON`.

The plan: {"card_url": base URL whose /.well-known/agent-card.json the SDK's resolver reads, or "target":
"HOST:PORT" for the card the SDK's minimal_agent_card(target, ["GRPC"]) makes (streaming); "ca_file": PEM to
trust (the card over HTTPS, the channel over TLS); "token": a bearer token sent on every call (a channel
credential); "extensions": URIs the client is configured with (sent as x-a2a-extensions); "timeout": seconds
per step; "steps": [{"op": ..., ...}]}.

Printed, one JSON object a line: {"op": "card", "card": ...} first (or its "error"), then for each step
{"step": i, "op": ..., "result": ...} or {"step": i, "op": ..., "error": ...}; a stream prints
{"step": i, "op": ..., "event": ...} for each event as it arrives, before its result (the number of events and
the task as the client put it together). An error is {"type": "AioRpcError", "code": grpc code name,
"details": text, "status_details": whether grpc-status-details-bin came, "reason", "domain", "metadata": of
its ErrorInfo} for a gRPC error, {"type": class name, "message": text} otherwise. Objects are the SDK's
pydantic types dumped as JSON (camelCase), so states read "completed", "input-required", ...

Steps: send {text, blocking?, task_id?, context_id?, history_length?}, stream {text, task_id?, context_id?} (a
message is one text part, or `parts`: a list of 0.3 Part JSON, and may carry `metadata`),
resubscribe {task_id}, get {task_id, history_length?}, cancel {task_id}, push_create {task_id, id, url,
token?}, push_get {task_id, id}, push_list {task_id}, push_delete {task_id, id} (the last two through the
SDK's generated stub: its client has no such methods), raw {method, request (ProtoJSON), metadata?: [[k, v]]}
(a call on the generated stub; its result is the response, or a stream's responses, and the text headers and
trailers as {key: value}), wait (reads one line of JSON from stdin, an object whose entries become variables;
the result is that object). A step with "background": true runs beside the steps after it (a stream the test
acts on while it is open); the driver ends once they all have. `$name` in a step's strings (at any depth) is
the variable `name`: `$task` and `$context` are the ids of the last task a step answered with (or streamed);
a step's "save_as": "name" keeps that task id as `name` too.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import string
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory, minimal_agent_card
from a2a.client.client import Client
from a2a.grpc import a2a_pb2, a2a_pb2_grpc
from a2a.types import (
    AgentCard,
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
    TransportProtocol,
)
from a2a.utils import proto_utils
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

Json = dict[str, Any]
DEFAULT_STEP_SECONDS = 20.0
DETAILS_KEY = "grpc-status-details-bin"


def emit(line: Json) -> None:
    print(json.dumps(line), flush=True)


def dump(value: Any) -> Json:
    """A pydantic object of the SDK as JSON (camelCase, unset fields left out)."""
    dumped: Json = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def error_json(error: BaseException) -> Json:
    if not isinstance(error, grpc.aio.AioRpcError):
        return {"type": type(error).__name__, "message": str(error)}
    found: Json = {
        "type": type(error).__name__,
        "code": error.code().name,
        "details": error.details() or "",
        "status_details": False,
    }
    for key, value in error.trailing_metadata() or ():
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        found["status_details"] = True
        status = status_pb2.Status()
        status.ParseFromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                found.update(reason=info.reason, domain=info.domain, metadata=dict(info.metadata))
    return found


def channel_factory(ca_file: str | None, token: str | None) -> Callable[[str], grpc.aio.Channel]:
    """Channels as a 0.3 user makes them: TLS from the CA file, the bearer token as call credentials (on a
    plaintext loopback channel through local credentials, which grpc lets carry them)."""

    def make(target: str) -> grpc.aio.Channel:
        if ca_file is None and token is None:
            return grpc.aio.insecure_channel(target)
        if ca_file is not None:
            with open(ca_file, "rb") as file:
                credentials = grpc.ssl_channel_credentials(root_certificates=file.read())
        else:
            credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
        if token is not None:
            credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
        return grpc.aio.secure_channel(target, credentials)

    return make


class Driver:
    def __init__(self, plan: Json, card: AgentCard, make_channel: Callable[[str], grpc.aio.Channel]) -> None:
        self.extensions: list[str] = list(plan.get("extensions", []))
        self.unary: Client = self.client(card, make_channel, streaming=False)
        self.streaming: Client = self.client(card, make_channel, streaming=True)
        self.channel = make_channel(str(card.url))
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)
        self.variables: dict[str, Any] = {}

    def client(self, card: AgentCard, make_channel: Callable[[str], grpc.aio.Channel], *, streaming: bool) -> Client:
        """A client the way the SDK makes one from a card, for its gRPC transport only."""
        config = ClientConfig(
            streaming=streaming,
            grpc_channel_factory=make_channel,
            supported_transports=[TransportProtocol.grpc],
            extensions=list(self.extensions),
        )
        client: Client = ClientFactory(config).create(card)
        return client

    async def close(self) -> None:
        await self.unary.close()
        await self.streaming.close()
        await self.channel.close()

    def metadata(self, extra: list[list[str]] | None = None) -> list[tuple[str, str]]:
        pairs = [("x-a2a-extensions", ",".join(self.extensions))] if self.extensions else []
        return pairs + [(key, value) for key, value in extra or []]

    def resolve(self, value: Any) -> Any:
        """`value` with each `$name` in its strings (at any depth) replaced by the variable's value."""
        if isinstance(value, str):
            return string.Template(value).safe_substitute(self.variables)
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        return value

    def saw_task(self, task: Task, step: Json) -> None:
        self.variables["task"], self.variables["context"] = task.id, task.context_id
        if name := step.get("save_as"):
            self.variables[name] = task.id

    async def run(self, index: int, step: Json) -> Json:
        op = step["op"]
        if op == "wait":
            line = await asyncio.to_thread(sys.stdin.readline)
            given: Json = json.loads(line) if line.strip() else {}
            self.variables.update(given)
            return given
        if op == "send":
            configuration = MessageSendConfiguration(blocking=step.get("blocking", True))
            if "history_length" in step:
                configuration.history_length = step["history_length"]
            answer = None
            async for item in self.unary.send_message(message(step), configuration=configuration):
                answer = item
            if isinstance(answer, Message):
                return {"message": dump(answer)}
            assert answer is not None
            task, _ = answer
            self.saw_task(task, step)
            return {"task": dump(task)}
        if op == "stream":
            return await self.read_stream(index, step, self.streaming.send_message(message(step)))
        if op == "resubscribe":
            return await self.read_stream(index, step, self.streaming.resubscribe(TaskIdParams(id=step["task_id"])))
        if op == "get":
            query = TaskQueryParams(id=step["task_id"], history_length=step.get("history_length"))
            task = await self.unary.get_task(query)
            self.saw_task(task, step)
            return {"task": dump(task)}
        if op == "cancel":
            task = await self.unary.cancel_task(TaskIdParams(id=step["task_id"]))
            self.saw_task(task, step)
            return {"task": dump(task)}
        if op == "push_create":
            config = PushNotificationConfig(id=step["id"], url=step["url"], token=step.get("token"))
            created = await self.unary.set_task_callback(
                TaskPushNotificationConfig(task_id=step["task_id"], push_notification_config=config)
            )
            return {"config": dump(created)}
        if op == "push_get":
            params = GetTaskPushNotificationConfigParams(id=step["task_id"], push_notification_config_id=step["id"])
            return {"config": dump(await self.unary.get_task_callback(params))}
        if op == "push_list":
            listed = await self.stub.ListTaskPushNotificationConfig(
                a2a_pb2.ListTaskPushNotificationConfigRequest(parent=f"tasks/{step['task_id']}"),
                metadata=self.metadata(),
            )
            configs = [dump(proto_utils.FromProto.task_push_notification_config(c)) for c in listed.configs]
            return {"configs": configs, "next_page_token": listed.next_page_token}
        if op == "push_delete":
            await self.stub.DeleteTaskPushNotificationConfig(
                a2a_pb2.DeleteTaskPushNotificationConfigRequest(
                    name=f"tasks/{step['task_id']}/pushNotificationConfigs/{step['id']}"
                ),
                metadata=self.metadata(),
            )
            return {}
        if op == "raw":
            return await self.raw(step)
        raise ValueError(f"unknown op {op!r}")

    async def read_stream(self, index: int, step: Json, events: AsyncIterator[Any]) -> Json:
        count, task = 0, None
        async for item in events:
            count += 1
            if isinstance(item, Message):
                emit({"step": index, "op": step["op"], "event": {"message": dump(item)}})
                continue
            task, update = item
            self.saw_task(task, step)
            event = {"task": dump(task)} if update is None else {update.kind: dump(update)}
            emit({"step": index, "op": step["op"], "event": event})
        return {"events": count, "task": task and dump(task)}

    async def raw(self, step: Json) -> Json:
        method = getattr(self.stub, step["method"])
        streaming = step["method"] in ("SendStreamingMessage", "TaskSubscription")
        request_type = a2a_pb2.SendMessageRequest if step["method"] == "SendStreamingMessage" else None
        request_type = request_type or getattr(a2a_pb2, f"{step['method']}Request")
        request = json_format.ParseDict(step.get("request", {}), request_type())
        call = method(request, metadata=self.metadata(step.get("metadata")))
        if streaming:
            responses = [json_format.MessageToDict(item) async for item in call]
            response: Any = responses
        else:
            response = json_format.MessageToDict(await call)
        headers = {key: value for key, value in await call.initial_metadata() or () if isinstance(value, str)}
        trailers = {key: value for key, value in await call.trailing_metadata() or () if isinstance(value, str)}
        return {"response": response, "headers": headers, "trailers": trailers}


def message(step: Json) -> Message:
    """The step's message: its `parts` (0.3 JSON) or one text part, with its `metadata`."""
    parts = [Part.model_validate(part) for part in step["parts"]] if "parts" in step else None
    return Message(
        role=Role.user,
        message_id=step.get("message_id", uuid.uuid4().hex),
        parts=parts or [Part(root=TextPart(text=step.get("text", "hello")))],
        task_id=step.get("task_id"),
        context_id=step.get("context_id"),
        metadata=step.get("metadata"),
    )


async def card_for(plan: Json) -> AgentCard:
    if "target" in plan:  # a card as a 0.3 user without one writes it
        minimal: AgentCard = minimal_agent_card(plan["target"], [TransportProtocol.grpc])
        minimal.capabilities.streaming = True
        return minimal
    verify: ssl.SSLContext | bool = True
    if plan.get("ca_file"):
        verify = ssl.create_default_context(cafile=plan["ca_file"])
    async with httpx.AsyncClient(verify=verify, timeout=plan.get("timeout", DEFAULT_STEP_SECONDS)) as http:
        card: AgentCard = await A2ACardResolver(http, plan["card_url"]).get_agent_card()
        return card


async def main(plan: Json) -> int:
    try:
        card = await card_for(plan)
    except Exception as error:
        emit({"op": "card", "error": error_json(error)})
        return 3
    emit({"op": "card", "card": dump(card)})
    driver = Driver(plan, card, channel_factory(plan.get("ca_file"), plan.get("token")))
    seconds = float(plan.get("timeout", DEFAULT_STEP_SECONDS))
    background: list[asyncio.Task[None]] = []
    try:
        for index, written in enumerate(plan.get("steps", [])):
            step = driver.resolve(written)
            if step.get("background"):
                background.append(asyncio.create_task(run_step(driver, index, step, seconds)))
                await asyncio.sleep(0)  # its call goes out before the next step's
            else:
                await run_step(driver, index, step, seconds)
        await asyncio.gather(*background)
    finally:
        await driver.close()
    return 0


async def run_step(driver: Driver, index: int, step: Json, seconds: float) -> None:
    """Runs one step and prints its result or its error; a failed step does not stop the plan."""
    try:
        result = await asyncio.wait_for(driver.run(index, step), seconds)
    except Exception as error:
        emit({"step": index, "op": step["op"], "error": error_json(error)})
    else:
        emit({"step": index, "op": step["op"], "result": result})


if __name__ == "__main__":
    sys.exit(asyncio.run(main(json.loads(sys.argv[1]))))
