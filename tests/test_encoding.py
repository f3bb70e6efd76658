"""The pre-encoded responses are exactly what the generated messages would encode."""

from __future__ import annotations

import pytest

from a2a_grpc.encoding import encode_response, send_message_response
from a2a_grpc.generated import a2a_pb2


@pytest.mark.parametrize("text_size", [0, 1, 100, 127, 128, 16_383, 16_384, 300_000])
def test_send_message_response_matches_the_generated_encoding(text_size: int) -> None:
    task = a2a_pb2.Task(id="t", context_id="c", status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_COMPLETED))
    if text_size:
        task.artifacts.add(artifact_id="a").parts.add(text="x" * text_size)
    expected = a2a_pb2.SendMessageResponse(task=task).SerializeToString()
    assert send_message_response(task) == expected
    assert a2a_pb2.SendMessageResponse.FromString(send_message_response(task)).task == task


def test_encode_response_passes_bytes_through_and_encodes_messages() -> None:
    event = a2a_pb2.StreamResponse(task=a2a_pb2.Task(id="t"))
    assert encode_response(event) == event.SerializeToString()
    assert encode_response(b"\x0a\x03\x0a\x01t") == b"\x0a\x03\x0a\x01t"
