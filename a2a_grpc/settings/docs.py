"""The settings table of docs/configuration.md, made from a2a_grpc.settings: one Markdown table per section,
between BEGIN and END. `python -m a2a_grpc.settings.docs docs/configuration.md` writes it there again."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from a2a_grpc.settings import SECTIONS, Kind, Setting

BEGIN = "<!-- the settings table: made from a2a_grpc.settings by `python -m a2a_grpc.settings.docs FILE` -->"
END = "<!-- end of the settings table -->"
HEADER = ("| flag | environment | default | meaning |", "|---|---|---|---|")


def settings_tables() -> str:
    """The tables, one per section under its name in bold, with BEGIN and END around them."""
    lines = [BEGIN]
    for section, settings in SECTIONS.items():
        lines += ["", f"**{section}**", "", *HEADER, *(_row(setting) for setting in settings)]
    return "\n".join([*lines, "", END])


def _row(setting: Setting) -> str:
    flag = f"`{setting.flag}`"
    if setting.kind is Kind.ON_OFF:
        flag += f" / `--no-{setting.flag.removeprefix('--')}`"
    meaning = " ".join(part for part in (setting.doc, setting.environment_words()) if part)
    return f"| {flag} | `{setting.env}` | {_default(setting)} | {meaning} |"


def _default(setting: Setting) -> str:
    text = setting.default_text()
    if text is None:
        return setting.unset
    if setting.switch:
        return text
    return f"`{text}`" + (f" ({setting.default_note})" if setting.default_note else "")


def written_tables(document: str) -> str:
    """The settings tables as `document` has them, BEGIN and END included ('' when it has none)."""
    start, end = document.find(BEGIN), document.find(END)
    return document[start : end + len(END)] if 0 <= start < end else ""


def main(argv: Sequence[str]) -> int:
    [path] = argv
    document = Path(path).read_text()
    written = written_tables(document)
    if not written:
        print(f"{path} has no settings table ({BEGIN})", file=sys.stderr)
        return 1
    Path(path).write_text(document.replace(written, settings_tables()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
