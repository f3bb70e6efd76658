"""Response encoding: messages the server sends more than once, or wraps, are encoded once.

The A2A service is registered with `encode_response` as its response serializer, so a handler may
yield or return bytes it already holds: a stream event is encoded once for all its subscribers, and a
SendMessage response wraps the task's encoding instead of copying the task into a new message.
`json_document` is a message as the JSON documents we publish (the HTTP card, the CLI's output) carry it.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from a2a_grpc.generated import a2a_pb2

_SEND_MESSAGE_RESPONSE_TASK = b"\x0a"  # SendMessageResponse.task: field 1, length-delimited
_EXACT_INTEGERS = 2**53  # a double holds every integer up to this magnitude exactly


def encode_response(message: Any) -> bytes:
    return message if type(message) is bytes else message.SerializeToString()


def send_message_response(task: a2a_pb2.Task) -> bytes:
    """The encoding of `SendMessageResponse(task=task)`, without copying the task."""
    encoded = task.SerializeToString()
    return _SEND_MESSAGE_RESPONSE_TASK + _varint(len(encoded)) + encoded


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def json_document(message: ProtoMessage) -> Any:
    """`message` as ProtoJSON data, its integral numbers as integers: a `Struct` (extension params,
    metadata) holds every number as a double, which would otherwise publish `5` as `5.0`. A2A messages
    have no double fields of their own."""
    return _integral_numbers(json_format.MessageToDict(message))


def _integral_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_numbers(item) for item in value]
    return value
