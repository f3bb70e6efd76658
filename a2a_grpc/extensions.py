"""Extensions: how an agent declares them and how a call activates them.

One `ExtensionRegistry` is the single source for both the agent card's `capabilities.extensions`
and the server's negotiation, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema
from google.protobuf import json_format, struct_pb2

from a2a_grpc.errors import Metadata
from a2a_grpc.settings.defaults import MAX_EXTENSION_PAYLOAD_BYTES as MAX_EXTENSION_PAYLOAD_BYTES
from a2a_grpc.wire import EXTENSIONS_HEADER

__all__ = [
    "MAX_EXTENSION_URI_LENGTH",
    "Extension",
    "ExtensionPayload",
    "ExtensionRegistry",
    "Negotiation",
    "extension_header_values",
    "oversized_payloads",
    "parse_extension_values",
]

if TYPE_CHECKING:
    from a2a_grpc.generated import a2a_pb2

# A URI longer than this is ignored, never an error. How many a call may send is bounded by the
# transport's header size limit (ServerSettings.max_metadata_bytes).
MAX_EXTENSION_URI_LENGTH = 2048
# Negotiations are memoised per distinct header value, for values up to this size.
_NEGOTIATION_CACHE_SIZE = 512
_CACHEABLE_HEADER_CHARS = 1024


@dataclass(frozen=True)
class Extension:
    """An extension this agent supports.

    `payload_schema` is a JSON Schema for the extension's data in request/Message/Part metadata
    (under the URI as key); activated payloads that do not fit it are refused as INVALID_ARGUMENT.
    `dependencies` are URIs that must be activated too; they are never activated on the client's behalf.
    """

    uri: str
    description: str = ""
    required: bool = False
    params: Mapping[str, Any] | None = None
    dependencies: tuple[str, ...] = ()
    payload_schema: Mapping[str, Any] | None = None
    metadata_key: str = ""  # where its data travels when its spec names a key other than the URI

    @property
    def data_key(self) -> str:
        """The metadata key that carries this extension's data."""
        return self.metadata_key or self.uri

    def to_proto(self) -> a2a_pb2.AgentExtension:
        # imported here: negotiation, which the standard interceptors share, must not register lf.a2a.v1
        from a2a_grpc.generated import a2a_pb2

        declared = a2a_pb2.AgentExtension(uri=self.uri, description=self.description, required=self.required)
        if self.params:
            declared.params.update(dict(self.params))
        return declared

    @classmethod
    def from_proto(cls, declared: a2a_pb2.AgentExtension) -> Extension:
        params = json_format.MessageToDict(declared.params) if declared.HasField("params") else None
        return cls(uri=declared.uri, description=declared.description, required=declared.required, params=params)


@dataclass(frozen=True, slots=True)
class Negotiation:
    requested: tuple[str, ...]
    activated: tuple[str, ...]
    missing_required: tuple[str, ...]
    echo: str  # the comma-joined activated set, as sent back in `a2a-extensions`


@dataclass(frozen=True, slots=True)
class ExtensionPayload:
    """An activated extension's data in a request, and where it is (`path`, as a BadRequest names it)."""

    uri: str
    path: str
    value: struct_pb2.Value
    size: int  # serialized bytes


@dataclass
class ExtensionRegistry:
    """The extensions an agent declares, with everything negotiation needs precomputed."""

    extensions: list[Extension] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_uri: dict[str, Extension] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._cache: dict[tuple[str, ...], Negotiation] = {}
        for extension in list(self.extensions):
            self._index(extension)

    def add(self, extension: Extension) -> None:
        """Declare `extension`, replacing any earlier declaration of the same URI."""
        self.extensions = [e for e in self.extensions if e.uri != extension.uri]
        self.extensions.append(extension)
        self._index(extension)

    def _index(self, extension: Extension) -> None:
        if extension.payload_schema is not None:
            validator_cls = jsonschema.validators.validator_for(extension.payload_schema)
            validator_cls.check_schema(extension.payload_schema)
            self._validators[extension.uri] = validator_cls(extension.payload_schema)
        self._by_uri[extension.uri] = extension
        self._cache.clear()

    def __contains__(self, uri: object) -> bool:
        return uri in self._by_uri

    @property
    def required_uris(self) -> tuple[str, ...]:
        return tuple(e.uri for e in self.extensions if e.required)

    def to_card_extensions(self) -> list[a2a_pb2.AgentExtension]:
        return [extension.to_proto() for extension in self.extensions]

    def negotiate(self, header_values: tuple[str, ...]) -> Negotiation:
        """Negotiate from the raw `a2a-extensions` values of one call (memoised per distinct input)."""
        cached = self._cache.get(header_values)
        if cached is not None:
            return cached
        negotiation = self._negotiate(parse_extension_values(header_values))
        if sum(len(value) for value in header_values) <= _CACHEABLE_HEADER_CHARS:
            if len(self._cache) >= _NEGOTIATION_CACHE_SIZE:
                self._cache.clear()
            self._cache[header_values] = negotiation
        return negotiation

    def _negotiate(self, requested: tuple[str, ...]) -> Negotiation:
        active = [uri for uri in requested if uri in self._by_uri]
        changed = True
        while changed:  # drop extensions whose dependencies are not active, until nothing changes
            active_set = set(active)
            kept = [uri for uri in active if all(d in active_set for d in self._by_uri[uri].dependencies)]
            changed = len(kept) != len(active)
            active = kept
        activated = tuple(active)
        missing = tuple(uri for uri in self.required_uris if uri not in activated)
        return Negotiation(requested, activated, missing, ",".join(activated))

    def schema_payloads(self, activated: Sequence[str], request: a2a_pb2.SendMessageRequest) -> list[ExtensionPayload]:
        """The data of the activated extensions that have a payload schema, sized; cheap."""
        checked = [uri for uri in activated if uri in self._validators]
        if not checked:
            return []
        message = request.message
        places: list[tuple[str, struct_pb2.Struct]] = [
            ("metadata", request.metadata),
            ("message.metadata", message.metadata),
        ]
        places.extend((f"message.parts[{i}].metadata", part.metadata) for i, part in enumerate(message.parts))
        keys = [(uri, self._by_uri[uri].data_key) for uri in checked]
        payloads: list[ExtensionPayload] = []
        for path, metadata in places:
            for uri, key in keys:
                if key in metadata.fields:
                    value = metadata.fields[key]
                    payloads.append(ExtensionPayload(uri, f"{path}[{key!r}]", value, value.ByteSize()))
        return payloads

    def payload_violations(self, payloads: Iterable[ExtensionPayload]) -> list[tuple[str, str]]:
        """BadRequest violations for the payloads that do not fit their schema. Its time grows with the
        payloads' size (about 0.5 µs a byte for the traceability schema). Safe to call from a worker thread."""
        violations: list[tuple[str, str]] = []
        for payload in payloads:
            violations.extend(self._check(payload))
        return violations

    def _check(self, payload: ExtensionPayload) -> list[tuple[str, str]]:
        try:
            data = json_format.MessageToDict(payload.value)
        except ValueError:  # NaN or an infinity: JSON has no such number
            return [(payload.path, f"is not JSON data (a number is NaN or infinite): extension {payload.uri}")]
        error = jsonschema.exceptions.best_match(self._validators[payload.uri].iter_errors(data))
        if error is None:
            return []
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        return [(payload.path + where, f"does not fit the schema of extension {payload.uri}: {error.message}")]


def oversized_payloads(payloads: Iterable[ExtensionPayload], max_bytes: int) -> list[tuple[str, str]]:
    """BadRequest violations for the payloads larger than `max_bytes`."""
    return [
        (
            payload.path,
            f"the data of extension {payload.uri} is {payload.size} bytes, over the limit of {max_bytes} bytes",
        )
        for payload in payloads
        if payload.size > max_bytes
    ]


def parse_extension_values(values: Iterable[str]) -> tuple[str, ...]:
    """Every entry, split on commas, trimmed, empties dropped, de-duplicated in first-seen order."""
    seen: dict[str, None] = {}
    for value in values:
        for item in value.split(","):
            uri = item.strip()
            if uri and len(uri) <= MAX_EXTENSION_URI_LENGTH:
                seen[uri] = None
    return tuple(seen)


def extension_header_values(metadata: Metadata) -> tuple[str, ...]:
    """The values of every `a2a-extensions` entry in `metadata` (keys arrive lower-case)."""
    return tuple(v for k, v in metadata if k == EXTENSIONS_HEADER and isinstance(v, str))
