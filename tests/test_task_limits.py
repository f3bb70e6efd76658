"""What one task may hold: the newest `--max-history-per-task` messages of its history (older ones dropped, in
every store and across restarts), and `--max-artifact-bytes-per-task` bytes of artifacts (a publish past them
raises TaskLimitError to the agent, which fails the task with a message saying so unless the agent handles it)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import grpc
import pytest
from agents import OutcomeAgent
from conftest import BASE_CARD, V1, StartServer, user_message
from rpc_helpers import make_stub

from a2a_grpc.agent import EventPublisher, RequestContext, TaskLimitError
from a2a_grpc.cli import main
from a2a_grpc.client import A2AClient
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings

TaskState = a2a_pb2.TaskState
CHUNK_TEXT = "x" * 1000


def history_texts(task: a2a_pb2.Task) -> list[str]:
    return [message.parts[0].text for message in task.history]


async def converse(server: A2AServer, turns: int) -> str:
    """A task taken through `turns` input-required turns ("input 1", "input 2", ...); its id."""
    async with A2AClient(server.grpc_target) as client:
        task = (await client.send_message("input 1")).value.task
        for turn in range(2, turns + 1):
            message = user_message(f"input {turn}", task_id=task.id)
            task = (await client.send_message(message)).value.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        return task.id


async def stored_task(server: A2AServer, task_id: str) -> a2a_pb2.Task:
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        task: a2a_pb2.Task = await make_stub(channel).GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1)
        return task


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_task_keeps_only_its_newest_messages(start_server: StartServer, tmp_path: Path, store: str) -> None:
    store_url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"
    server = await start_server(agent=OutcomeAgent(), store_url=store_url, max_history_per_task=4)
    task_id = await converse(server, turns=3)
    newest = ["input 2", "outcome input", "input 3", "outcome input"]
    assert history_texts(await stored_task(server, task_id)) == newest


async def test_the_kept_history_is_what_a_restarted_server_reads(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(
        listen="127.0.0.1:0",
        http_listen="",
        card_path=str(card),
        store_url=f"sqlite:///{tmp_path / 'tasks.db'}",
        max_history_per_task=3,
    )
    first = A2AServer(settings, agent=OutcomeAgent())
    await first.start()
    try:
        task_id = await converse(first, turns=4)
    finally:
        await first.stop(0)
    second = A2AServer(settings, agent=OutcomeAgent())
    await second.start()
    try:
        assert history_texts(await stored_task(second, task_id)) == ["outcome input", "input 4", "outcome input"]
    finally:
        await second.stop(0)


class ChunkingAgent:
    """Publishes `chunks` chunks of 1,000 characters into one artifact, then completes; with `handle`, a
    TaskLimitError completes the task early instead of failing it."""

    def __init__(self, chunks: int, *, handle: bool = False, replace: bool = False) -> None:
        self.chunks = chunks
        self.handle = handle
        self.replace = replace
        self.published = 0

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        try:
            for index in range(self.chunks):
                await events.artifact(text=CHUNK_TEXT, artifact_id="out", append=index > 0 and not self.replace)
                self.published += 1
        except TaskLimitError:
            if not self.handle:
                raise
            await events.complete(f"stopped after {self.published} chunks")
            return
        await events.complete("all chunks")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_a_publish_past_the_artifact_bytes_fails_the_task_saying_why(start_server: StartServer) -> None:
    agent = ChunkingAgent(chunks=5)
    server = await start_server(agent=agent, max_artifact_bytes_per_task=2_500)
    async with A2AClient(server.grpc_target) as client:
        task = (await client.send_message("go")).value.task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "at most 2500 artifact bytes" in task.status.message.parts[0].text
    assert agent.published == 2
    assert [len(part.text) for part in task.artifacts[0].parts] == [1000, 1000]
    assert (await stored_task(server, task.id)).status.state == TaskState.TASK_STATE_FAILED


async def test_an_agent_that_handles_the_artifact_limit_ends_its_task_its_own_way(start_server: StartServer) -> None:
    server = await start_server(agent=ChunkingAgent(chunks=5, handle=True), max_artifact_bytes_per_task=2_500)
    async with A2AClient(server.grpc_target) as client:
        task = (await client.send_message("go")).value.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "stopped after 2 chunks"


async def test_a_replaced_artifact_counts_at_its_new_size(start_server: StartServer) -> None:
    server = await start_server(agent=ChunkingAgent(chunks=10, replace=True), max_artifact_bytes_per_task=2_500)
    async with A2AClient(server.grpc_target) as client:
        task = (await client.send_message("go")).value.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [len(part.text) for part in task.artifacts[0].parts] == [1000]


async def test_the_default_limits_let_an_ordinary_task_through(start_server: StartServer) -> None:
    server = await start_server(agent=ChunkingAgent(chunks=5))
    async with A2AClient(server.grpc_target) as client:
        task = (await client.send_message("go")).value.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [len(part.text) for part in task.artifacts[0].parts] == [1000] * 5


def test_the_limits_are_settings_with_defaults_a_config_file_and_flags_can_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["config", "show", "--max-history-per-task", "50", "--max-artifact-bytes-per-task", "1048576"]) == 0
    settings = tomllib.loads(capsys.readouterr().out)
    assert (settings["max_history_per_task"], settings["max_artifact_bytes_per_task"]) == (50, 1024 * 1024)
    assert main(["config", "show"]) == 0
    defaults = tomllib.loads(capsys.readouterr().out)
    assert (defaults["max_history_per_task"], defaults["max_artifact_bytes_per_task"]) == (1000, 64 * 1024 * 1024)
