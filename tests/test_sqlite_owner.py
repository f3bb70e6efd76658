"""One owner per SQLite file: a second server on the file of a running one is refused at start, in one line
naming the file and the process that holds it (exit status 2), before it touches a task; the first keeps
serving its tasks. The lock goes with its holder: a closed store, a stopped server, a SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from process import (
    SERVING,
    SLEEPY_AGENT,
    START_SECONDS,
    V1,
    Ports,
    ServerProcess,
    child_env,
    health_status,
    launch,
    send_text,
    serve_process,
    text_message,
)
from test_serve_process import SCRIPT_SECONDS, fake_checkout, pyproject_digest, wait_for_working_task

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import SqliteStore, StoreError, StoreInUseError, TaskWrite


def exit_code_unless_serving(server: ServerProcess) -> int | None:
    """The server's exit status once it exits, or None once it is SERVING (within START_SECONDS)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            return code
        try:
            if health_status(server.grpc_target, timeout=0.5) == SERVING:
                return None
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"server neither exited nor served within {START_SECONDS}s; stderr:\n{server.stderr}")


def refusal(database: Path, holder: int) -> str:
    """The one line of a server refused the SQLite file `database`, which process `holder` has open."""
    return (
        f"a2a-grpc: the task store {os.path.realpath(database)} is in use by process {holder}: one server at a time "
        "may use a SQLite file (stop that one, or give this one another store)"
    )


def start_on(log_dir: Path, store: str) -> ServerProcess:
    ports = Ports.free()
    return launch(log_dir, [*ports.flags(), "--store", store], ports=ports)


async def test_second_server_on_one_sqlite_file_is_refused_and_first_keeps_its_tasks(tmp_path: Path) -> None:
    database = tmp_path / "tasks.db"
    store = f"sqlite:///{database}"
    go_on = tmp_path / "go-on"  # the agent holds its task WORKING until this file exists
    with serve_process(tmp_path / "first", "--agent", SLEEPY_AGENT, store=store) as first:
        async with grpc.aio.insecure_channel(first.grpc_target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            request = a2a_pb2.SendMessageRequest(message=text_message(f"wait {go_on}"))
            in_flight = asyncio.ensure_future(stub.SendMessage(request, metadata=V1, timeout=60))
            task_id = await wait_for_working_task(stub)

            second = start_on(tmp_path / "second", store)
            try:
                code = await asyncio.to_thread(exit_code_unless_serving, second)
            finally:
                second.kill()
            go_on.touch()
            answered = await asyncio.wait_for(in_flight, 30)
            stored = await stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1, timeout=10)
        first_log = first.stderr

    assert code == 2, f"the second server was not refused; stderr:\n{second.stderr}"
    assert second.stderr.splitlines() == [refusal(database, first.process.pid)]
    assert answered.task.status.state == stored.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [part.text for part in stored.artifacts[0].parts] == [f"wait {go_on}"]
    assert "left running" not in first_log and "could not persist" not in first_log, first_log


def test_a_second_scripts_serve_in_one_folder_says_in_one_line_that_the_store_is_taken(tmp_path: Path) -> None:
    serve = str(fake_checkout(tmp_path, stamp=pyproject_digest()) / "scripts" / "serve")
    folder = tmp_path / "folder"
    folder.mkdir()
    ports = Ports.free()  # both on the same ports, as two scripts/serve on the defaults are
    with serve_process(tmp_path / "logs", ports=ports, store=None, cwd=folder, command=[serve]) as first:
        second = subprocess.run(
            [serve, *ports.flags()],
            cwd=folder,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=SCRIPT_SECONDS,
            check=False,
        )
        assert health_status(first.grpc_target) == SERVING
    database = folder / ".a2a-grpc" / "tasks.db"
    assert (second.returncode, second.stderr.splitlines()) == (2, [refusal(database, first.process.pid)]), (
        "the store, not the port taken"
    )


def test_a_sqlite_file_is_free_again_once_its_server_is_killed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(tmp_path / "killed", store=store) as killed:
        killed.process.kill()  # SIGKILL: nothing of the server runs to unlock the file
        assert killed.wait() == -signal.SIGKILL
    with serve_process(tmp_path / "next", store=store) as after:
        assert send_text(after.grpc_target, "on the same file").status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_an_embedders_server_on_an_open_sqlite_file_is_refused_before_it_touches_a_task_until_it_is_closed(
    tmp_path: Path,
) -> None:
    database = tmp_path / "tasks.db"
    held = SqliteStore(database)
    await held.open()
    running = a2a_pb2.Task(id="running", context_id="c", status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_WORKING))
    await held.apply(TaskWrite("running", 1, task=running))
    (tmp_path / "link.db").symlink_to(database)
    real = await asyncio.to_thread(os.path.realpath, database)
    for named in (f"sqlite:///{database}", f"sqlite:///{tmp_path / 'link.db'}"):
        server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", store_url=named))
        with pytest.raises(StoreInUseError) as refused:
            await server.start()
        assert (refused.value.path, refused.value.holder) == (real, os.getpid())
    stored = await held.get_task("running", "")
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_WORKING, "not failed as left running"
    await held.close()

    reopened = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", store_url=f"sqlite:///{database}"))
    await reopened.start()
    await reopened.stop(0)
    after_stop = SqliteStore(database)  # the stopped server's store let the file go
    await after_stop.open()
    await after_stop.close()


async def test_sqlite_store_on_memory_is_refused_without_a_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="needs a file"):
        await SqliteStore(":memory:").open()
    assert await asyncio.to_thread(os.listdir, tmp_path) == []
