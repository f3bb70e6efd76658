"""What an agent card's signature covers: the card's canonical bytes.

The card as ProtoJSON (camelCase), without `signatures`, with empty strings, lists and objects (and nulls)
removed at every depth, serialized by the JSON Canonicalization Scheme (RFC 8785), as UTF-8. That is what
the A2A spec names and what a2a-sdk 1.3 signs and verifies. a2a-sdk 1.0 serialized the same content with
`json.dumps(sort_keys=True, separators=(",", ":"))` instead: non-ASCII escaped as \\uXXXX and a Struct's 5
written 5.0. For a card of ASCII text without such numbers the two are the same bytes; `SDK_1_0` gives the
other form, so that a verifier can accept a signature over either (the same content, encoded two ways).
Canonical forms are made from the parsed 1.0 card, never from the served document: the keys a 0.3 reader
needs, merged into that document, are outside the signature.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import rfc8785
from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2

CanonicalForm = Callable[[a2a_pb2.AgentCard], bytes]


class CanonicalizationError(ValueError):
    """A card with no canonical form (a number JSON cannot carry exactly, nesting past any card's)."""


def card_payload(card: a2a_pb2.AgentCard) -> dict[str, Any]:
    """The card's content as a signature covers it, before serialization (CanonicalizationError for a number JSON
    cannot carry, NaN or an infinity in a Struct)."""
    try:
        document = json_format.MessageToDict(card)
    except json_format.SerializeToJsonError as error:
        raise CanonicalizationError(f"the card has no JSON form: {error}") from None
    document.pop("signatures", None)
    payload = _without_empty(document)
    return payload if isinstance(payload, dict) else {}


def rfc8785_bytes(card: a2a_pb2.AgentCard) -> bytes:
    """The card's RFC 8785 canonical form: what this server signs."""
    try:
        return rfc8785.dumps(card_payload(card))
    except (rfc8785.CanonicalizationError, RecursionError) as error:
        raise CanonicalizationError(f"the card has no RFC 8785 form: {error or type(error).__name__}") from None


def sdk_1_0_bytes(card: a2a_pb2.AgentCard) -> bytes:
    """The card as a2a-sdk 1.0 serialized it for signing."""
    try:
        return json.dumps(card_payload(card), sort_keys=True, separators=(",", ":")).encode()
    except RecursionError:
        raise CanonicalizationError("the card nests deeper than any card does") from None


RFC_8785 = "RFC 8785"
SDK_1_0 = "a2a-sdk 1.0 JSON"
CANONICAL_FORMS: dict[str, CanonicalForm] = {RFC_8785: rfc8785_bytes, SDK_1_0: sdk_1_0_bytes}


def _without_empty(value: Any) -> Any:
    """`value` without empty strings, lists, objects and nulls, at any depth (None when nothing is left)."""
    if isinstance(value, dict):
        kept = {key: item for key, item in ((k, _without_empty(v)) for k, v in value.items()) if item is not None}
        return kept or None
    if isinstance(value, list):
        items = [item for item in (_without_empty(v) for v in value) if item is not None]
        return items or None
    if value == "":
        return None
    return value
