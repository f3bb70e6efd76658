"""Response encoding: messages the server sends more than once, or wraps, are encoded once.

The A2A service is registered with `encode_response` as its response serializer, so a handler may
yield or return bytes it already holds: a stream event is encoded once for all its subscribers, and a
SendMessage response wraps the task's encoding instead of copying the task into a new message.
"""

from __future__ import annotations

from typing import Any

from a2a_grpc.generated import a2a_pb2

_SEND_MESSAGE_RESPONSE_TASK = b"\x0a"  # SendMessageResponse.task: field 1, length-delimited


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
