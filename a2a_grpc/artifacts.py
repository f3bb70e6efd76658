"""How artifact events build up a task's artifacts: one rule for the live task and for stored replays."""

from __future__ import annotations

from collections.abc import MutableSequence

from a2a_grpc.generated import a2a_pb2


def apply_artifact_chunk(artifacts: MutableSequence[a2a_pb2.Artifact], chunk: a2a_pb2.Artifact, append: bool) -> int:
    """A new artifact id is added at the end; `append` extends the artifact with that id; otherwise the
    chunk replaces it in place.

    Returns about how many bytes of the artifacts were overwritten (see `a2a_grpc.compaction`)."""
    for existing in artifacts:
        if existing.artifact_id == chunk.artifact_id:
            if append:
                return _extend(existing, chunk)
            replaced = existing.ByteSize()
            existing.CopyFrom(chunk)
            return replaced
    artifacts.append(chunk)
    return 0


def _extend(existing: a2a_pb2.Artifact, chunk: a2a_pb2.Artifact) -> int:
    """Parts are appended, metadata keys merged, extension URIs joined; a set name or description wins."""
    replaced = 0
    existing.parts.extend(chunk.parts)
    if chunk.name:
        replaced += len(existing.name)
        existing.name = chunk.name
    if chunk.description:
        replaced += len(existing.description)
        existing.description = chunk.description
    if chunk.HasField("metadata"):
        replaced += chunk.metadata.ByteSize()
        existing.metadata.MergeFrom(chunk.metadata)
    for uri in chunk.extensions:
        if uri not in existing.extensions:
            existing.extensions.append(uri)
    return replaced
