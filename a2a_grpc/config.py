"""The config file of `a2a-grpc serve`, and the `a2a-grpc config check` and `config show` commands.

The file is TOML. Its top-level keys are the keys of a2a_grpc.settings (serve's long flags with `-` as `_`:
`listen`, `http_listen`, `store`, `max_list_page_bytes`, ...). Each value goes through its setting's
converter and choices, so it is checked as the flag would be; a repeatable setting takes a list, an on/off
one true or false, one with a numeric converter a number.

Precedence, lowest first: the setting's built-in default, the file, its environment variable, its flag. A
repeatable flag given on the command line replaces the list of the lower layers rather than adding to it.
The file is located by `--config FILE`, else by A2A_GRPC_CONFIG; its relative paths are relative to the
working directory, as a flag's are.
`config check` also loads the card files the file names and imports its agent, and then makes every check `serve`
makes before it starts (a2a_grpc.startup), on the file's settings under the environment. `config show` ends with
the agent card serve would serve, as comment lines.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from a2a_grpc.assembly.cards import card_document
from a2a_grpc.card.from_agent import card_source
from a2a_grpc.card.model import CardError, load_card
from a2a_grpc.faces import advertise as advertise_faces
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import load_agent
from a2a_grpc.settings import FILE_SETTINGS, Kind, Setting
from a2a_grpc.settings.flags import add_serve_arguments, server_settings
from a2a_grpc.settings.setting import Converter
from a2a_grpc.settings.shown import number_text, redact, toml_value
from a2a_grpc.startup import SettingRefused, built_server, check_processes, importing_from

CONFIG_ENV = "A2A_GRPC_CONFIG"
CONFIG_KEY = "config"  # the dest of --config: not a key of the file itself
TOML_ERROR_LINE = re.compile(r"\(at line (\d+), column \d+\)")
EXIT_OK = 0
EXIT_USAGE = 2
_UNSET: Any = object()


class ConfigError(Exception):
    """A config file that cannot be used. Each problem is one line naming the file, and the key and its line
    when it is about one; the exception's text is the first, with a count of the others."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(problems[0])
        self.problems = list(problems)

    def __str__(self) -> str:
        more = len(self.problems) - 1
        return self.problems[0] + (f" (and {more} more: `a2a-grpc config check` lists them all)" if more else "")


class _Problem(Exception):
    """A value that does not fit its key: what was expected."""


@dataclass(frozen=True)
class ConfigFile:
    """A config file that passed: each key's value (as the flag's converter made it) and the line it is on."""

    path: str
    values: dict[str, Any]
    lines: dict[str, int | None]

    def where(self, key: str) -> str:
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else self.path


def load(path: str) -> ConfigFile:
    """The config file at `path`, checked against the settings; ConfigError naming every problem."""
    try:
        with open(path, "rb") as file:
            text = file.read().decode("utf-8")
    except OSError as error:
        raise ConfigError([f"cannot read the config file {path}: {error.strerror or error}"]) from None
    except UnicodeDecodeError as error:
        raise ConfigError([f"{path}: not a TOML file: not UTF-8 text (byte {error.start})"]) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        at = TOML_ERROR_LINE.search(str(error))
        where = f"{path}:{at[1]}" if at else path
        raise ConfigError([f"{where}: not valid TOML: {error}"]) from None
    values: dict[str, Any] = {}
    lines: dict[str, int | None] = {}
    problems: list[str] = []
    for key, raw in document.items():
        line = key_line(text, key)
        where = f"{path}:{line}" if line else path
        setting = FILE_SETTINGS.get(key)
        if setting is None:
            problems.append(f"{where}: {_unknown(key, raw)}")
            continue
        try:
            values[key] = _convert(setting, raw)
        except _Problem as problem:
            problems.append(f"{where}: {key}: {problem}")
        lines[key] = line
    if problems:
        raise ConfigError(problems)
    return ConfigFile(path, values, lines)


def key_line(text: str, key: str) -> int | None:
    """The line (from 1) of the file `text` that sets the top-level `key` (`key = `, a quoted key, a dotted
    key or a [key] table), or None. tomllib tells no lines; top-level keys come first in a TOML file."""
    name = "|".join((re.escape(key), f'"{re.escape(key)}"', f"'{re.escape(key)}'"))
    assignment = re.compile(rf"^\s*(?:{name})\s*[=.]")
    table = re.compile(rf"^\s*\[\[?\s*(?:{name})\s*[\].]")
    numbered = list(enumerate(text.splitlines(), start=1))
    for pattern in (assignment, table):
        for number, line in numbered:
            if pattern.match(line):
                return number
    return None


def _unknown(key: str, raw: object) -> str:
    if key == CONFIG_KEY:
        return f"{key}: a config file cannot name another one"
    if isinstance(raw, dict):
        return f"unknown table [{key}]: the settings are top-level keys (listen = ..., before any table)"
    close = difflib.get_close_matches(key, FILE_SETTINGS, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "the keys are serve's flags with - as _, e.g. http_listen"
    return f"unknown key {key!r} ({hint})"


def _convert(setting: Setting, raw: object) -> Any:
    """`raw`, a TOML value, as the flag would have it after parsing; _Problem when it does not fit."""
    if setting.switch:
        if not isinstance(raw, bool):
            raise _Problem(f"expected true or false, got {_kind(raw)}")
        return raw
    if setting.kind is Kind.LIST:
        if not isinstance(raw, list):
            raise _Problem(f"expected a list (the flag {setting.flag} is repeatable), got {_kind(raw)}")
        items: list[Any] = []
        for index, item in enumerate(raw, start=1):
            try:
                items.append(_scalar(setting, item))
            except _Problem as problem:
                raise _Problem(f"item {index}: {problem}") from None
        return items
    return _scalar(setting, raw)


def _scalar(setting: Setting, raw: object) -> Any:
    """One value of a flag: a string for a flag without a converter; a number when the converter makes one."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _Problem(f"expected {_expected(setting)}, got {_kind(raw)}")
    if not isinstance(raw, str) and (setting.convert is None or _expected(setting) == "a string"):
        raise _Problem(f"expected a string, got {_kind(raw)}")
    value = raw if setting.convert is None else _converted(setting, setting.convert, raw)
    if setting.choices is not None and value not in setting.choices:
        raise _Problem(f"expected one of {_choices(setting.choices)}, got {raw!r}")
    return value


def _converted(setting: Setting, convert: Converter, raw: str | int | float) -> Any:
    try:
        value = convert(raw if isinstance(raw, str) else number_text(raw))
    except argparse.ArgumentTypeError as error:
        raise _Problem(str(error)) from None
    except (TypeError, ValueError):  # argparse's "invalid VALUE": say what was expected
        raise _Problem(_invalid(setting, convert, raw)) from None
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if numeric and isinstance(raw, str):
        raise _Problem(f"expected a number, got a string (write {raw.strip()} without quotes)")
    if not numeric and not isinstance(raw, str):
        raise _Problem(f"expected a string, got {_kind(raw)}")
    return value


def _choices(choices: Sequence[str]) -> str:
    return ", ".join(repr(choice) for choice in choices)


def _invalid(setting: Setting, convert: Converter, raw: str | int | float) -> str:
    if setting.choices is not None:
        return f"expected one of {_choices(setting.choices)}, got {raw!r}"
    expected = "an integer" if convert is int else _expected(setting)
    if expected == "a string" and isinstance(raw, str):
        return f"invalid value {raw!r}"
    return f"expected {expected}, got {_kind(raw)}"


def _expected(setting: Setting) -> str:
    """What a setting's value is in TOML: a number when its converter makes one of its default."""
    if setting.convert is None:
        return "a string"
    try:
        probe = setting.convert(str(setting.default))
    except (argparse.ArgumentTypeError, TypeError, ValueError):
        return "a single value"
    return "a number" if isinstance(probe, int | float) and not isinstance(probe, bool) else "a string"


def _kind(raw: object) -> str:
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, int):
        return "an integer"
    if isinstance(raw, float):
        return "a float"
    if isinstance(raw, str):
        return "a string"
    if isinstance(raw, list):
        return "a list"
    if isinstance(raw, dict):
        return "a table"
    return "a date or time"


@dataclass
class Resolved:
    """The parsed command line with the layers under it, and where each setting's value came from."""

    args: argparse.Namespace
    file: ConfigFile | None
    sources: dict[str, str] = field(default_factory=dict)  # by key


def resolve(
    parser: argparse.ArgumentParser,
    command: argparse.ArgumentParser,
    argv: Sequence[str],
    environ: Mapping[str, str] = os.environ,
) -> Resolved:
    """`argv` parsed by `parser`, the settings of its subcommand `command` layered: the default, then the config
    file (--config, else A2A_GRPC_CONFIG), then the environment, then the flags. ConfigError for a bad file.

    `command`'s defaults already read the environment: the file's values become the defaults of the settings
    whose variable is not set, and the command line is parsed again on top of them."""
    flags = {action.dest: action for action in command._actions}
    given = _given(parser, [flags[key] for key in FILE_SETTINGS], argv)
    path = getattr(parser.parse_known_args(argv)[0], CONFIG_KEY, None)
    file = load(path) if path else None
    if file is not None:
        command.set_defaults(
            **{key: value for key, value in file.values.items() if FILE_SETTINGS[key].env not in environ}
        )
    args = parser.parse_known_args(argv)[0]
    sources: dict[str, str] = {}
    for key, setting in FILE_SETTINGS.items():
        if key in given:
            sources[key] = f"flag {setting.flag}"
            if setting.kind is Kind.LIST:  # the flags' list, not the lower layers' with the flags' appended
                setattr(args, key, given[key])
        elif setting.env in environ:
            sources[key] = f"environment {setting.env}"
        elif file is not None and key in file.values:
            sources[key] = f"config file {file.where(key)}"
        else:
            sources[key] = "default"
    return Resolved(args, file, sources)


def _given(parser: argparse.ArgumentParser, flags: Sequence[argparse.Action], argv: Sequence[str]) -> dict[str, Any]:
    """The settings `argv` gives as `flags`, and their values: `argv` parsed with every default unset."""
    with _defaults_unset(flags):
        parsed = parser.parse_known_args(argv)[0]
    given: dict[str, Any] = {}
    for flag in flags:
        value = getattr(parsed, flag.dest, _UNSET)
        if value is not _UNSET and not (_repeatable(flag) and value is None):
            given[flag.dest] = value
    return given


def _repeatable(flag: argparse.Action) -> bool:
    return isinstance(flag, argparse._AppendAction)


@contextmanager
def _defaults_unset(flags: Sequence[argparse.Action]) -> Iterator[None]:
    saved = [flag.default for flag in flags]
    try:
        for flag in flags:
            flag.default = None if _repeatable(flag) else _UNSET  # append needs a list or None
        yield
    finally:
        for flag, default in zip(flags, saved, strict=True):
            flag.default = default


def show(resolved: Resolved) -> str:
    """The effective settings as a TOML document in the config file's own keys, each line saying where its value
    came from; secrets redacted (a push signing key is shown as its path: no key file is read)."""
    config = resolved.file.path if resolved.file is not None else "none"
    lines = [
        "# the effective settings of `a2a-grpc serve` (default < config file < environment < flag), secrets redacted",
        f"# config file: {config}",
    ]
    for key, setting in FILE_SETTINGS.items():
        value = getattr(resolved.args, key, None)
        source = resolved.sources.get(key, "default")
        if value is None:
            lines.append(f"# {key}: not set ({source})")
        else:
            lines.append(f"{key} = {toml_value(redact(setting, value))}  # {source}")
    return "\n".join(lines) + "\n"


def served_card(args: argparse.Namespace) -> str:
    """The agent card `serve` would serve over HTTP with `args`, as TOML comment lines: the card file, or the card
    built from the agent; its gRPC interface the --listen address as given, no signatures yet. When serve would
    stop instead, the line it would stop with."""
    try:
        with importing_from(args.app_dir):
            server = built_server(server_settings(args))
    except SettingRefused as error:
        return f"# the agent card: none, serve would stop: {error}\n"
    settings = server.settings
    source = card_source(settings.card_path, server.agent)
    card = a2a_pb2.AgentCard()
    card.CopyFrom(server.card)  # the server's own card is advertised when its HTTP port is bound
    scheme = "http" if server.tls is None else "https"
    bindings = settings.bindings.split(",") if settings.http_listen else ()
    advertise_faces((card,), bindings, f"{scheme}://{settings.http_listen}")
    document = card_document(settings, card).body.decode()
    lines = [f"# the agent card served on {settings.http_listen or '(no HTTP port)'}: {source}", *document.splitlines()]
    return "\n".join(lines).replace("\n", "\n# ") + "\n"


def add_config_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """`a2a-grpc config check [FILE]` and `a2a-grpc config show [--config FILE] [serve's flags]`; the show parser."""
    config = commands.add_parser(
        "config",
        help="check a config file, or show the settings serve would run with",
        description="The config file of `a2a-grpc serve` is TOML, its top-level keys serve's flags with - as _ "
        "(listen, http_listen, store, ...). The environment and the flags override it.",
    )
    actions = config.add_subparsers(dest="config_command", required=True, metavar="{check,show}")
    check = actions.add_parser(
        "check",
        help="check a config file: 'ok', or each problem with its key and line (exit status 2)",
        description="Check a config file as `serve` would at start-up: print 'ok', or each problem, naming its key "
        "and line, and exit with status 2.",
    )
    check.add_argument(
        "file", nargs="?", default=os.environ.get(CONFIG_ENV) or None, metavar="FILE", help=f"default: ${CONFIG_ENV}"
    )
    show_parser = actions.add_parser(
        "show",
        help="print the settings serve would run with, as TOML, secrets redacted",
        description="Print the settings `a2a-grpc serve` would run with, given the same config file, environment "
        "and flags, as a TOML config file; each line says where its value came from. Tokens and passwords are "
        "redacted. Takes every flag serve takes.",
    )
    add_serve_arguments(show_parser)
    return show_parser


def check_references(config: ConfigFile, serve_parser: argparse.ArgumentParser) -> list[str]:
    """What `serve` would refuse to start on in a file that parsed: card files that do not load as agent
    cards, an agent that does not import (from the file's app_dir, as serve imports it)."""
    problems = []
    for key in ("card", "extended_card"):
        if key in config.values:
            try:
                load_card(config.values[key])
            except CardError as error:
                problems.append(f"{config.where(key)}: {key}: {error}")
    if "agent" in config.values:
        problems += _agent_problems(config, config.values.get("app_dir", serve_parser.get_default("app_dir")))
    return problems


def _agent_problems(config: ConfigFile, app_dir: str) -> list[str]:
    if not os.path.isdir(app_dir):
        return [f"{config.where('app_dir')}: app_dir: {app_dir} is not a directory"]
    sys.path.insert(0, os.path.abspath(app_dir))
    try:
        load_agent(config.values["agent"])
    except ValueError as error:
        return [f"{config.where('agent')}: agent: {error}"]
    finally:
        sys.path.remove(os.path.abspath(app_dir))
    return []


def check_as_serve(args: argparse.Namespace) -> None:
    """The checks serve makes before it starts (a2a_grpc.startup), on `args` resolved from the file as serve
    resolves its own: SettingRefused, with the line serve prints, for a setting serve would refuse."""
    check_processes(args)
    with importing_from(args.app_dir):
        built_server(server_settings(args))


def run_config_command(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    serve_parser: argparse.ArgumentParser,
    show_parser: argparse.ArgumentParser,
) -> int:
    """`a2a-grpc config check` or `config show`: their exit status."""
    try:
        if args.config_command == "check":
            if not args.file:
                print(f"a2a-grpc config check: error: name the FILE (or set {CONFIG_ENV})", file=sys.stderr)
                return EXIT_USAGE
            problems = check_references(load(args.file), serve_parser)
            if problems:
                raise ConfigError(problems)
            check_as_serve(resolve(parser, serve_parser, ["serve", "--config", args.file]).args)
            print("ok")
            return EXIT_OK
        resolved = resolve(parser, show_parser, argv)
    except ConfigError as error:
        for problem in error.problems:
            print(f"a2a-grpc: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except SettingRefused as error:  # the line serve prints
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(show(resolved) + served_card(resolved.args))
    return EXIT_OK
