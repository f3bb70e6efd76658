"""How artifact events build up a task's artifacts: one rule for the live task and for stored replays."""

from __future__ import annotations

from collections.abc import MutableSequence

from a2a_grpc.generated import a2a_pb2


def apply_artifact_chunk(artifacts: MutableSequence[a2a_pb2.Artifact], chunk: a2a_pb2.Artifact, append: bool) -> None:
    """A new artifact id is added at the end; `append` extends the artifact with that id; otherwise the
    chunk replaces it in place."""
    for existing in artifacts:
        if existing.artifact_id == chunk.artifact_id:
            if append:
                _extend(existing, chunk)
            else:
                existing.CopyFrom(chunk)
            return
    artifacts.append(chunk)


def _extend(existing: a2a_pb2.Artifact, chunk: a2a_pb2.Artifact) -> None:
    """Parts are appended, metadata keys merged, extension URIs joined; a set name or description wins."""
    existing.parts.extend(chunk.parts)
    if chunk.name:
        existing.name = chunk.name
    if chunk.description:
        existing.description = chunk.description
    if chunk.HasField("metadata"):
        existing.metadata.MergeFrom(chunk.metadata)
    for uri in chunk.extensions:
        if uri not in existing.extensions:
            existing.extensions.append(uri)
