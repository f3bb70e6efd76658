"""The agent card built from the agent, which `serve` serves when no `--card` file is given.

The agent describes itself in optional attributes (class attributes or properties):

- `name`, `description`, `version` (str): the card's; by default the class name, the first paragraph of the
  class docstring, and `DEFAULT_VERSION`;
- `skills`: `a2a_pb2.AgentSkill` messages, or mappings of AgentSkill fields (`id`, `name`, `description`, `tags`,
  `examples`, `input_modes`, ... in snake_case or camelCase); by default one skill that is the agent as a whole;
- `default_input_modes`, `default_output_modes` (media types): `text/plain` by default.

The card says the agent streams and takes push notification configs (both are the server's, not the agent's
work); a card file (`--card`) says otherwise where that is wanted.

The extensions the agent declares (`extensions`) join every card when the server completes it. The demo agents of
a2a_grpc.agents keep the demo card.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Mapping, Sequence

from google.protobuf import json_format

from a2a_grpc.card.model import CardError, load_card
from a2a_grpc.generated import a2a_pb2

log = logging.getLogger(__name__)

DEFAULT_VERSION = "0.0.0"
DEFAULT_MODES = ("text/plain",)
DEMO_AGENTS_PACKAGE = "a2a_grpc.agents."
DESCRIBING_ATTRIBUTES = ("name", "description", "skills")


def serving_card(path: str | None, agent: object) -> a2a_pb2.AgentCard:
    """The card file at `path`, else the card built from `agent` (the demo card for a2a-grpc's own agents)."""
    if path is not None:
        return load_card(path)
    if _is_demo_agent(agent):
        return load_card(None)
    return card_from_agent(agent)


def card_source(path: str | None, agent: object) -> str:
    """Where `serving_card(path, agent)` comes from, in words."""
    if path is not None:
        return f"the card file {path}"
    return "the demo card" if _is_demo_agent(agent) else "the card built from the agent"


def _is_demo_agent(agent: object) -> bool:
    return type(agent).__module__.startswith(DEMO_AGENTS_PACKAGE)


def card_from_agent(agent: object) -> a2a_pb2.AgentCard:
    """The card `agent`'s attributes describe; CardError, in one line, for an attribute of the wrong form. Logs
    one warning when the agent describes nothing of itself."""
    kind = type(agent).__name__
    if not any(getattr(agent, attribute, None) for attribute in DESCRIBING_ATTRIBUTES):
        log.warning(
            "agent %s does not describe itself: its card is made of its class name and docstring; set name, "
            "description and skills on the agent (or serve a card file with --card)",
            kind,
        )
    name = _text(agent, "name") or kind
    description = _text(agent, "description") or _docstring_summary(type(agent)) or f"{name}, served by a2a-grpc"
    card = a2a_pb2.AgentCard(
        name=name,
        description=description,
        version=_text(agent, "version") or DEFAULT_VERSION,
        capabilities=a2a_pb2.AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=_modes(agent, "default_input_modes"),
        default_output_modes=_modes(agent, "default_output_modes"),
    )
    card.skills.extend(_skills(agent) or [_whole_agent_skill(name, description)])
    return card


def _text(agent: object, attribute: str) -> str:
    value = getattr(agent, attribute, None)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CardError(f"agent attribute {attribute} must be a str, not {type(value).__name__}")
    return value.strip()


def _docstring_summary(kind: type) -> str:
    """The first paragraph of the class's own docstring, on one line."""
    doc = inspect.cleandoc(kind.__doc__ or "")
    return " ".join(doc.split("\n\n", 1)[0].split())


def _modes(agent: object, attribute: str) -> list[str]:
    value = getattr(agent, attribute, None)
    if value is None:
        return list(DEFAULT_MODES)
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(m, str) for m in value):
        raise CardError(f"agent attribute {attribute} must be a list of media types (str), got {value!r:.80}")
    return list(value)


def _skills(agent: object) -> list[a2a_pb2.AgentSkill]:
    declared = getattr(agent, "skills", None)
    if declared is None:
        return []
    if isinstance(declared, str | bytes | Mapping) or not isinstance(declared, Sequence):
        raise CardError(f"agent attribute skills must be a list of AgentSkill or dicts, not {type(declared).__name__}")
    return [_skill(index, skill) for index, skill in enumerate(declared)]


def _skill(index: int, skill: object) -> a2a_pb2.AgentSkill:
    if isinstance(skill, a2a_pb2.AgentSkill):
        return skill
    if not isinstance(skill, Mapping):
        raise CardError(f"agent skills[{index}] must be an AgentSkill or a dict, not {type(skill).__name__}")
    try:
        return json_format.ParseDict(dict(skill), a2a_pb2.AgentSkill())
    except json_format.ParseError as error:
        first_line = str(error).splitlines()[0]  # the next lists every field of AgentSkill
        raise CardError(f"agent skills[{index}] is not an AgentSkill: {first_line}") from None


def _whole_agent_skill(name: str, description: str) -> a2a_pb2.AgentSkill:
    """The one skill of an agent that declares none (a card lists at least one): the agent itself."""
    skill_id = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"
    return a2a_pb2.AgentSkill(id=skill_id, name=name, description=description, tags=[skill_id])
