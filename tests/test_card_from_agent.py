"""The card `serve` builds from the agent when no --card is given (a2a_grpc.card.from_agent): the agent's name,
description, version, skills, modes and extensions; its class name and docstring, and one warning, when it
describes nothing; the demo card only for a2a-grpc's own agents. Every card served by default is the pure 1.0
`AgentCard` the spec's JSON schema allows (tests/card_schema.py); --v03-card merges in 0.3's fields, which that
schema refuses."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from card_agents import TICKET_EXTENSION, PlainAgent, TicketAgent
from card_schema import card_schema_errors
from conftest import StartServer
from process import ServerProcess, http_get, run_serve, serve_process
from served_card import served_card

from a2a_grpc.agents.writer import WriterAgent
from a2a_grpc.card.from_agent import card_from_agent, serving_card
from a2a_grpc.card.model import CardError
from a2a_grpc.cli import main

WARNING = "does not describe itself"
V03_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"}


@pytest.fixture(scope="module")
def ticket_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve_process(tmp_path_factory.mktemp("ticket"), "--agent", "tests.card_agents:TicketAgent") as server:
        yield server


def test_serve_agent_without_card_serves_a_card_naming_the_agent(ticket_server: ServerProcess) -> None:
    card = http_get(ticket_server.card_url).json()
    assert (card["name"], card["description"], card["version"]) == (
        "Ticket triage",
        "Sorts support tickets by urgency.",
        "2.1.0",
    )
    assert [(skill["id"], skill["tags"]) for skill in card["skills"]] == [
        ("triage", ["support"]),
        ("summarise", ["support"]),
    ]
    assert (card["defaultInputModes"], card["defaultOutputModes"]) == (
        ["text/plain", "application/json"],
        ["application/json"],
    )
    assert TICKET_EXTENSION in [extension["uri"] for extension in card["capabilities"]["extensions"]]
    assert "demo" not in str(card).lower() and "Echo" not in str(card), "nothing of the demo card"
    assert card_schema_errors(card) == []
    assert WARNING not in ticket_server.stderr


def test_an_agent_that_describes_nothing_gets_its_class_and_docstring_and_one_warning(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--agent", "tests.card_agents:PlainAgent") as server:
        card = http_get(server.card_url).json()
        stderr = server.stderr
    assert (card["name"], card["description"], card["version"]) == (
        "PlainAgent",
        "Answers with what it was sent.",
        "0.0.0",
    )
    assert [skill["id"] for skill in card["skills"]] == ["plainagent"], "one skill: the agent as a whole"
    assert card_schema_errors(card) == []
    [warning] = [line for line in stderr.splitlines() if WARNING in line]
    assert "WARNING" in warning and "PlainAgent" in warning
    assert all(word in warning for word in ("name", "description", "skills", "--card")), warning


def test_a_malformed_skill_stops_serve_in_one_line_naming_it(tmp_path: Path) -> None:
    done = run_serve(["--listen", "127.0.0.1:0", "--agent", "tests.card_agents:MisspelledSkillAgent"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    line = done.stderr.splitlines()[-1]
    assert line.startswith("a2a-grpc: ") and done.stderr.count("\n") == 1, done.stderr
    assert "skills[0]" in line and "tagz" in line, line


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({"name": 7}, "agent attribute name must be a str"),
        ({"skills": "triage"}, "agent attribute skills must be a list"),
        ({"skills": [3]}, "agent skills[0] must be an AgentSkill or a dict"),
        ({"skills": [{"id": 1}]}, "agent skills[0] is not an AgentSkill"),
        ({"default_input_modes": "text/plain"}, "default_input_modes must be a list of media types"),
    ],
    ids=["name", "skills-text", "skill-number", "skill-field-type", "modes-text"],
)
def test_an_attribute_of_the_wrong_form_is_refused_naming_it(attributes: dict[str, Any], named: str) -> None:
    agent = type("Odd", (PlainAgent,), attributes)()
    with pytest.raises(CardError, match=re.escape(named)):
        card_from_agent(agent)


def test_the_demo_agents_keep_the_demo_card() -> None:
    assert serving_card(None, WriterAgent()).name == "a2a-grpc demo agent"
    assert serving_card(None, TicketAgent()).name == "Ticket triage"


async def test_the_default_card_validates_against_the_spec_schema_and_v03_card_does_not(
    start_server: StartServer,
) -> None:
    pure = await served_card(await start_server())
    assert V03_FIELDS.isdisjoint(pure), "no 0.3 field by default"
    listed = [(interface["protocolBinding"], interface["protocolVersion"]) for interface in pure["supportedInterfaces"]]
    assert listed == [("GRPC", "1.0"), ("GRPC", "0.3"), ("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")]
    assert card_schema_errors(pure) == []
    merged = await served_card(await start_server(v03_card=True))
    assert merged.keys() >= V03_FIELDS, "--v03-card: what a 0.3 resolver reads"
    [refusal] = card_schema_errors(merged)
    assert all(field in refusal for field in V03_FIELDS), refusal
    assert card_schema_errors({key: value for key, value in merged.items() if key not in V03_FIELDS}) == []


def shown_card(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, dict[str, Any]]:
    """`a2a-grpc config show ARGV`: the line heading the card it ends with, and that card."""
    assert main(["config", "show", "--store", "memory", *argv]) == 0
    out = capsys.readouterr().out
    tomllib.loads(out)  # comment lines: still a config file
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("# the agent card"))
    return lines[start], json.loads("\n".join(line.removeprefix("#") for line in lines[start + 1 :]))


def test_config_show_ends_with_the_card_serve_would_serve(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--agent", "tests.card_agents:TicketAgent", "--listen", "127.0.0.1:7001", "--http-listen", "127.0.0.1:7002")
    heading, card = shown_card(capsys, *argv)
    assert "built from the agent" in heading
    assert card["name"] == "Ticket triage" and V03_FIELDS.isdisjoint(card)
    listed = [(interface["protocolBinding"], interface["url"]) for interface in card["supportedInterfaces"]]
    assert listed == [
        ("GRPC", "127.0.0.1:7001"),
        ("GRPC", "127.0.0.1:7001"),
        ("JSONRPC", "http://127.0.0.1:7002/"),
        ("HTTP+JSON", "http://127.0.0.1:7002"),
    ], "the interfaces serve would list"
    assert card_schema_errors(card) == []
    _, merged = shown_card(capsys, "--agent", "tests.card_agents:TicketAgent", "--v03-card")
    assert merged.keys() >= V03_FIELDS


def test_config_show_names_the_demo_card_of_a_demo_agent(capsys: pytest.CaptureFixture[str]) -> None:
    heading, card = shown_card(capsys)
    assert "the demo card" in heading and card["name"] == "a2a-grpc demo agent"


def test_config_show_names_what_stops_serve_instead_of_a_card(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--store", "memory", "--agent", "tests.card_agents:MisspelledSkillAgent"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("# the agent card")]
    assert "serve would stop" in line and "skills[0]" in line and "tagz" in line, line
