"""Response encoding: messages the server sends more than once, or wraps, are encoded once.

The A2A service is registered with `encode_response` as its response serializer, so a handler may
yield or return bytes it already holds: a stream event is encoded once for all its subscribers, and a
SendMessage response wraps the task's encoding instead of copying the task into a new message.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import message_factory

from a2a_grpc.generated import a2a_pb2

A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
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


def a2a_method_handlers(servicer: Any) -> dict[str, grpc.RpcMethodHandler]:
    """Handlers for every A2AService method of `servicer`, answering through `encode_response`."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in A2A_SERVICE.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        handler = (
            grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = handler(
            getattr(servicer, method.name),
            request_deserializer=request_class.FromString,
            response_serializer=encode_response,
        )
    return handlers
