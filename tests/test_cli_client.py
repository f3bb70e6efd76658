"""`a2a-grpc send` and `a2a-grpc card` run as subprocesses against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import BASE_CARD, StartServer
from process import direct_env

from a2a_grpc.agents.relay import RelayAgent
from a2a_grpc.card import card_json
from a2a_grpc.ext import timestamp
from a2a_grpc.server import A2AServer

REQUIRED = "https://example.com/ext/required/v1"
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extensions": [{"uri": REQUIRED, "required": True}]},
}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def documents(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]

    @property
    def line(self) -> str:
        """The one line the command printed on stderr."""
        lines = self.stderr.splitlines()
        assert len(lines) == 1, self.stderr
        return lines[0]


async def a2a_grpc(*args: str | Path) -> Run:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli",
        *map(str, args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=direct_env(),
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Run(process.returncode, stdout.decode(), stderr.decode())


@pytest.fixture
async def cli_server(start_server: StartServer) -> A2AServer:
    return await start_server(card=CARD, agent=RelayAgent())


async def test_send_prints_the_response_and_the_activated_extensions(cli_server: A2AServer) -> None:
    run = await a2a_grpc("send", cli_server.grpc_target, "hello there", "--extension", REQUIRED, "-e", timestamp.URI)
    assert run.code == 0, run.stderr
    [response] = run.documents
    assert response["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert response["task"]["artifacts"][0]["parts"] == [{"text": "2 words"}]
    assert timestamp.METADATA_KEY in response["task"]["artifacts"][0]["metadata"]
    assert run.stderr.splitlines() == [f"a2a-extensions: {REQUIRED},{timestamp.URI}"]


async def test_send_stream_prints_one_document_per_event(cli_server: A2AServer) -> None:
    run = await a2a_grpc("send", cli_server.grpc_target, "streamed", "--stream", "-e", REQUIRED)
    assert run.code == 0, run.stderr
    events = run.documents
    assert [next(iter(event)) for event in events] == ["task", "artifactUpdate", "statusUpdate"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert run.stderr.splitlines() == [f"a2a-extensions: {REQUIRED}"]


async def test_send_without_activated_extensions_prints_no_header_line(start_server: StartServer) -> None:
    server = await start_server(card=BASE_CARD, agent=RelayAgent())
    for stream in ((), ("--stream",)):
        run = await a2a_grpc("send", server.grpc_target, "no extension", *stream)
        assert run.code == 0, run.stderr
        assert run.documents, "the response is printed"
        assert run.stderr == "", "no empty a2a-extensions line"


async def test_send_puts_metadata_in_the_request(cli_server: A2AServer) -> None:
    run = await a2a_grpc(
        "send",
        cli_server.grpc_target,
        "hi",
        "-e",
        REQUIRED,
        "-e",
        timestamp.URI,
        "--metadata",
        f"{timestamp.METADATA_KEY}=yesterday",
    )
    assert run.code == 1
    assert "INVALID_ARGUMENT INVALID_PARAMS" in run.stderr
    assert f"metadata['{timestamp.METADATA_KEY}']" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


async def test_send_reports_a_typed_error_without_a_traceback(cli_server: A2AServer) -> None:
    run = await a2a_grpc("send", cli_server.grpc_target, "hi")
    assert run.code == 1
    first, *details = run.stderr.splitlines()
    assert first.startswith("a2a-grpc: FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED: ")
    assert details == [f"  missingExtensions: {REQUIRED}"]
    assert "Traceback" not in run.stderr and run.stdout == ""


async def test_send_through_the_card_url(cli_server: A2AServer) -> None:
    run = await a2a_grpc("send", f"http://127.0.0.1:{cli_server.http_port}", "via card", "-e", REQUIRED)
    assert run.code == 0, run.stderr
    assert run.documents[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_bad_metadata_argument_is_a_usage_error(cli_server: A2AServer) -> None:
    run = await a2a_grpc("send", cli_server.grpc_target, "hi", "--metadata", "no-equals-sign")
    assert run.code == 2 and "KEY=VALUE" in run.stderr and "Traceback" not in run.stderr


async def test_card_prints_the_served_card(cli_server: A2AServer) -> None:
    expected = json.loads(card_json(cli_server.card))
    by_url = await a2a_grpc("card", f"http://127.0.0.1:{cli_server.http_port}")
    assert by_url.code == 0, by_url.stderr
    assert json.loads(by_url.stdout) == expected
    card_url = f"http://127.0.0.1:{cli_server.http_port}/.well-known/agent-card.json"
    by_address = await a2a_grpc("card", cli_server.grpc_target, "--card-url", card_url)
    assert by_address.code == 0 and json.loads(by_address.stdout) == expected


async def test_card_for_a_grpc_address_alone_explains_where_the_card_is(cli_server: A2AServer) -> None:
    run = await a2a_grpc("card", cli_server.grpc_target)
    assert run.code == 2
    assert "/.well-known/agent-card.json" in run.stderr and "--card-url" in run.stderr
    assert "Traceback" not in run.stderr


async def test_an_unreachable_agent_is_a_clean_error() -> None:
    run = await a2a_grpc("send", "127.0.0.1:1", "hi", "--timeout", "5")
    assert run.code == 1
    assert run.stderr.startswith("a2a-grpc: UNAVAILABLE") and "Traceback" not in run.stderr
    card = await a2a_grpc("card", "http://127.0.0.1:1")
    assert card.code == 1 and card.stderr.startswith("a2a-grpc: cannot fetch") and "Traceback" not in card.stderr


async def test_card_extended_requests_the_extensions_the_agent_requires(
    start_server: StartServer, tmp_path: Path
) -> None:
    capabilities = {**CARD["capabilities"], "extendedAgentCard": True}
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps({**CARD, "name": "extended test agent", "capabilities": capabilities}))
    server = await start_server(
        card={**CARD, "capabilities": capabilities}, extended_card_path=str(extended), bearer_tokens={"s3": "alice"}
    )
    auth = "authorization: Bearer s3"
    refused = await a2a_grpc("card", server.grpc_target, "--extended", "-H", auth)
    run = await a2a_grpc("card", server.grpc_target, "--extended", "--extension", REQUIRED, "-H", auth)
    assert refused.code == 1 and "EXTENSION_SUPPORT_REQUIRED" in refused.stderr
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["name"] == "extended test agent"
    assert run.stderr.splitlines() == [f"a2a-extensions: {REQUIRED}"]


async def test_card_prints_integral_numbers_as_integers(start_server: StartServer) -> None:
    declared = {"uri": REQUIRED, "required": True, "params": {"levels": 5, "ratio": 0.5}}
    server = await start_server(card={**CARD, "capabilities": {**CARD["capabilities"], "extensions": [declared]}})
    run = await a2a_grpc("card", f"http://127.0.0.1:{server.http_port}")
    assert run.code == 0, run.stderr
    extensions = {e["uri"]: e for e in json.loads(run.stdout)["capabilities"]["extensions"]}
    params = extensions[REQUIRED]["params"]
    assert json.dumps(params, sort_keys=True) == '{"levels": 5, "ratio": 0.5}'


async def test_a_reader_that_goes_away_ends_send_quietly(cli_server: A2AServer) -> None:
    """`a2a-grpc send ... | head -1`: once the reader is gone, the command stops without a traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before anything is written
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "a2a_grpc.cli",
            "send",
            cli_server.grpc_target,
            "streamed",
            "--stream",
            "-e",
            REQUIRED,
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert "Traceback" not in stderr.decode() and "BrokenPipe" not in stderr.decode()
