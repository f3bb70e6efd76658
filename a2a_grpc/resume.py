"""The stream-resume extension, this server's own (`RESUME_EXTENSION_URI`).

A2A v1.0 gives SubscribeToTask no cursor. A stream whose call activates this extension carries, in the
metadata of every event (the first Task included), `{"seq": N}` under the extension's URI: N is the
number of that event in the task's event log, and for the first Task the number of the last event it
already includes. A SubscribeToTask that sends the header `a2a-stream-after: N` gets, after its first
Task (the task as it is now), exactly the events numbered above N, then the live ones.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from a2a_grpc.call import CallContext
from a2a_grpc.errors import InvalidRequestError
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER

EXTENSION = Extension(
    uri=RESUME_EXTENSION_URI,
    description=(
        "Numbers stream events ({'seq': N} in each event's metadata under this URI); SubscribeToTask with "
        f"the header '{STREAM_AFTER_HEADER}: N' resumes after event N."
    ),
)

_MAX_SEQ = 2**63 - 1
_FIELDS = {  # the StreamResponse field that a stream event's encoding starts with
    b"\x0a"[0]: "task",
    b"\x1a"[0]: "status_update",
    b"\x22"[0]: "artifact_update",
}


def is_active(call: CallContext) -> bool:
    return RESUME_EXTENSION_URI in call.activated_extensions


def with_seq(event: bytes, seq: int) -> bytes:
    """A stream event's encoding with `{"seq": seq}` added to its metadata under the extension's URI.

    Appended, not re-encoded: a parser merges repeated occurrences of a message field, so the suffix
    lands in the event's own metadata whatever the event already holds.
    """
    stamp = struct_pb2.Struct()
    stamp.fields[RESUME_EXTENSION_URI].struct_value.fields["seq"].number_value = seq
    suffix = a2a_pb2.StreamResponse()
    getattr(suffix, _FIELDS[event[0]]).metadata.CopyFrom(stamp)
    return event + suffix.SerializeToString()


def event_seq(event: a2a_pb2.StreamResponse) -> int | None:
    """The number a stream event carries under the extension's URI; None when it carries none."""
    kind = event.WhichOneof("payload")
    if kind is None or kind == "message":
        return None
    stamp = getattr(event, kind).metadata.fields.get(RESUME_EXTENSION_URI)
    if stamp is None:
        return None
    seq = stamp.struct_value.fields.get("seq")
    return int(seq.number_value) if seq is not None else None


def stream_after(call: CallContext) -> int | None:
    """The event a resumed stream continues after, from the request's header; None when not sent."""
    values = [value for key, value in call.metadata if key == STREAM_AFTER_HEADER]
    if not values:
        return None
    text = values[-1] if isinstance(values[-1], str) else ""
    if len(values) > 1 or not (0 < len(text) <= 19 and text.isascii() and text.isdigit()) or int(text) > _MAX_SEQ:
        raise InvalidRequestError(
            f"invalid {STREAM_AFTER_HEADER} header",
            violations=[(STREAM_AFTER_HEADER, "must be sent once, as a non-negative decimal event number")],
        )
    return int(text)
