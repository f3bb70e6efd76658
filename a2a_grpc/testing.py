"""Test an agent behind the real server, in-process: `AgentTestServer` (docs/testing.md).

    async with AgentTestServer(MyAgent()) as served:
        result = await served.client.send_message("hello")
        assert result.value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED

The agent runs behind a real `A2AServer` on a loopback port the OS chooses (every check, interceptor and
error of a served agent applies), with a memory store unless `store` says otherwise. `client` is an
`A2AClient` connected to it; `target` (`"127.0.0.1:PORT"`) is for generated stubs and other clients. Leaving
the block closes the clients, then stops the server, also when the block raised.

pytest is not needed to use it; with pytest, a fixture that yields the entered value is all it takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import json_format

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.client import A2AClient
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import TaskStore

__all__ = ["LOOPBACK", "AgentTestServer"]

LOOPBACK = "127.0.0.1"
STOP_GRACE_SECONDS = 5.0  # what calls still in flight when the block ends get to finish

Card = a2a_pb2.AgentCard | Mapping[str, Any] | str | Path


class AgentTestServer:
    """`agent` served on 127.0.0.1 for the length of an `async with` block; the block gets this object.

    `agent`: None serves the settings' `agent` (MODULE:ATTR; the echo agent by default). `card`: the agent
    card, as an `AgentCard`, a ProtoJSON dict or the path of a JSON file (None: the card the server serves
    without `--card`). `settings`: a `ServerSettings` for anything else (its addresses are replaced: gRPC on
    a free loopback port, the HTTP card port too unless `http_listen` is empty, as it is by default).
    `store`: a `TaskStore`, or a store URL (`memory`, the default, `sqlite:///PATH`, `postgresql://...`) that
    replaces the settings' `store_url`. `interceptors`: grpc.aio server interceptors around the servicer, as
    `A2AServer` takes them. `extensions`: the URIs `client` requests on every call (one call can replace
    them: `client.send_message(..., extensions=[])`). `client_options`: any other `A2AClient` keyword for
    `client` (e.g. `timeout`, `headers`). `grace_seconds`: what calls still in flight when the block ends get
    to finish (the clients are closed first, so only other callers' calls can be).
    """

    def __init__(
        self,
        agent: AgentExecutor | None,
        *,
        card: Card | None = None,
        settings: ServerSettings | None = None,
        store: TaskStore | str = "memory",
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
        extensions: Iterable[str] = (),
        client_options: Mapping[str, Any] | None = None,
        grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        self.agent = agent
        self._card = card
        self._settings = settings if settings is not None else ServerSettings(http_listen="")
        self._store = store
        self._interceptors = tuple(interceptors)
        self._client_settings = {"extensions": tuple(extensions), **(client_options or {})}
        self._grace_seconds = grace_seconds
        self._server: A2AServer | None = None
        self._client: A2AClient | None = None
        self._exit = contextlib.AsyncExitStack()

    @property
    def server(self) -> A2AServer:
        """The running `A2AServer` (its `card`, `port`, `http_port`)."""
        if self._server is None:
            raise RuntimeError("the AgentTestServer is not running: use it in `async with`")
        return self._server

    @property
    def client(self) -> A2AClient:
        """An `A2AClient` connected to the server, requesting `extensions`."""
        if self._client is None:
            raise RuntimeError("the AgentTestServer is not running: use it in `async with`")
        return self._client

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def target(self) -> str:
        """`127.0.0.1:PORT`, for `grpc.aio.insecure_channel` and generated stubs."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def card(self) -> a2a_pb2.AgentCard:
        """The card the server serves (with its bound address)."""
        return self.server.card

    def connect(self, **client_settings: Any) -> A2AClient:
        """Another `A2AClient` to the server (`A2AClient` keywords), closed when the block ends."""
        client = A2AClient(self.target, **client_settings)
        self._exit.push_async_callback(client.close)
        return client

    async def __aenter__(self) -> AgentTestServer:
        # One stack, undone last-in first: the clients close, then the server stops, then the card file goes.
        self._exit = contextlib.AsyncExitStack()
        try:
            await self._start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start(self) -> None:
        settings = dataclasses.replace(self._settings, listen=f"{LOOPBACK}:0")
        if isinstance(self._store, str):
            settings.store_url = self._store
        if settings.http_listen:
            settings.http_listen = f"{LOOPBACK}:0"
        if self._card is not None:
            folder = Path(self._exit.enter_context(tempfile.TemporaryDirectory(prefix="a2a-grpc-test-")))
            settings.card_path = str(_card_file(self._card, folder))
        store = None if isinstance(self._store, str) else self._store
        server = A2AServer(settings, self.agent, store, interceptors=self._interceptors)
        await server.start()
        self._exit.push_async_callback(server.stop, self._grace_seconds)
        self._server = server
        self._client = self.connect(**self._client_settings)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._exit.aclose()
        finally:
            self._server = None
            self._client = None


def _card_file(card: Card, folder: Path) -> Path:
    """The path of a JSON file holding `card` (written to `folder` unless it is a path already)."""
    if isinstance(card, str | Path):
        return Path(card)
    document = json_format.MessageToDict(card) if isinstance(card, a2a_pb2.AgentCard) else dict(card)
    path = folder / "card.json"
    path.write_text(json.dumps(document))
    return path
