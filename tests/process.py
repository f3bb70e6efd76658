"""`a2a-grpc serve` as a child process on free loopback ports, for tests of the process as a whole (on the
start-up code the bench shares, bench/launch.py).

`serve_process(...)` starts the server, waits until grpc.health.v1 says SERVING and always ends the
process (SIGKILL if the test has not stopped it); its stdout and stderr go to files so a test can read
them after the process is gone. `run_serve(...)` runs a serve that is expected to exit on its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from bench.launch import REPO as REPO
from bench.launch import SERVE as SERVE
from bench.launch import SERVING as SERVING
from bench.launch import NotServing
from bench.launch import child_env as child_env
from bench.launch import free_port as free_port
from bench.launch import health_status as health_status
from bench.launch import wait_serving as wait_until_serving

START_SECONDS = 30.0
EXIT_SECONDS = 30.0
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
V1 = (("a2a-version", "1.0"),)
CALL_SECONDS = 30.0
PORT_ATTEMPTS = 3
HTTP_SECONDS = 10.0

# A valid custom card (the demo card is what the server serves without --card).
CARD: dict[str, Any] = {
    "name": "card test agent",
    "description": "Serves a custom card.",
    "version": "2.0.0",
    "capabilities": {"streaming": False},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["echo"]}],
}


@dataclass
class Reply:
    status: int
    headers: Message
    body: bytes

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.body)
        return document


def http_get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> Reply:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_SECONDS) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:  # 304 and 404 arrive as errors
        with error:
            return Reply(error.code, error.headers, error.read())


@dataclass(frozen=True)
class Ports:
    grpc: int
    http: int

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port())

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc}"

    @property
    def http_target(self) -> str:
        return f"127.0.0.1:{self.http}"

    def flags(self) -> list[str]:
        return ["--listen", self.grpc_target, "--http-listen", self.http_target]

    def env(self) -> dict[str, str]:
        return {"A2A_GRPC_LISTEN": self.grpc_target, "A2A_GRPC_HTTP_LISTEN": self.http_target}


PROXY_VARIABLES = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy")


def direct_env() -> dict[str, str]:
    """This environment without proxy settings: a client process the tests run calls loopback servers only, and a
    proxy named in the environment would carry that traffic off the machine."""
    return {key: value for key, value in os.environ.items() if key.lower() not in PROXY_VARIABLES}


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    ports: Ports
    log_dir: Path

    @property
    def grpc_target(self) -> str:
        return self.ports.grpc_target

    @property
    def card_url(self) -> str:
        return f"http://{self.ports.http_target}/.well-known/agent-card.json"

    @property
    def stdout(self) -> str:
        return (self.log_dir / "stdout.log").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self.log_dir / "stderr.log").read_text(errors="replace")

    def send_signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = EXIT_SECONDS) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"server did not exit within {timeout}s; stderr:\n{self.stderr}") from None

    async def exited(self) -> int:
        """`wait` without blocking the event loop (calls in flight in the test's loop keep running)."""
        return await asyncio.to_thread(self.wait)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(EXIT_SECONDS)


def text_message(text: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=f"m-{time.monotonic_ns()}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)]
    )


def send_text(
    target: str, text: str, metadata: Sequence[tuple[str, str]] = V1, timeout: float = CALL_SECONDS
) -> a2a_pb2.Task:
    """A blocking SendMessage of one text part, from a synchronous channel; the task it answers."""
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        request = a2a_pb2.SendMessageRequest(message=text_message(text))
        response = stub.SendMessage(request, metadata=metadata, timeout=timeout)
        task: a2a_pb2.Task = response.task
        return task


def get_task(target: str, task_id: str, timeout: float = CALL_SECONDS) -> a2a_pb2.Task:
    with grpc.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        task: a2a_pb2.Task = stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=V1, timeout=timeout)
        return task


def wait_serving(
    server: ServerProcess, timeout: float = START_SECONDS, credentials: grpc.ChannelCredentials | None = None
) -> None:
    wait_until_serving(server.process, server.grpc_target, timeout, lambda: server.stderr, credentials)


def launch(
    log_dir: Path,
    args: Sequence[str],
    *,
    ports: Ports,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    command: Sequence[str] = SERVE,
) -> ServerProcess:
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "stdout.log").open("wb") as stdout, (log_dir / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            [*command, *args], cwd=cwd or log_dir, env=child_env(env), stdout=stdout, stderr=stderr
        )
    return ServerProcess(process, ports, log_dir)


@contextmanager
def serve_process(
    log_dir: Path,
    *args: str,
    ports: Ports | None = None,
    ports_via: str = "flags",
    store: str | None = "memory",
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    command: Sequence[str] = SERVE,
    credentials: grpc.ChannelCredentials | None = None,
) -> Iterator[ServerProcess]:
    """A SERVING server with `args`, on `ports` (free ones by default) given as "flags", as "env", or
    by the caller in `args` ("none"); `credentials` for a server with TLS on.

    `store` is passed as `--store` unless None (then the server's default, or the environment's, holds).
    Free ports picked here can be taken by another process before the server binds them: then the
    start is retried on other ones (other test runs may share this machine).
    """
    attempts = 1 if ports is not None else PORT_ATTEMPTS
    for attempt in range(1, attempts + 1):
        chosen = ports or Ports.free()
        port_args = chosen.flags() if ports_via == "flags" else []
        port_env = chosen.env() if ports_via == "env" else {}
        store_args = ["--store", store] if store is not None else []
        server = launch(
            log_dir / f"attempt-{attempt}" if attempt > 1 else log_dir,
            [*port_args, *store_args, *args],
            ports=chosen,
            env={**port_env, **(env or {})},
            cwd=cwd,
            command=command,
        )
        try:
            wait_serving(server, credentials=credentials)
            break
        except NotServing:
            server.kill()
            if attempt == attempts or " in use" not in server.stderr:
                raise
    try:
        yield server
    finally:
        server.kill()


def run_serve(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = EXIT_SECONDS
) -> subprocess.CompletedProcess[str]:
    """`a2a-grpc serve args` expected to exit by itself (a refused configuration)."""
    return subprocess.run(
        [*SERVE, *args], cwd=cwd, env=child_env(env), capture_output=True, text=True, timeout=timeout, check=False
    )


class SleepyAgent:
    """WORKING at once; then, for a message "sleep SECONDS", sleeps that long, and for "wait PATH", until the
    file PATH exists (at most WAIT_SECONDS); then echoes and completes.

    Lets a test hold a unary call in flight inside a server process it can only signal, and end it when it
    is done with it ("wait"), however busy the machine.
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        text = context.text()
        await events.working("sleeping")
        command, _, argument = text.partition(" ")
        if command == "sleep":
            await asyncio.sleep(float(argument))
        elif command == "wait":
            for _ in range(round(WAIT_SECONDS / WAIT_POLL_SECONDS)):
                if await asyncio.to_thread(os.path.exists, argument):
                    break
                await asyncio.sleep(WAIT_POLL_SECONDS)
        await events.artifact(text=text, name="echo", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


SLEEPY_AGENT = "tests.process:SleepyAgent"
WAIT_SECONDS = 120.0
WAIT_POLL_SECONDS = 0.01


class TickerAgent:
    """For "tick COUNT SECONDS": COUNT artifact chunks ("tick 0", "tick 1", ...) SECONDS apart, then COMPLETED.

    Its cancel handler answers CANCELED with a message naming the process it ran in, so a test can tell
    which replica's agent was cancelled.
    """

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        _, count, seconds = context.text().split()
        await events.working()
        for index in range(int(count)):
            await events.artifact(text=f"tick {index}", artifact_id="ticks", append=index > 0)
            await asyncio.sleep(float(seconds))
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled(f"cancelled by the agent in process {os.getpid()}")


TICKER_AGENT = "tests.process:TickerAgent"
