"""Configuring `a2a-grpc serve`: flags and A2A_GRPC_* variables, the defaults, and the refusals of a bad
card, a bad agent or a bad address (a clear one-line message naming the problem, no traceback)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from process import (
    CARD,
    SERVING,
    Ports,
    free_port,
    get_task,
    health_status,
    http_get,
    run_serve,
    send_text,
    serve_process,
)

from a2a_grpc.cli import add_serve_parser
from a2a_grpc.generated import a2a_pb2

WRITER = "a2a_grpc.agents.writer:WriterAgent"


def write_json(path: Path, document: Any) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def assert_refused(done: Any, *fragments: str) -> None:
    """Exit non-zero, no traceback, and last one `a2a-grpc: ...` message with every fragment.

    (gRPC core may log a line of its own before it.)"""
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("a2a-grpc: ") == 1, done.stderr
    message = done.stderr[done.stderr.index("a2a-grpc: ") :]
    for fragment in fragments:
        assert fragment in message, (fragment, done.stderr)


BAD_CARDS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "not-json": ("{'name': 'single quotes'}", ("is not JSON", "line 1")),
    "unknown-field": ({**CARD, "bogusField": 1}, ('no field named "bogusField"',)),
    "unknown-nested-field": (
        {**CARD, "capabilities": {"streamingg": True}},
        ('no field named "streamingg"', "AgentCard.capabilities"),
    ),
    "missing-name": ({key: value for key, value in CARD.items() if key != "name"}, ("name is required",)),
    "empty-skills": ({**CARD, "skills": []}, ("skills is required",)),
    "wrong-type": ({**CARD, "version": {"major": 1}}, ("version",)),
    "interface-without-version": (
        {**CARD, "supportedInterfaces": [{"url": "h:1", "protocolBinding": "GRPC"}]},
        ("supportedInterfaces[0].protocolVersion is required",),
    ),
}


@pytest.mark.parametrize("case", list(BAD_CARDS))
def test_a_bad_card_is_refused_naming_the_problem(tmp_path: Path, case: str) -> None:
    document, fragments = BAD_CARDS[case]
    card = write_json(tmp_path / "card.json", document)
    done = run_serve([*Ports.free().flags(), "--store", "memory", "--card", card], cwd=tmp_path)
    assert_refused(done, card, *fragments)


def test_a_missing_card_file_is_refused(tmp_path: Path) -> None:
    done = run_serve([*Ports.free().flags(), "--store", "memory", "--card", "nope.json"], cwd=tmp_path)
    assert_refused(done, "cannot read agent card nope.json", "No such file")


def test_a_bad_card_from_the_environment_is_refused_too(tmp_path: Path) -> None:
    card = write_json(tmp_path / "card.json", {**CARD, "bogusField": 1})
    done = run_serve([], cwd=tmp_path, env={**Ports.free().env(), "A2A_GRPC_STORE": "memory", "A2A_GRPC_CARD": card})
    assert_refused(done, card, "bogusField")


def test_a_bad_extended_card_is_refused(tmp_path: Path) -> None:
    extended = write_json(tmp_path / "extended.json", "not json")
    done = run_serve([*Ports.free().flags(), "--store", "memory", "--extended-card", extended], cwd=tmp_path)
    assert_refused(done, extended, "is not JSON")


@pytest.mark.parametrize(
    ("agent", "fragments"),
    [
        ("nosuch:Thing", ("cannot load agent nosuch:Thing", "No module named 'nosuch'")),
        ("a2a_grpc.agents.writer:Nope", ("cannot load agent a2a_grpc.agents.writer:Nope", "'Nope'")),
        ("a2a_grpc.agents.writer:CHUNKS", ("a2a_grpc.agents.writer:CHUNKS is not an agent",)),
        ("a2a_grpc.agents.writer", ("--agent takes MODULE:ATTR",)),
    ],
)
def test_a_bad_agent_is_refused_naming_it(tmp_path: Path, agent: str, fragments: tuple[str, ...]) -> None:
    done = run_serve([*Ports.free().flags(), "--store", "memory", "--agent", agent], cwd=tmp_path)
    assert_refused(done, *fragments)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--store", "mysql://bob:s3cret@db/a2a"], ("unsupported store URL scheme 'mysql'", "sqlite:///")),
        (["--store", "postgresql://postgres@127.0.0.1:1/a2a"], ("cannot open the task store",)),
        (["--store", "postgresql://app:se/cr3tPW@127.0.0.1:1/a2a"], ("not a valid PostgreSQL URL",)),
        (["--http-listen", "no-port"], ("HOST:PORT", "'no-port'")),
        (["--auth-token", "no-principal"], ("TOKEN=PRINCIPAL",)),
    ],
    ids=["store", "unreachable-postgres", "postgres-url-with-a-slash-in-the-password", "http-listen", "auth-token"],
)
def test_other_bad_settings_are_refused(tmp_path: Path, args: list[str], fragments: tuple[str, ...]) -> None:
    done = run_serve(["--listen", f"127.0.0.1:{free_port()}", "--store", "memory", *args], cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "s3cret" not in done.stderr and "cr3tPW" not in done.stderr  # passwords in store URLs
    for fragment in fragments:
        assert fragment in done.stderr, (fragment, done.stderr)


def unopenable_store(tmp_path: Path, case: str) -> Path:
    """A store path SQLite cannot open, even for root."""
    if case == "not-a-database":
        (tmp_path / "tasks.db").write_text("plain text, not an SQLite database " * 100)
        return tmp_path / "tasks.db"
    if case == "a-directory":
        (tmp_path / "tasks.db").mkdir()
        return tmp_path / "tasks.db"
    if case == "under-a-regular-file":
        (tmp_path / "file").write_text("a file, not a directory")
        return tmp_path / "file" / "tasks.db"
    return Path("/proc/a2a-grpc-tasks.db")  # read-only for root too


@pytest.mark.parametrize("case", ["not-a-database", "a-directory", "under-a-regular-file", "read-only-location"])
def test_a_store_that_cannot_be_opened_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    path = unopenable_store(tmp_path, case)
    done = run_serve([*Ports.free().flags(), "--store", f"sqlite:///{path}"], cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"a2a-grpc: cannot open the task store {path}: "), line


@pytest.mark.parametrize("busy", ["grpc", "http"])
def test_a_busy_port_is_refused_and_the_process_exits(tmp_path: Path, busy: str) -> None:
    with serve_process(tmp_path / "first") as first:
        taken = first.ports
        ports = Ports(taken.grpc, free_port()) if busy == "grpc" else Ports(free_port(), taken.http)
        done = run_serve([*ports.flags(), "--store", "memory"], cwd=tmp_path)
        assert_refused(done, f"127.0.0.1:{taken.grpc if busy == 'grpc' else taken.http}")
        assert health_status(first.grpc_target) == SERVING, "the first server is unharmed"


def test_the_writer_agent_loads_by_module_and_attribute(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--agent", WRITER) as server:
        task = send_text(server.grpc_target, "the sea")
    assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, "the writer asks for a tone; echo would complete"
    assert "the sea" in task.status.message.parts[0].text


def test_every_setting_can_come_from_the_environment(tmp_path: Path) -> None:
    ports = Ports.free()
    store = tmp_path / "env-store" / "tasks.db"
    env = {
        **ports.env(),
        "A2A_GRPC_STORE": f"sqlite:///{store}",
        "A2A_GRPC_CARD": write_json(tmp_path / "card.json", CARD),
        "A2A_GRPC_AGENT": WRITER,
        "A2A_GRPC_MISSING_VERSION_MEANS": "1.0",
        "A2A_GRPC_AUTH_TOKENS": "s3cret=alice",
        "A2A_GRPC_GRACE": "1",
        "A2A_GRPC_LOG_LEVEL": "WARNING",
    }
    with serve_process(tmp_path, ports=ports, ports_via="none", store=None, env=env) as server:
        card = http_get(server.card_url).json()
        with pytest.raises(grpc.RpcError) as refused:
            send_text(server.grpc_target, "no token", metadata=())
        task = send_text(server.grpc_target, "the sea", metadata=(("authorization", "Bearer s3cret"),))
    assert card["name"] == CARD["name"]
    assert card["supportedInterfaces"][0]["url"] == ports.grpc_target
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, "writer agent, and no version header needed"
    assert store.exists()
    assert "serving A2A" not in server.stderr, "log level WARNING hides the INFO line"


def test_flags_win_over_the_environment(tmp_path: Path) -> None:
    env_ports, flag_ports = Ports.free(), Ports.free()
    with serve_process(tmp_path, ports=flag_ports, env={**env_ports.env(), "A2A_GRPC_AGENT": WRITER}) as server:
        task = send_text(server.grpc_target, "hello")
        with pytest.raises(grpc.RpcError):
            health_status(env_ports.grpc_target)
    assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, "A2A_GRPC_AGENT still applies"


def test_the_default_store_is_sqlite_under_the_working_directory(tmp_path: Path) -> None:
    with serve_process(tmp_path / "logs", ports_via="env", store=None, cwd=tmp_path) as server:
        task = send_text(server.grpc_target, "kept")
        assert (tmp_path / ".a2a-grpc" / "tasks.db").is_file()
    with serve_process(tmp_path / "logs-again", ports_via="env", store=None, cwd=tmp_path) as again:
        fetched = get_task(again.grpc_target, task.id)
    assert fetched.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert fetched.artifacts[0].parts[0].text == "kept"


def test_the_documented_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LISTEN", "HTTP_LISTEN", "CARD", "STORE", "AGENT", "GRACE", "MISSING_VERSION_MEANS", "AUTH_TOKENS"):
        monkeypatch.delenv(f"A2A_GRPC_{name}", raising=False)
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve"])
    assert (args.listen, args.http_listen) == ("127.0.0.1:50051", "127.0.0.1:8080")
    assert args.store == "sqlite:///.a2a-grpc/tasks.db"
    assert (args.card, args.agent) == (None, None), "the demo card and the echo agent"
    assert args.missing_version_means == "0.3"
