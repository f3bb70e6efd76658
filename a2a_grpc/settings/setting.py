"""One setting of `a2a-grpc serve`, as a2a_grpc.settings declares it. Its key names it everywhere: the
config file's key is the key, the flag is `--` and the key with `_` as `-`, the environment variable
A2A_GRPC_ and the key in capitals (unless the row names another)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from a2a_grpc.setting_types import plain_text

Converter = Callable[[str], Any]
ENV_PREFIX = "A2A_GRPC_"
FLAG_ON_WORDS = ("1", "true", "yes")  # what turns a --flag on in its environment variable
ON_WORDS = (*FLAG_ON_WORDS, "on")  # ... an --x/--no-x setting that is off by default
OFF_WORDS = ("0", "false", "no", "off")  # ... and off, one that is on by default


class Kind(Enum):
    VALUE = "value"  # --flag VALUE
    LIST = "list"  # --flag VALUE, repeatable; the environment variable gives one item
    FLAG = "flag"  # --flag: on when given
    ON_OFF = "on/off"  # --flag or --no-flag


@dataclass(frozen=True)
class Setting:
    """`field` names the ServerSettings field the value goes to as it is (that field's default is the same
    constant of a2a_grpc.settings.defaults); `default_value` is the default (None: unset, its meaning in `unset`)."""

    key: str
    help: str  # for `serve --help`
    doc: str  # Markdown, for the table in docs/configuration.md
    field: str = ""
    default_value: Any = None
    convert: Converter | None = plain_text
    kind: Kind = Kind.VALUE
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    unset: str = "none"  # what no value means
    default_note: str = ""  # the default in words, beside it in the docs ("3 MiB")
    env_name: str = ""
    secret: bool = False  # TOKEN=PRINCIPAL items: `config show` hides each token
    in_file: bool = True  # a key of the config file

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def env(self) -> str:
        return self.env_name or ENV_PREFIX + self.key.upper()

    @property
    def default(self) -> Any:
        return self.default_value

    @property
    def switch(self) -> bool:
        return self.kind in (Kind.FLAG, Kind.ON_OFF)

    def default_text(self) -> str | None:
        """The default as a flag's value is written, None when there is none."""
        value = self.default
        if value is None or self.kind is Kind.LIST:
            return None
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    def from_environment(self, environ: Mapping[str, str]) -> Any:
        """The flag's default given `environ`: its variable's text (converted as the flag's value is, by
        argparse) when set, else the default."""
        text = environ.get(self.env)
        if self.kind is Kind.LIST:
            return [text] if text else []
        if self.kind is Kind.FLAG:
            return text in FLAG_ON_WORDS
        if self.kind is Kind.ON_OFF:
            return (text not in OFF_WORDS) if self.default else (text in ON_WORDS)
        return text if text is not None else self.default_text()

    def environment_words(self) -> str:
        """For a switch: what its environment variable takes, as the docs say it."""
        if self.kind is Kind.FLAG:
            return f"({_either(FLAG_ON_WORDS)} in the environment)"
        if self.kind is Kind.ON_OFF:
            words, turns = (OFF_WORDS, "off") if self.default else (ON_WORDS, "on")
            return f"({_either(words)} in the environment turns it {turns})"
        return ""


def _either(words: tuple[str, ...]) -> str:
    quoted = [f"`{word}`" for word in words]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]
