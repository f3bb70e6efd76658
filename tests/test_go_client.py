"""A second language end to end: the Go client of examples/go-client against a real server.

The ```sh block under "## Build" in examples/go-client/README.md runs verbatim (bash, from the checkout, into a
GOPATH work directory of the test's own): it generates the Go stubs from protos/a2a.proto with protoc,
protoc-gen-go and protoc-gen-go-grpc and builds the client from Debian's Go packages, so the README's commands
are the ones tested and the stubs cannot drift from the proto. The client then calls a server of
tests/conftest.py whose card requires an extension, and the test reads its JSON lines.

The tools come from Debian's packages (scripts/test installs them). Without them the test fails, naming them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest
from conftest import StartServer

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "go-client"
GOCODE = Path("/usr/share/gocode/src")
EXTENSION = "https://example.com/ext/priority/v1"
CARD: dict[str, Any] = json.loads((REPO / "examples" / "required-extension-card.json").read_text())
BUILD_SECONDS = 240.0
RUN_SECONDS = 60.0
CALL_SECONDS = "10s"

# What the build needs, and the Debian package that gives it.
COMMANDS = {
    "go": "golang-go",
    "protoc": "protobuf-compiler",
    "protoc-gen-go": "protoc-gen-go",
    "protoc-gen-go-grpc": "protoc-gen-go-grpc",
}
GO_SOURCES = {
    "google.golang.org/protobuf/proto": "golang-google-protobuf-dev",
    "github.com/golang/protobuf/proto": "golang-github-golang-protobuf-1-5-dev",
    "google.golang.org/grpc/status": "golang-google-grpc-dev",
    "google.golang.org/genproto/googleapis/rpc/errdetails": "golang-google-genproto-dev",
    "google.golang.org/genproto/googleapis/api/annotations": "golang-google-genproto-dev",
}


def go_missing(why: str) -> NoReturn:
    """Fail the test for want of the Go tool chain: a skipped test proves nothing."""
    pytest.fail(f"{why} (scripts/test installs Debian's packages; see examples/go-client/README.md)", pytrace=False)


def missing_packages() -> list[str]:
    """The Debian packages whose files are missing, in the order of the lists above."""
    missing = [package for command, package in COMMANDS.items() if shutil.which(command) is None]
    missing += [package for source, package in GO_SOURCES.items() if not (GOCODE / source).is_dir()]
    # github.com/golang/protobuf 1.3 (golang-github-golang-protobuf-1-3-dev) has its own table marshaler,
    # which panics in makeOneOfMarshaler on the generated messages; 1.5 delegates to google.golang.org/protobuf.
    if (GOCODE / "github.com/golang/protobuf/proto/table_marshal.go").exists():
        missing.append("golang-github-golang-protobuf-1-5-dev")
    return list(dict.fromkeys(missing))


def build_commands() -> str:
    """The ```sh block under "## Build" in the example's README."""
    text = (EXAMPLE / "README.md").read_text()
    section = text.split("\n## Build\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"expected one sh block under '## Build', found {len(blocks)}"
    return str(blocks[0])


@pytest.fixture(scope="module")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client binary, built by the README's commands in a fresh GOPATH work directory."""
    if missing := missing_packages():
        go_missing(f"the Go client needs Debian's {', '.join(missing)}")
    work = tmp_path_factory.mktemp("go-client")
    env = {**os.environ, "WORK": str(work), "PYTHON": sys.executable}
    if "GOCACHE" not in env and "HOME" not in env and "XDG_CACHE_HOME" not in env:
        env["GOCACHE"] = str(work / "cache")
    built = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", build_commands()],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
        check=False,
    )
    assert built.returncode == 0, f"the README's build failed:\n{built.stdout}\n{built.stderr}"
    stubs = work / "src" / "google.golang.org" / "lf" / "a2a" / "v1"
    assert {p.name for p in stubs.iterdir()} == {"a2a.pb.go", "a2a_grpc.pb.go"}
    assert (work / "a2a-go-client").is_file()
    return work / "a2a-go-client"


async def run_client(binary: Path, target: str) -> list[dict[str, Any]]:
    """Run the client against `target` and return its JSON lines; it must exit 0."""
    process = await asyncio.create_subprocess_exec(
        str(binary),
        "-timeout",
        CALL_SECONDS,
        target,
        EXTENSION,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), RUN_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    output = out.decode()
    assert process.returncode == 0, f"the Go client exited {process.returncode}:\n{output}\n{err.decode()}"
    return [json.loads(line) for line in output.splitlines()]


async def test_go_client_sends_gets_streams_and_reads_the_echo_and_error_info(
    go_client: Path, start_server: StartServer
) -> None:
    assert EXTENSION in [ext["uri"] for ext in CARD["capabilities"]["extensions"] if ext.get("required")]
    server = await start_server(card=CARD)
    lines = await run_client(go_client, server.grpc_target)
    steps = [line["step"] for line in lines]
    assert steps == [
        "send",
        "get",
        "stream_headers",
        *["stream_event"] * (len(lines) - 6),
        "stream_end",
        "error",
        "error",
    ], lines
    send, get, headers, *events = lines[:-3]
    stream_end, unknown, unextended = lines[-3:]

    # SendMessage with a2a-version and a2a-extensions: a completed task, and the echo in the trailers.
    assert send["state"] == "TASK_STATE_COMPLETED"
    assert send["task_id"]
    assert send["trailer_extensions"] == [EXTENSION]

    # GetTask of that task: the echo agent's artifact.
    assert get["task_id"] == send["task_id"]
    assert get["state"] == "TASK_STATE_COMPLETED"
    assert get["artifacts"] == ["hello from Go"]
    assert get["trailer_extensions"] == [EXTENSION]

    # SendStreamingMessage: the echo in the headers before the first event and in the trailers;
    # the events are the task snapshot, then the artifact, then the terminal status.
    assert headers["header_extensions"] == [EXTENSION]
    assert [event["kind"] for event in events] == ["task", "artifact_update", "status_update"], events
    assert events[1]["text"] == "stream from Go"
    assert events[-1]["state"] == "TASK_STATE_COMPLETED"
    assert stream_end["trailer_extensions"] == [EXTENSION]

    # Errors decoded from grpc-status-details-bin by Go's status and errdetails packages.
    assert unknown["call"] == "GetTask unknown"
    assert (unknown["code"], unknown["code_number"]) == ("NotFound", 5)
    assert unknown["reason"] == "TASK_NOT_FOUND"
    assert unknown["domain"] == "a2a-protocol.org"
    assert unknown["metadata"] == {"taskId": "no-such-task"}
    assert unextended["call"] == "GetTask without extension"
    assert (unextended["code"], unextended["code_number"]) == ("FailedPrecondition", 9)
    assert unextended["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    assert unextended["domain"] == "a2a-protocol.org"
    assert unextended["metadata"] == {"missingExtensions": EXTENSION}
