"""The spec's JSON schema of a 1.0 `AgentCard` (tests/data/a2a.json, see tests/data/README.md), and a validator
of card documents against it, as the conformance kit validates a served card."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SCHEMA = Path(__file__).parent / "data" / "a2a.json"
AGENT_CARD = "Agent Card"
PACKAGES = ("lf.a2a.v1.", "google.protobuf.")


@cache
def _validator() -> Draft202012Validator:
    """The `Agent Card` definition, its `$ref`s (`lf.a2a.v1.AgentSkill.jsonschema.json`, ...) resolved to the
    bundle's definitions, whose titles are the message names with spaces."""
    definitions: dict[str, Any] = json.loads(SCHEMA.read_text())["definitions"]
    resources = [
        (f"{package}{name.replace(' ', '')}.jsonschema.json", DRAFT202012.create_resource(definition))
        for name, definition in definitions.items()
        for package in PACKAGES
    ]
    return Draft202012Validator(definitions[AGENT_CARD], registry=Registry().with_resources(resources))


def card_schema_errors(document: dict[str, Any]) -> list[str]:
    """What the schema refuses in a card document, each as `path: message`; none for a valid card."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(card)'}: {error.message}"
        for error in _validator().iter_errors(document)
    ]
