"""The timestamp extension (a2aproject/a2a-samples, `extensions/timestamp/v1`).

When a caller activates it, the agent stamps each Message and Artifact it creates with the time it
was created: an RFC 3339 UTC string in metadata under `METADATA_KEY`, the URI listed in the object's
`extensions`. The samples' spec text names `.../samples/extensions/timestamp/v1`, but every published
implementation (Python, Go, JS) uses the URI below, so that is the one agents meet on the wire.

    await events.complete(timestamp.stamp(context, events.agent_message("done")))
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

from a2a_grpc.agent import RequestContext
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2

__all__ = [
    "EXTENSION",
    "METADATA_KEY",
    "URI",
    "rfc3339",
    "stamp",
    "timestamp_of",
]

_CORE_PATH = "github.com/a2aproject/a2a-samples/extensions/timestamp/v1"
URI = f"https://{_CORE_PATH}"
METADATA_KEY = f"{_CORE_PATH}/timestamp"

# RFC 3339 in UTC, second precision at least, nanoseconds at most.
RFC3339_UTC_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]00:00)$"

EXTENSION = Extension(
    uri=URI,
    description="Adds the creation time (RFC 3339, UTC) to messages and artifacts.",
    metadata_key=METADATA_KEY,
    payload_schema={"type": "string", "pattern": RFC3339_UTC_PATTERN},
)

Stampable = TypeVar("Stampable", a2a_pb2.Message, a2a_pb2.Artifact)


def rfc3339(moment: datetime | None = None) -> str:
    """`moment` (now by default) as an RFC 3339 UTC string with microseconds."""
    moment = datetime.now(UTC) if moment is None else moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def stamp(context: RequestContext, target: Stampable, moment: datetime | None = None) -> Stampable:
    """Stamp `target` when the call activated the extension; an existing stamp is kept. Returns `target`."""
    if context.extension_active(URI) and METADATA_KEY not in target.metadata.fields:
        context.attach_extension_data(target, EXTENSION, rfc3339(moment))
    return target


def timestamp_of(target: a2a_pb2.Message | a2a_pb2.Artifact) -> datetime | None:
    """The stamp on a received Message or Artifact, None when it has none or it is not a timestamp."""
    value = target.metadata.fields.get(METADATA_KEY)
    if value is None or value.WhichOneof("kind") != "string_value":
        return None
    try:
        moment = datetime.fromisoformat(value.string_value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
