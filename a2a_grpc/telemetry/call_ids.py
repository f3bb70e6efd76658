"""The task id and context id a response names, read as cheaply as the response allows.

Responses may arrive already encoded (`a2a_grpc.encoding`): a SendMessage answer or a stream event is
then read straight from its wire format, only as far as the two ids, instead of being parsed whole.
"""

from __future__ import annotations

from typing import Any

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03_pb2

_CONTEXT_ID = 2  # the field number of context_id in Task, Message and both update events
# SendMessageResponse and StreamResponse: payload field -> the field of the payload holding the task id
# (Task.id, Message.task_id, TaskStatusUpdateEvent.task_id, TaskArtifactUpdateEvent.task_id)
_TASK_ID_BY_PAYLOAD = {1: 1, 2: 3, 3: 1, 4: 1}
_LENGTH_DELIMITED = 2
_NONE = ("", "")
_TASKS = (a2a_pb2.Task, v03_pb2.Task)
_PAYLOADS = (a2a_pb2.SendMessageResponse, a2a_pb2.StreamResponse, v03_pb2.SendMessageResponse, v03_pb2.StreamResponse)


def response_ids(response: Any) -> tuple[str, str]:
    """(task id, context id) of a response; "" for what it does not name."""
    if type(response) is bytes:
        return encoded_ids(response)
    if isinstance(response, _TASKS):
        return response.id, response.context_id
    if isinstance(response, _PAYLOADS):
        kind = response.WhichOneof("payload")
        if kind is None:
            return _NONE
        payload = getattr(response, kind)
        return (payload.id if kind == "task" else payload.task_id), payload.context_id
    if isinstance(response, a2a_pb2.TaskPushNotificationConfig):
        return response.task_id, ""
    return _NONE


def encoded_ids(data: bytes) -> tuple[str, str]:
    """(task id, context id) of an encoded SendMessageResponse or StreamResponse. Encoders write fields
    in number order, so the ids come first: reading stops once it has both, or at the payload's first field
    past them."""
    try:
        tag = data[0]
        task_field = _TASK_ID_BY_PAYLOAD.get(tag >> 3)
        if task_field is None or tag & 7 != _LENGTH_DELIMITED:
            return _NONE
        length, at = _varint(data, 1)
        end = min(at + length, len(data))
        task_id = context_id = ""
        while at < end:
            tag = data[at]  # the first byte of a longer tag (a field past 15) is past the ids too
            number, wire_type = tag >> 3, tag & 7
            if number > 3:
                break
            if wire_type == _LENGTH_DELIMITED:
                size, at = _varint(data, at + 1)
                if number == task_field:
                    task_id = data[at : at + size].decode("utf-8", "replace")
                elif number == _CONTEXT_ID:
                    context_id = data[at : at + size].decode("utf-8", "replace")
                if task_id and context_id:
                    break
                at += size
            elif wire_type == 0:
                _, at = _varint(data, at + 1)
            else:
                break  # not a field of these messages' first three
        return task_id, context_id
    except IndexError:  # truncated: not a message we sent
        return _NONE


def _varint(data: bytes, at: int) -> tuple[int, int]:
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
