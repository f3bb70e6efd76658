"""The 1.0 model's answers (lf.a2a.v1) as A2A 0.3 responses (package a2a.v1).

What 0.3's gRPC wire cannot carry is dropped: a text part's `media_type` and `filename`, a message's
`reference_task_ids`. A data part whose value is not a JSON object (0.3 holds
objects only) reaches a 0.3 caller as `{"value": <the value>}`. A status update is `final` when the task
is terminal, or interrupted (input or auth required) on a stream that ends there (SendStreamingMessage).
"""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2 as v10
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES
from a2a_grpc.v0_3.requests import CONFIGS, TASKS

WRAPPED_VALUE_KEY = "value"  # the key a non-object data part's value is put under


def task(given: v10.Task) -> v03.Task:
    converted = v03.Task(
        id=given.id,
        context_id=given.context_id,
        artifacts=[artifact(each) for each in given.artifacts],
        history=[message(each) for each in given.history],
    )
    if given.HasField("status"):
        converted.status.CopyFrom(status(given.status))
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def status(given: v10.TaskStatus) -> v03.TaskStatus:
    converted = v03.TaskStatus(state=given.state)  # type: ignore[arg-type]  # the same numbers in both versions
    if given.HasField("message"):
        converted.update.CopyFrom(message(given.message))
    if given.HasField("timestamp"):
        converted.timestamp.CopyFrom(given.timestamp)
    return converted


def message(given: v10.Message) -> v03.Message:
    converted = v03.Message(
        message_id=given.message_id,
        context_id=given.context_id,
        task_id=given.task_id,
        role=given.role,  # type: ignore[arg-type]
        content=[part(each) for each in given.parts],
        extensions=given.extensions,
    )
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def part(given: v10.Part) -> v03.Part:
    converted = _content(given)
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def _content(given: v10.Part) -> v03.Part:
    kind = given.WhichOneof("content")
    if kind == "text":
        return v03.Part(text=given.text)
    if kind == "raw":
        file = v03.FilePart(file_with_bytes=given.raw, mime_type=given.media_type, name=given.filename)
        return v03.Part(file=file)
    if kind == "url":
        return v03.Part(file=v03.FilePart(file_with_uri=given.url, mime_type=given.media_type, name=given.filename))
    converted = v03.Part()
    if kind == "data":
        value = given.data
        if value.WhichOneof("kind") == "struct_value":
            converted.data.data.CopyFrom(value.struct_value)
        else:
            converted.data.data.fields[WRAPPED_VALUE_KEY].CopyFrom(value)
    return converted


def artifact(given: v10.Artifact) -> v03.Artifact:
    converted = v03.Artifact(
        artifact_id=given.artifact_id,
        name=given.name,
        description=given.description,
        parts=[part(each) for each in given.parts],
        extensions=given.extensions,
    )
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def send_response(given: v10.SendMessageResponse) -> v03.SendMessageResponse:
    if given.HasField("message"):
        return v03.SendMessageResponse(msg=message(given.message))
    return v03.SendMessageResponse(task=task(given.task))


def stream_response(given: v10.StreamResponse, *, ends_on_interrupt: bool) -> v03.StreamResponse:
    kind = given.WhichOneof("payload")
    if kind == "status_update":
        return v03.StreamResponse(status_update=status_update(given.status_update, ends_on_interrupt))
    if kind == "artifact_update":
        return v03.StreamResponse(artifact_update=artifact_update(given.artifact_update))
    if kind == "message":
        return v03.StreamResponse(msg=message(given.message))
    return v03.StreamResponse(task=task(given.task))


def status_update(given: v10.TaskStatusUpdateEvent, ends_on_interrupt: bool) -> v03.TaskStatusUpdateEvent:
    state = given.status.state
    final = state in TERMINAL_STATES or (ends_on_interrupt and state in INTERRUPTED_STATES)
    converted = v03.TaskStatusUpdateEvent(
        task_id=given.task_id, context_id=given.context_id, status=status(given.status), final=final
    )
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def artifact_update(given: v10.TaskArtifactUpdateEvent) -> v03.TaskArtifactUpdateEvent:
    converted = v03.TaskArtifactUpdateEvent(
        task_id=given.task_id,
        context_id=given.context_id,
        artifact=artifact(given.artifact),
        append=given.append,
        last_chunk=given.last_chunk,
    )
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def push_config(given: v10.TaskPushNotificationConfig) -> v03.TaskPushNotificationConfig:
    config = v03.PushNotificationConfig(id=given.id, url=given.url, token=given.token)
    if given.HasField("authentication"):
        authentication = given.authentication
        config.authentication.schemes.extend([authentication.scheme] if authentication.scheme else [])
        config.authentication.credentials = authentication.credentials
    return v03.TaskPushNotificationConfig(
        name=f"{TASKS}/{given.task_id}/{CONFIGS}/{given.id}", push_notification_config=config
    )
