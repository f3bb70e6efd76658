"""One agent card for 1.0 and 0.3 readers, and the 0.3 AgentCard that `GetAgentCard` answers.

The card served over HTTP is the 1.0 ProtoJSON document, exact; with --v03-card, 0.3's fields are merged in
where 1.0 has no key of the same name: `protocolVersion`, `url`, `preferredTransport` and
`additionalInterfaces` (from the GRPC interfaces whose `protocolVersion` is 0.3),
`supportsAuthenticatedExtendedCard`, `security`, and each security scheme's 0.3 form (`type`, `in`, ...)
beside its 1.0 form. A 1.0 reader reads
`supportedInterfaces`; a 0.3 resolver reads `url`, and ignores the keys it does not know, as a 1.0 reader
ignores 0.3's. The card names each tenant-free 1.0 GRPC interface a second time for 0.3, same address.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from a2a_grpc.card.model import GRPC_BINDING
from a2a_grpc.encoding import json_document
from a2a_grpc.generated import a2a_pb2 as v10
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03

PROTOCOL_VERSION = "0.3"  # as the card's interfaces name it
CARD_PROTOCOL_VERSION = "0.3.0"  # as a 0.3 card's `protocolVersion` does
JsonObject = dict[str, Any]
# 1.0 scheme key -> (0.3 type, {1.0 field: 0.3 field})
_SCHEMES: dict[str, tuple[str, dict[str, str]]] = {
    "apiKeySecurityScheme": ("apiKey", {"description": "description", "location": "in", "name": "name"}),
    "httpAuthSecurityScheme": (
        "http",
        {"description": "description", "scheme": "scheme", "bearerFormat": "bearerFormat"},
    ),
    # the flows whole: a 0.3 reader ignores what it does not know (deviceCode, pkceRequired), and the 1.x SDK,
    # which rebuilds a scheme's 1.0 form from its 0.3 form when it finds one, loses nothing
    "oauth2SecurityScheme": (
        "oauth2",
        {"description": "description", "flows": "flows", "oauth2MetadataUrl": "oauth2MetadataUrl"},
    ),
    "openIdConnectSecurityScheme": (
        "openIdConnect",
        {"description": "description", "openIdConnectUrl": "openIdConnectUrl"},
    ),
    "mtlsSecurityScheme": ("mutualTLS", {"description": "description"}),
}


def is_v03(interface: v10.AgentInterface) -> bool:
    return interface.protocol_version.split(".")[:2] == ["0", "3"]


def add_v03_interfaces(card: v10.AgentCard) -> None:
    """Name every tenant-free 1.0 GRPC interface again for 0.3 (0.3 has no tenants), unless the card names a 0.3
    interface of its own."""
    interfaces = card.supported_interfaces
    if any(is_v03(interface) for interface in interfaces):
        return
    for interface in list(interfaces):
        if interface.protocol_binding == GRPC_BINDING and not interface.tenant and not is_v03(interface):
            interfaces.add(url=interface.url, protocol_binding=GRPC_BINDING, protocol_version=PROTOCOL_VERSION)


def merged_document(card: v10.AgentCard) -> JsonObject:
    """The card's 1.0 ProtoJSON document with the 0.3 fields merged in (1.0's keys win)."""
    document: JsonObject = json_document(card)
    _merge(document, v03_fields(document))
    return document


def v03_fields(document: JsonObject) -> JsonObject:
    """What a 0.3 reader needs of a card that 1.0's ProtoJSON names otherwise or not at all."""
    interfaces = [
        {"url": interface["url"], "transport": interface["protocolBinding"]}
        for interface in document.get("supportedInterfaces", [])
        if interface.get("protocolVersion", "").split(".")[:2] == ["0", "3"]
    ]
    if not interfaces:  # no interface a 0.3 client can call (every one names a tenant)
        return {}
    fields: JsonObject = {
        "protocolVersion": CARD_PROTOCOL_VERSION,
        "url": interfaces[0]["url"],
        "preferredTransport": interfaces[0]["transport"],
        "additionalInterfaces": interfaces,
    }
    if document.get("capabilities", {}).get("extendedAgentCard"):
        fields["supportsAuthenticatedExtendedCard"] = True
    if "securityRequirements" in document:
        fields["security"] = _security(document["securityRequirements"])
    schemes = {name: _scheme(scheme) for name, scheme in document.get("securitySchemes", {}).items()}
    if schemes:
        fields["securitySchemes"] = schemes
    skills = [
        {"security": _security(skill["securityRequirements"])} if "securityRequirements" in skill else {}
        for skill in document.get("skills", [])
    ]
    if any(skills):
        fields["skills"] = skills
    return fields


def _security(requirements: list[JsonObject]) -> list[JsonObject]:
    """1.0's `[{"schemes": {name: {"list": scopes}}}]` as 0.3's `[{name: scopes}]`."""
    return [
        {name: scopes.get("list", []) for name, scopes in requirement.get("schemes", {}).items()}
        for requirement in requirements
    ]


def _scheme(scheme: JsonObject) -> JsonObject:
    for key, (kind, renames) in _SCHEMES.items():
        if key in scheme:
            given = scheme[key]
            converted: JsonObject = {"type": kind}
            converted |= {new: given[old] for old, new in renames.items() if old in given}
            return converted
    return {}


def _merge(into: JsonObject, extra: JsonObject) -> None:
    """Add `extra`'s keys to `into` where it has none; objects merge key by key, lists item by item."""
    for key, value in extra.items():
        have = into.get(key)
        if key not in into:
            into[key] = value
        elif isinstance(have, dict) and isinstance(value, dict):
            _merge(have, value)
        elif isinstance(have, list) and isinstance(value, list):
            for mine, theirs in zip(have, value, strict=False):
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    _merge(mine, theirs)


def agent_card(card: v10.AgentCard) -> v03.AgentCard:
    """The card as 0.3's AgentCard message, for `GetAgentCard`; without `signatures`, which sign the 1.0
    document and would not verify over this one."""
    document = json_document(card)
    fields = v03_fields(document)
    proto_fields: JsonObject = {
        key: value
        for key, value in document.items()
        if key not in ("supportedInterfaces", "securityRequirements", "signatures", "skills")
    }
    proto_fields |= {key: fields[key] for key in ("protocolVersion", "url", "preferredTransport") if key in fields}
    proto_fields["additionalInterfaces"] = fields.get("additionalInterfaces", [])
    proto_fields["supportsAuthenticatedExtendedCard"] = fields.get("supportsAuthenticatedExtendedCard", False)
    if "securityRequirements" in document:
        proto_fields["security"] = document["securityRequirements"]
    proto_fields["skills"] = [_proto_skill(skill) for skill in document.get("skills", [])]
    converted = v03.AgentCard()
    json_format.ParseDict(proto_fields, converted, ignore_unknown_fields=True)
    return converted


def _proto_skill(skill: JsonObject) -> JsonObject:
    converted = {key: value for key, value in skill.items() if key != "securityRequirements"}
    if "securityRequirements" in skill:
        converted["security"] = skill["securityRequirements"]
    return converted
