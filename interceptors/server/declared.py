"""The extensions a standard interceptor enforces: an agent card's `capabilities.extensions`, or (uri, required) pairs.

A card is a path to its ProtoJSON file, the ProtoJSON as a dict, or an `AgentCard` message of any generated
module. Files and dicts are read as plain JSON (`capabilities.extensions[].uri` and `.required`) and messages by
their attributes, so no generated code is imported here: the card may come from another package's stubs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from google.protobuf.message import Message

from a2a_grpc.extensions import Extension, ExtensionRegistry

CardSource: TypeAlias = str | os.PathLike[str] | Mapping[str, Any] | Message


def declared_extensions(
    card: CardSource | None = None, extensions: Iterable[tuple[str, bool]] | None = None
) -> ExtensionRegistry:
    """The registry of what `card` declares, or of the `extensions` pairs; ValueError for a card or pair that
    declares nothing sensible, TypeError unless exactly one of the two is given."""
    if (card is None) == (extensions is None):
        raise TypeError("give the extensions to enforce as card= or as extensions=, one of the two")
    pairs = card_extensions(card) if card is not None else [_pair(pair) for pair in extensions or ()]
    registry = ExtensionRegistry()
    seen: set[str] = set()
    for uri, required in pairs:
        if uri in seen:
            raise ValueError(f"extension {uri} is declared twice: declare each extension once")
        seen.add(uri)
        registry.add(Extension(uri, required=required))
    return registry


def card_extensions(card: CardSource) -> list[tuple[str, bool]]:
    """The (uri, required) pairs `card` declares in `capabilities.extensions`."""
    if isinstance(card, Message):
        return [_pair((declared.uri, declared.required)) for declared in card.capabilities.extensions]  # type: ignore[attr-defined]
    if isinstance(card, Mapping):
        return _json_extensions(card, "the agent card")
    path = Path(card)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the agent card {path}: {error}") from None
    if not isinstance(document, Mapping):
        raise ValueError(f"the agent card {path} is not a JSON object")
    return _json_extensions(document, f"the agent card {path}")


def _json_extensions(card: Mapping[str, Any], where: str) -> list[tuple[str, bool]]:
    capabilities = card.get("capabilities") or {}
    if not isinstance(capabilities, Mapping):
        raise ValueError(f"{where}: capabilities is not an object")
    entries = capabilities.get("extensions") or []
    if not isinstance(entries, list) or not all(isinstance(entry, Mapping) for entry in entries):
        raise ValueError(f"{where}: capabilities.extensions is not a list of objects")
    try:
        return [_pair((entry.get("uri"), entry.get("required", False))) for entry in entries]
    except ValueError as error:
        raise ValueError(f"{where}: capabilities.extensions: {error}") from None


def _pair(pair: tuple[Any, Any]) -> tuple[str, bool]:
    uri, required = pair
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError(f"an extension's uri must be a non-empty string, not {uri!r}")
    if not isinstance(required, bool):
        raise ValueError(f"the required of extension {uri} must be true or false, not {required!r}")
    return uri, required
