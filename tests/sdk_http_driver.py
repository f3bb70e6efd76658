# mypy: disable-error-code="import-not-found"
"""Drives our server with a2a-sdk 1.x's own client over one HTTP binding; runs in the SDK's venv
(tests/sdk_signing_env.py), never in ours: `python -I tests/sdk_http_driver.py PLAN_JSON`.

Plan: {"base_url": the HTTP port's URL, "binding": "JSONRPC" or "HTTP+JSON", "token": a bearer token,
"extension": the URI the card requires, "ca": the PEM file of the CA to trust over https, or null}. The client is made from the card the server serves, with only that
binding allowed. It calls every method: first without the required extension (refused), then with it: a send
that returns at once, push config create/get/list/delete, a subscription and a streaming send (each task then
canceled, which ends its stream), get, list, the extended card, and a cancel of a canceled task (refused).
Prints one JSON line: what each step saw (its error's class name where it failed), and the `A2A-Extensions`
response headers the server sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict

IMMEDIATELY = a2a_pb2.SendMessageConfiguration(return_immediately=True)


def message(text: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])


async def refused(call: Any) -> str:
    try:
        result = call()
        if hasattr(result, "__anext__"):
            async for _ in result:
                pass
        else:
            await result
    except Exception as error:
        return type(error).__name__
    return "accepted"


async def drive(plan: dict[str, Any]) -> dict[str, Any]:
    echoes: list[str] = []

    async def seen(response: httpx.Response) -> None:
        if "a2a-extensions" in response.headers:
            echoes.append(response.headers["a2a-extensions"])

    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {plan['token']}"},
        event_hooks={"response": [seen]},
        timeout=30,
        verify=plan.get("ca") or True,
    )
    config = ClientConfig(supported_protocol_bindings=[plan["binding"]], httpx_client=http, streaming=False)
    streaming = ClientConfig(supported_protocol_bindings=[plan["binding"]], httpx_client=http, streaming=True)
    unary = await create_client(plan["base_url"], config)
    streams = await create_client(plan["base_url"], streaming)
    context = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([plan["extension"]])])
    )
    seen_steps: dict[str, Any] = {}
    seen_steps["without_extension"] = await refused(
        lambda: unary.send_message(a2a_pb2.SendMessageRequest(message=message("no"), configuration=IMMEDIATELY))
    )
    first = [
        event
        async for event in unary.send_message(
            a2a_pb2.SendMessageRequest(message=message("one"), configuration=IMMEDIATELY), context=context
        )
    ]
    task_id = first[0].task.id
    seen_steps["send"] = MessageToDict(first[0])
    config_request = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook")
    created = await unary.create_task_push_notification_config(config_request, context=context)
    named = {"task_id": task_id, "id": created.id}
    got = await unary.get_task_push_notification_config(
        a2a_pb2.GetTaskPushNotificationConfigRequest(**named), context=context
    )
    listed = await unary.list_task_push_notification_configs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id), context=context
    )
    await unary.delete_task_push_notification_config(
        a2a_pb2.DeleteTaskPushNotificationConfigRequest(**named), context=context
    )
    seen_steps["push_configs"] = [MessageToDict(got) == MessageToDict(created), len(listed.configs)]

    async def canceled_stream(events: Any) -> list[dict[str, Any]]:
        """The stream's events, canceling its task once it has begun (which ends it)."""
        seen_events: list[dict[str, Any]] = []
        async for event in events:
            seen_events.append(MessageToDict(event))
            if len(seen_events) == 1:
                await unary.cancel_task(a2a_pb2.CancelTaskRequest(id=event.task.id), context=context)
        return seen_events

    subscription = streams.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id), context=context)
    seen_steps["subscribe"] = await canceled_stream(subscription)
    streamed = streams.send_message(a2a_pb2.SendMessageRequest(message=message("two")), context=context)
    seen_steps["stream"] = await canceled_stream(streamed)
    seen_steps["get"] = MessageToDict(await unary.get_task(a2a_pb2.GetTaskRequest(id=task_id), context=context))
    listing = await unary.list_tasks(a2a_pb2.ListTasksRequest(), context=context)
    seen_steps["list"] = [task.id for task in listing.tasks]
    card = await unary.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest(), context=context)
    seen_steps["extended_card"] = card.name
    seen_steps["cancel_again"] = await refused(
        lambda: unary.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id), context=context)
    )
    seen_steps["missing_task"] = await refused(
        lambda: unary.get_task(a2a_pb2.GetTaskRequest(id="no-such-task"), context=context)
    )
    await http.aclose()
    return {"steps": seen_steps, "echoes": echoes}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(drive(json.loads(sys.argv[1])))))
