"""`a2a-grpc` as a new user first meets it: an agent from their own folder, the help, a mistyped flag,
the lines the server logs as it stops, and a port already in use."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import StartServer, send_request
from process import SLEEPY_AGENT, V1, child_env, get_task, run_serve, send_text, serve_process, text_message

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server import load_agent

A2A_GRPC = str(Path(sys.executable).with_name("a2a-grpc"))  # the console script a user runs
COMMAND_SECONDS = 30.0
SHOUT_MODULE = """
class ShoutAgent:
    async def execute(self, context, events):
        await events.artifact(text=context.text().upper(), name="shout", last_chunk=True)
        await events.complete()

    async def cancel(self, context, events):
        await events.canceled()
"""


NO_CANCEL_MODULE = """
import asyncio

class WaitingAgent:
    async def execute(self, context, events):
        await events.working()
        await asyncio.sleep(60)
"""


def a2a_grpc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [A2A_GRPC, *args], env=child_env(), capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False
    )


def write_package(app_dir: Path) -> str:
    """A package of the user's own, `firsthour_shout`, in `app_dir`; its agent's MODULE:ATTR."""
    package = app_dir / "firsthour_shout"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text(SHOUT_MODULE)
    return "firsthour_shout.agent:ShoutAgent"


@pytest.mark.parametrize("where", ["cwd", "--app-dir", "A2A_GRPC_APP_DIR"])
def test_an_agent_in_the_users_own_folder_is_served_without_pythonpath(tmp_path: Path, where: str) -> None:
    app_dir = tmp_path / "app"
    agent = write_package(app_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["--agent", agent, *(["--app-dir", str(app_dir)] if where == "--app-dir" else [])]
    env = {"PYTHONPATH": "", **({"A2A_GRPC_APP_DIR": str(app_dir)} if where == "A2A_GRPC_APP_DIR" else {})}
    cwd = app_dir if where == "cwd" else elsewhere
    with serve_process(tmp_path / "logs", *args, env=env, cwd=cwd, command=(A2A_GRPC, "serve")) as server:
        task = send_text(server.grpc_target, "hello")
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "HELLO"


def agent_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "a2a_grpc.server" and r.levelno == logging.WARNING]


async def test_an_agent_without_cancel_is_served_after_a_one_line_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, start_server: StartServer
) -> None:
    (tmp_path / "firsthour_waiting.py").write_text(NO_CANCEL_MODULE)
    (tmp_path / "firsthour_shout.py").write_text(SHOUT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.server"):
        load_agent("firsthour_shout:ShoutAgent")
        assert agent_warnings(caplog) == [], "an agent with cancel loads quietly"
        agent = load_agent("firsthour_waiting:WaitingAgent")
    [warning] = agent_warnings(caplog)
    assert "firsthour_waiting:WaitingAgent has no cancel(context, events) method" in warning
    assert "\n" not in warning
    # what the warning says happens then, and nothing fails on the way
    caplog.clear()
    caplog.set_level(logging.ERROR, logger="a2a_grpc.tasks")
    server = await start_server(agent=agent)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        request = send_request("wait", configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True))
        task = (await stub.SendMessage(request, metadata=V1, timeout=COMMAND_SECONDS)).task
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1, timeout=COMMAND_SECONDS)
    assert canceled.status.state == a2a_pb2.TASK_STATE_CANCELED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def flag_help(help_text: str) -> dict[str, str]:
    """Each `--FLAG VALUE` entry of the sections after the usage: its help, whitespace collapsed."""
    options = help_text.split("\noptions:\n", 1)[1]
    entries = re.split(r"^  (?=--)|^(?=\S)", options, flags=re.MULTILINE)[1:]
    return {words[0]: " ".join(words[2:]) for words in (entry.split() for entry in entries) if words[0][:2] == "--"}


def test_serve_help_gives_every_flag_a_line_of_help_and_its_default() -> None:
    done = a2a_grpc("serve", "--help")
    assert done.returncode == 0, done.stderr
    entries = flag_help(done.stdout)
    assert {"--listen", "--agent", "--app-dir", "--log-level"} <= entries.keys()
    for flag, text in entries.items():
        assert "[A2A_GRPC_" in text and "(default: " in text, f"{flag}: {text!r}"
        assert text.split("[A2A_GRPC_")[0].strip(), f"{flag} has no help beyond its variable: {text!r}"
    assert "(default: 127.0.0.1:50051)" in entries["--listen"]
    assert "(default: INFO)" in entries["--log-level"]


def test_the_top_level_help_ends_with_examples() -> None:
    done = a2a_grpc("--help")
    assert done.returncode == 0, done.stderr
    examples = done.stdout.split("\nexamples:\n", 1)[1]
    commands = [line.split()[1] for line in examples.splitlines() if line.startswith("  a2a-grpc ")]
    assert commands == ["serve", "send", "card"]


@pytest.mark.parametrize(
    "command", [["serve"], ["send", "127.0.0.1:1", "hi"], ["card", "http://127.0.0.1:1"]], ids=lambda c: c[0]
)
def test_a_wrong_flag_is_told_with_the_commands_own_usage(command: list[str]) -> None:
    done = a2a_grpc(*command, "--no-such-flag")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"a2a-grpc: unrecognized arguments: --no-such-flag (`a2a-grpc {command[0]} --help` lists the options)"
    ]


def start_sleeping_task(target: str) -> str:
    """A task whose agent sleeps for two minutes, once it is WORKING; its id."""
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
    request = a2a_pb2.SendMessageRequest(message=text_message("sleep 120"), configuration=configuration)
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        task_id: str = stub.SendMessage(request, metadata=V1, timeout=COMMAND_SECONDS).task.id
    deadline = time.monotonic() + COMMAND_SECONDS
    while get_task(target, task_id).status.state != a2a_pb2.TASK_STATE_WORKING:
        assert time.monotonic() < deadline, "the agent did not start"
        time.sleep(0.02)
    return task_id


def test_the_server_logs_when_it_starts_draining_and_when_it_stopped(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--agent", SLEEPY_AGENT, "--grace", "1") as server:
        start_sleeping_task(server.grpc_target)
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    lines = server.stderr.splitlines()
    draining = [i for i, line in enumerate(lines) if "INFO a2a_grpc.server: draining:" in line]
    stopped = [i for i, line in enumerate(lines) if "INFO a2a_grpc.server: stopped:" in line]
    assert len(draining) == 1 and len(stopped) == 1 and draining[0] < stopped[0], server.stderr
    assert "calls in flight get 1s" in lines[draining[0]]
    assert lines[stopped[0]].endswith("stopped: 1 task(s) still running were failed")


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_in_use_gets_our_one_line_and_nothing_from_grpc(tmp_path: Path, taken_port: int) -> None:
    taken = f"127.0.0.1:{taken_port}"
    grpc_taken = run_serve(["--listen", taken, "--http-listen", "", "--store", "memory"], cwd=tmp_path)
    http_taken = run_serve(["--listen", "127.0.0.1:0", "--http-listen", taken, "--store", "memory"], cwd=tmp_path)
    assert grpc_taken.returncode == 1
    assert grpc_taken.stderr.splitlines() == [
        f"a2a-grpc: cannot listen on {taken}: address already in use (another process holds it: choose another "
        "port with --listen HOST:PORT)"
    ]
    assert http_taken.returncode == 1
    assert http_taken.stderr.splitlines() == [
        f"a2a-grpc: cannot serve the agent card on {taken}: address already in use (another process holds it: "
        "choose another port with --http-listen HOST:PORT)"
    ]


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_a_byte_limit_that_is_not_a_positive_number_is_a_usage_error(value: str) -> None:
    env = {**os.environ, "A2A_GRPC_MAX_LIST_PAGE_BYTES": value}
    done = subprocess.run(
        [A2A_GRPC, "serve", "--listen", "127.0.0.1:0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"a2a-grpc: argument --max-list-page-bytes: must be a positive number of bytes, got {value!r} "
        "(`a2a-grpc serve --help` lists the options)"
    ]
