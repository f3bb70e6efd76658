"""The agent card: loaded from ProtoJSON, completed from the server's settings, checked at start-up."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from google.protobuf import json_format

from a2a_grpc.encoding import json_document
from a2a_grpc.extensions import Extension, ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.validation import required_violations

PROTOCOL_VERSION = "1.0"
GRPC_BINDING = "GRPC"


class CardError(ValueError):
    """An agent card that cannot be served; the message names the field."""


def load_card(path: str | Path | None) -> a2a_pb2.AgentCard:
    """Parse a ProtoJSON `lf.a2a.v1.AgentCard` from `path` (the demo card when None)."""
    if path is None:
        text = resources.files("a2a_grpc").joinpath("demo_card.json").read_text()
        where = "the demo card"
    else:
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise CardError(f"cannot read agent card {path}: {error.strerror}") from None
        where = str(path)
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        raise CardError(f"{where} is not JSON: {error}") from None
    except RecursionError:
        raise CardError(f"{where} nests JSON deeper than any agent card does") from None
    try:
        return json_format.Parse(text, a2a_pb2.AgentCard())
    except json_format.ParseError as error:
        raise CardError(f"{where} is not a valid lf.a2a.v1.AgentCard: {error}") from None
    except RecursionError:
        raise CardError(f"{where} nests JSON deeper than any agent card does") from None


def register_card_extensions(card: a2a_pb2.AgentCard, extensions: ExtensionRegistry) -> None:
    """Extensions the card declares join the registry (code declarations of the same URI win)."""
    for declared in card.capabilities.extensions:
        if declared.uri not in extensions:
            extensions.add(Extension.from_proto(declared))


def complete_card(card: a2a_pb2.AgentCard, listen: str, extensions: ExtensionRegistry) -> a2a_pb2.AgentCard:
    """Fill what the server knows (the gRPC interface, the extensions) and check the result.

    The card's extensions are rewritten from the registry, which every card of the agent has joined
    first (`register_card_extensions`): cards and negotiation are one source.
    """
    if not any(i.protocol_binding == GRPC_BINDING for i in card.supported_interfaces):
        card.supported_interfaces.add(url=listen, protocol_binding=GRPC_BINDING, protocol_version=PROTOCOL_VERSION)
    register_card_extensions(card, extensions)
    del card.capabilities.extensions[:]
    card.capabilities.extensions.extend(extensions.to_card_extensions())
    check_card(card)
    return card


def check_card(card: a2a_pb2.AgentCard) -> None:
    violations = required_violations(card)
    for index, declared in enumerate(card.capabilities.extensions):
        if not declared.uri:
            violations.append((f"capabilities.extensions[{index}].uri", "is required"))
    for index, interface in enumerate(card.supported_interfaces):
        if any(ord(character) < 0x20 or character == "\x7f" for character in interface.tenant):
            violations.append((f"supported_interfaces[{index}].tenant", "must not contain control characters"))
    if violations:
        problems = "; ".join(f"{_json_path(field)} {description}" for field, description in violations)
        raise CardError(f"agent card is incomplete: {problems}")


def _json_path(path: str) -> str:
    """A field path as card files spell it: `supported_interfaces[0].protocol_version` ->
    `supportedInterfaces[0].protocolVersion`."""
    return re.sub(r"_([a-z0-9])", lambda match: match.group(1).upper(), path)


def card_json(card: a2a_pb2.AgentCard) -> bytes:
    """The card as ProtoJSON (camelCase names, enum names, integral numbers as integers), as served over HTTP."""
    return json.dumps(json_document(card), indent=2).encode()
