"""Every setting is checked as it is read: a bad one stops `a2a-grpc serve` with one `a2a-grpc:` line that quotes
at most 80 characters of the value, exit status 2, never a traceback; so does a card or an agent that cannot
be loaded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from process import free_port, run_serve

from a2a_grpc.setting_types import SHOWN_CHARS

HUGE = "x" * 5_000_000


def flags(*args: str) -> Callable[[Path], list[str]]:
    return lambda _: list(args)


def config_file(line: str) -> Callable[[Path], list[str]]:
    def write(directory: Path) -> list[str]:
        path = directory / "a2a.toml"
        path.write_text(line + "\n")
        return ["--config", str(path)]

    return write


def deep_card(directory: Path) -> list[str]:
    path = directory / "card.json"
    path.write_text('{"name": "deep", "skills": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return ["--card", str(path)]


def broken_agent(directory: Path) -> list[str]:
    (directory / "broken_agent.py").write_text("class Agent:\n    def execute(self\n")
    return ["--agent", "broken_agent:Agent", "--app-dir", str(directory)]


def failing_agent(directory: Path) -> list[str]:
    (directory / "failing_agent.py").write_text("raise RuntimeError('no database configured')\n")
    return ["--agent", "failing_agent:Agent", "--app-dir", str(directory)]


def synchronous_agent(method: str) -> Callable[[Path], list[str]]:
    """An agent module whose `method` is a plain def, the other an async def (finding 10)."""

    def write(directory: Path) -> list[str]:
        sync, other = (method, "cancel") if method == "execute" else (method, "execute")
        source = f"class Agent:\n    def {sync}(self, context, events): ...\n"
        source += f"    async def {other}(self, context, events): ...\n"
        (directory / "sync_agent.py").write_text(source)
        return ["--agent", "sync_agent:Agent", "--app-dir", str(directory)]

    return write


BAD: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "log level": (flags("--log-level", "LOUD"), "--log-level"),
    "log level of 5 MB in the config file": (config_file(f'log_level = "{HUGE}"'), "log_level"),
    "a grace of nan": (flags("--grace", "nan"), "--grace"),
    "a grace of -1": (flags("--grace", "-1"), "--grace"),
    "a port past 65535": (flags("--listen", "127.0.0.1:999999"), "--listen"),
    "an http port past 65535": (flags("--http-listen", "127.0.0.1:70000"), "--http-listen"),
    "a listen address without a port": (flags("--listen", "127.0.0.1"), "--listen"),
    "a push allow that is no host or network": (flags("--push-allow", "notahost/99"), "--push-allow"),
    "a binding no A2A version defines": (flags("--bindings", "grpc,soap"), "--bindings"),
    "a NUL in the store": (config_file('store = "memory\\u0000x"'), "store"),
    "a NUL in the card path": (flags("--card", "card\x01.json"), "--card"),
    "a card nested 100,000 deep": (deep_card, "nests JSON deeper"),
    "an agent module with a syntax error": (broken_agent, "SyntaxError"),
    "an agent module that raises": (failing_agent, "RuntimeError: no database configured"),
    "an agent whose execute is a def": (synchronous_agent("execute"), "sync_agent:Agent: its execute is"),
    "an agent whose cancel is a def": (synchronous_agent("cancel"), "sync_agent:Agent: its cancel is"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_setting_stops_serve_with_one_line(bad: str, tmp_path: Path) -> None:
    make, named = BAD[bad]
    args = ["--listen", f"127.0.0.1:{free_port()}", "--http-listen", "", "--store", "memory", *make(tmp_path)]
    done = run_serve(args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("a2a-grpc:"), done.stderr[-2000:]
    assert named in lines[0]
    assert len(lines[0]) < 400
    assert "x" * (SHOWN_CHARS + 1) not in lines[0]
