"""The settings of `a2a-grpc serve` are declared once (a2a_grpc.settings): the docs' table, the sections of
`serve --help`, the config file's keys and ServerSettings' defaults are all that one table."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import pytest
from process import REPO

from a2a_grpc.server import ServerSettings
from a2a_grpc.settings import FILE_SETTINGS, SECTIONS, SETTINGS, Kind
from a2a_grpc.settings.docs import main, settings_tables, written_tables
from a2a_grpc.settings.flags import add_serve_arguments, server_settings

CONFIGURATION = REPO / "docs" / "configuration.md"
SERVER_FIELDS = {field.name for field in dataclasses.fields(ServerSettings)}


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="a2a-grpc serve")
    add_serve_arguments(parser, environ={})
    return parser


def test_the_docs_settings_table_is_the_table() -> None:
    assert written_tables(CONFIGURATION.read_text()) == settings_tables(), (
        "docs/configuration.md's settings table and a2a_grpc.settings differ: write it again with "
        "`.venv/bin/python -m a2a_grpc.settings.docs docs/configuration.md`"
    )


def test_the_table_is_written_again_in_place(tmp_path: Path) -> None:
    stale = written_tables(CONFIGURATION.read_text()).replace("`--listen`", "`--listen-old`")
    document = tmp_path / "configuration.md"
    document.write_text(f"# Configuration\n\n{stale}\n\nThe rest.\n")
    assert main([str(document)]) == 0
    assert document.read_text() == f"# Configuration\n\n{settings_tables()}\n\nThe rest.\n"


def test_every_setting_has_one_name_and_one_place() -> None:
    keys = [setting.key for setting in SETTINGS]
    assert len(keys) == len(set(keys))
    assert list(FILE_SETTINGS) == [key for key in keys if key != "config"]
    for setting in SETTINGS:
        assert setting.help and setting.doc, setting.key
        assert setting.env.startswith("A2A_GRPC_"), setting.key
        if setting.field:
            assert setting.field in SERVER_FIELDS, setting.key
            assert setting.default == getattr(ServerSettings(), setting.field), setting.key


def test_the_defaults_of_the_command_line_are_server_settings_defaults() -> None:
    assert server_settings(serve_parser().parse_args([])) == ServerSettings()


def test_serve_help_has_one_group_per_section_with_its_flags() -> None:
    parser = serve_parser()
    groups = {group.title: group for group in parser._action_groups}
    for section, settings in SECTIONS.items():
        flags = [action.option_strings[0] for action in groups[section]._group_actions]
        assert flags == [setting.flag for setting in settings]
    help_text = parser.format_help()
    assert [line for line in help_text.splitlines() if line.endswith(":") and not line.startswith(" ")] == [
        "options:",
        *(f"{section}:" for section in SECTIONS),
    ]


@pytest.mark.parametrize(
    ("key", "value", "parsed"),
    [
        ("max_streams", "7", 7),
        ("grace", "2.5", 2.5),
        ("access_log", "off", False),
        ("tracing", "on", True),
        ("push_allow_http", "yes", True),
        ("push_allow_http", "on", False),  # as the flag always read it: 1, true or yes
        ("auth_token", "t=alice", ["t=alice"]),
    ],
)
def test_each_settings_variable_is_its_flags_default(key: str, value: str, parsed: object) -> None:
    setting = FILE_SETTINGS[key]
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser, environ={**os.environ, setting.env: value})
    assert getattr(parser.parse_args([]), key) == parsed


def test_switches_say_what_their_variable_takes() -> None:
    for setting in SETTINGS:
        assert bool(setting.environment_words()) == (setting.kind in (Kind.FLAG, Kind.ON_OFF)), setting.key
