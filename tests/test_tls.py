"""TLS and mutual TLS on both ports: our client and CLI over TLS, a plaintext client refused cleanly, client
certificates required with --tls-client-ca, certificate files read again on SIGHUP while a stream stays
open (in one process, and in every worker of --workers), and no private key material in any log line."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from certs import Issued, Pki, install, served_certificate
from conftest import V1, StartServer, send_request
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from process import REPO, START_SECONDS, ServerProcess, health_status, run_serve, serve_process

from a2a_grpc.client import A2AClient, AgentCardError, fetch_agent_card, grpc_interface
from a2a_grpc.errors import A2AError
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server import A2AServer
from a2a_grpc.tls import ClientTLS, ServerFiles, ServerTLS, TLSError

WRITER = ("--agent", "a2a_grpc.agents.writer:WriterAgent", "--card", str(REPO / "examples" / "writer-card.json"))
RELOADED = "TLS certificates reloaded from"
COMMAND_SECONDS = 60.0
REFUSED_WITHIN_SECONDS = 10.0  # a refused connection is an answer, never a wait for the deadline
CALL_SECONDS = 20.0
NEW_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)  # a channel of its own, not one another channel opened
COMPLETED = a2a_pb2.TASK_STATE_COMPLETED
WORKER_LINE = re.compile(r"worker \d+/\d+ \(pid (\d+)\) serving")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


def tls_settings(issued: Issued, client_ca: Path | None = None) -> dict[str, Any]:
    return {"tls_cert": str(issued.cert), "tls_key": str(issued.key), "tls_client_ca": client_ca and str(client_ca)}


async def served_serials(server: A2AServer, ca_file: Path, client: Issued | None = None) -> tuple[int, int]:
    """The serials of the certificates new connections to the gRPC and the HTTP port are served."""
    grpc_port = await asyncio.to_thread(served_certificate, server.port, ca_file, client, ("h2",))
    http_port = await asyncio.to_thread(served_certificate, server.http_port, ca_file, client)
    return grpc_port.serial_number, http_port.serial_number


def assert_no_key_material(text: str, *keys: Issued) -> None:
    assert "PRIVATE KEY" not in text
    for issued in keys:
        for line in issued.key_lines():
            assert line not in text, "a line of a private key was logged"


async def test_a_tls_client_sends_and_reads_the_card_over_https(start_server: StartServer, pki: Pki) -> None:
    issued = pki.server("server-a")
    server = await start_server(**tls_settings(issued))
    async with A2AClient(server.grpc_target, tls_ca=pki.ca_file) as client:
        sent = await client.send_message("hello", timeout=CALL_SECONDS)
    assert sent.value.task.status.state == COMPLETED

    async with await A2AClient.connect(f"https://{server.http_target}", tls_ca=pki.ca_file) as client:
        assert client.card is not None
        assert grpc_interface(client.card).url == server.grpc_target, "a gRPC address is HOST:PORT, TLS or not"
        assert client.target == server.grpc_target
        again = await client.send_message("hello again", timeout=CALL_SECONDS)
        assert (await client.get_card(refresh=True)).name == client.card.name
    assert again.value.task.status.state == COMPLETED
    assert await served_serials(server, pki.ca_file) == (issued.serial, issued.serial)


async def test_without_tls_files_the_client_trusts_ssl_cert_file_for_the_card_and_the_channel(
    start_server: StartServer, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await start_server(**tls_settings(pki.server("server-a")))
    monkeypatch.delenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca_file))
    async with await A2AClient.connect(f"https://{server.http_target}") as client:  # a card over https: TLS
        assert (await client.send_message("hello", timeout=CALL_SECONDS)).value.task.status.state == COMPLETED


async def test_a_plaintext_client_against_the_tls_port_fails_cleanly(start_server: StartServer, pki: Pki) -> None:
    server = await start_server(**tls_settings(pki.server("server-a")))
    started = time.monotonic()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.SendMessage(send_request(), metadata=V1, timeout=CALL_SECONDS)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    async with A2AClient(server.grpc_target) as client:
        with pytest.raises(A2AError) as typed:
            await client.send_message("hello", timeout=CALL_SECONDS)
    assert typed.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(AgentCardError):
        await fetch_agent_card(f"http://{server.http_target}", timeout_seconds=CALL_SECONDS)
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    async with A2AClient(server.grpc_target, tls_ca=pki.ca_file) as client:  # and TLS clients are still served
        assert (await client.send_message("hello", timeout=CALL_SECONDS)).value.task.status.state == COMPLETED


async def test_a_client_that_does_not_trust_the_servers_ca_is_refused(start_server: StartServer, pki: Pki) -> None:
    server = await start_server(**tls_settings(pki.server("server-a")))
    stranger = Pki(pki.directory / "stranger", "stranger CA")
    async with A2AClient(server.grpc_target, tls_ca=stranger.ca_file) as client:
        with pytest.raises(A2AError) as raised:
            await client.send_message("hello", timeout=CALL_SECONDS)
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(AgentCardError, match="certificate verify failed"):
        await fetch_agent_card(f"https://{server.http_target}", tls=ClientTLS(stranger.ca_file))


@pytest.mark.parametrize("per_address", [0, 5], ids=["grpc accepts", "behind the per-address cap"])
async def test_mutual_tls_admits_a_client_certificate_and_refuses_a_call_without_one(
    start_server: StartServer, pki: Pki, per_address: int
) -> None:
    settings = tls_settings(pki.server("server-a"), client_ca=pki.ca_file)
    server = await start_server(**settings, max_connections_per_address=per_address)
    alice = pki.client("alice")
    mallory = Pki(pki.directory / "other", "other CA").client("mallory")
    async with A2AClient(server.grpc_target, tls_ca=pki.ca_file, tls_cert=alice.cert, tls_key=alice.key) as client:
        assert (await client.send_message("hello", timeout=CALL_SECONDS)).value.task.status.state == COMPLETED
    for refused in (ClientTLS(pki.ca_file), ClientTLS(pki.ca_file, mallory.cert, mallory.key)):
        async with A2AClient(
            server.grpc_target, tls_ca=refused.ca, tls_cert=refused.cert, tls_key=refused.key
        ) as client:
            with pytest.raises(A2AError) as raised:
                await client.send_message("hello", timeout=CALL_SECONDS)
        assert raised.value.code == grpc.StatusCode.UNAVAILABLE

    card_url = f"https://{server.http_target}"  # the card port asks for a client certificate too
    card = await fetch_agent_card(card_url, tls=ClientTLS(pki.ca_file, alice.cert, alice.key))
    assert grpc_interface(card).url == server.grpc_target
    with pytest.raises(AgentCardError):
        await fetch_agent_card(card_url, tls=ClientTLS(pki.ca_file))


@dataclass
class PeerProbe:
    """A bare gRPC server on ServerTLS's credentials whose one method records each call's auth context."""

    port: int
    seen: list[dict[str, list[bytes]]]


@pytest.fixture
async def peer_probe(pki: Pki) -> Any:
    async def start(client_ca: Path | None) -> PeerProbe:
        issued = pki.server("probe")
        tls = ServerTLS(ServerFiles(str(issued.cert), str(issued.key), str(client_ca) if client_ca else None))
        seen: list[dict[str, list[bytes]]] = []

        async def record(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            seen.append({key: list(values) for key, values in context.auth_context().items()})
            return b""

        server = grpc.aio.server()
        handlers = {"Record": grpc.unary_unary_rpc_method_handler(record)}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("probe.Probe", handlers),))
        port = server.add_secure_port("127.0.0.1:0", tls.grpc_credentials())
        await server.start()
        servers.append(server)
        return PeerProbe(port, seen)

    servers: list[grpc.aio.Server] = []
    yield start
    for server in servers:
        await server.stop(0)


async def call_probe(port: int, credentials: grpc.ChannelCredentials) -> None:
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        await channel.unary_unary("/probe.Probe/Record")(b"", timeout=CALL_SECONDS)


async def test_a_calls_auth_context_names_the_verified_client_certificate(pki: Pki, peer_probe: Any) -> None:
    """What the mutual TLS scheme of a2a_grpc.auth reads, as grpc gives it with ServerTLS's credentials."""
    alice = pki.client("alice")
    mutual = await peer_probe(pki.ca_file)
    await call_probe(mutual.port, ClientTLS(pki.ca_file, alice.cert, alice.key).channel_credentials())
    [auth] = mutual.seen
    assert auth["x509_common_name"] == [b"alice"]
    assert auth["x509_subject"] == [b"CN=alice"]
    assert auth["x509_subject_alternative_name"] == [b"spiffe://test.example/alice"]
    [pem] = auth["x509_pem_cert"]
    assert x509.load_pem_x509_certificate(pem).serial_number == alice.serial

    server_only = await peer_probe(None)  # TLS without --tls-client-ca asks for no client certificate
    await call_probe(server_only.port, ClientTLS(pki.ca_file).channel_credentials())
    [auth] = server_only.seen
    assert auth["transport_security_type"] == [b"ssl"]
    assert not any(key.startswith("x509_") for key in auth)


async def test_a_reload_serves_new_connections_the_new_files_and_keeps_the_old_ones_when_the_new_are_bad(
    start_server: StartServer, pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    first, second = pki.server("server-a"), pki.server("server-b")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    install(first, cert, key)
    server = await start_server(tls_cert=str(cert), tls_key=str(key))
    async with A2AClient(server.grpc_target, tls_ca=pki.ca_file) as client:
        await client.send_message("before", timeout=CALL_SECONDS)  # a connection open across the reloads

        cert.write_bytes(second.cert_pem())  # a certificate without its key
        assert not server.reload_certificates()
        key.write_text("not a key")
        assert not server.reload_certificates()
        key.unlink()
        assert not server.reload_certificates()
        assert await served_serials(server, pki.ca_file) == (first.serial, first.serial)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "a2a_grpc.tls"]
        assert len(warnings) == 3
        assert all(
            w.startswith("TLS certificates not reloaded, the ones loaded before stay in use: ") for w in warnings
        )
        assert f"the TLS key {key} is not the key of the certificate {cert}" in warnings[0]
        assert f"the TLS key {key} holds no PEM private key" in warnings[1]
        assert f"cannot read the TLS key {key}" in warnings[2]

        install(second, cert, key)
        assert server.reload_certificates()
        assert await served_serials(server, pki.ca_file) == (second.serial, second.serial)
        assert (await client.send_message("after", timeout=CALL_SECONDS)).value.task.status.state == COMPLETED
    [reloaded] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(RELOADED)]
    assert f"CN=server-b, serial {second.serial:x}" in reloaded
    assert_no_key_material(caplog.text, first, second)


async def test_a_reloaded_client_ca_replaces_the_old_one_on_both_ports(
    start_server: StartServer, pki: Pki, tmp_path: Path
) -> None:
    new_pki = Pki(tmp_path / "new", "new CA")
    old_client, new_client = pki.client("old-client"), new_pki.client("new-client")
    client_ca = tmp_path / "clients.crt"
    client_ca.write_bytes(pki.ca_file.read_bytes())
    server = await start_server(**tls_settings(pki.server("server-a"), client_ca=client_ca))
    await served_serials(server, pki.ca_file, old_client)

    client_ca.write_bytes(new_pki.ca_file.read_bytes())
    assert server.reload_certificates()
    await served_serials(server, pki.ca_file, new_client)
    for port, alpn in ((server.port, ("h2",)), (server.http_port, ())):
        with pytest.raises(OSError):
            await asyncio.to_thread(served_certificate, port, pki.ca_file, old_client, alpn)


# ---- the CLI -----------------------------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


async def a2a_grpc(*args: str | Path) -> Run:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli",
        *map(str, args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), COMMAND_SECONDS)
    assert process.returncode is not None
    return Run(process.returncode, stdout.decode(), stderr.decode())


async def test_send_and_card_take_the_tls_files(start_server: StartServer, pki: Pki) -> None:
    alice = pki.client("alice")
    server = await start_server(**tls_settings(pki.server("server-a"), client_ca=pki.ca_file))
    files = ("--tls-ca", pki.ca_file, "--tls-cert", alice.cert, "--tls-key", alice.key)

    sent = await a2a_grpc("send", server.grpc_target, "hello", *files)
    assert sent.code == 0, sent.stderr
    assert '"TASK_STATE_COMPLETED"' in sent.stdout
    via_card = await a2a_grpc("send", f"https://{server.http_target}", "hello", "--stream", *files)
    assert via_card.code == 0, via_card.stderr
    card = await a2a_grpc("card", f"https://{server.http_target}", *files)
    assert card.code == 0, card.stderr
    assert f'"url": "{server.grpc_target}"' in card.stdout

    without = await a2a_grpc("send", server.grpc_target, "hello", "--tls-ca", pki.ca_file)
    assert without.code == 1
    assert without.stderr.startswith("a2a-grpc: UNAVAILABLE"), without.stderr
    half = await a2a_grpc("send", server.grpc_target, "hello", "--tls-cert", alice.cert)
    assert half.code == 2
    assert "give --tls-cert and --tls-key together" in half.stderr
    for run in (sent, via_card, card, without, half):
        assert "Traceback" not in run.stderr
        assert_no_key_material(run.stdout + run.stderr, alice)


async def test_send_without_tls_to_a_tls_port_fails_cleanly(start_server: StartServer, pki: Pki) -> None:
    server = await start_server(**tls_settings(pki.server("server-a")))
    started = time.monotonic()
    run = await a2a_grpc("send", server.grpc_target, "hello", "--timeout", str(CALL_SECONDS))
    assert run.code == 1
    assert run.stderr.startswith("a2a-grpc: UNAVAILABLE"), run.stderr
    assert "Traceback" not in run.stderr
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS + 5  # + the interpreter's start


OUR_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


async def plaintext_call(target: str) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.SendMessage(send_request(), metadata=V1, timeout=CALL_SECONDS)
    return raised.value.code()


@pytest.mark.parametrize("verbosity", [None, "INFO"], ids=["default", "GRPC_VERBOSITY=INFO"])
async def test_a_refused_handshake_writes_no_grpc_core_line_unless_grpc_verbosity_asks(
    tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch, verbosity: str | None
) -> None:
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    issued = pki.server("server-a")
    tls_flags = ("--tls-cert", str(issued.cert), "--tls-key", str(issued.key))
    credentials = ClientTLS(pki.ca_file).channel_credentials()
    env = {"GRPC_VERBOSITY": verbosity} if verbosity else {}
    with serve_process(tmp_path / "logs", *tls_flags, credentials=credentials, env=env) as server:
        assert await plaintext_call(server.grpc_target) == grpc.StatusCode.UNAVAILABLE
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    raw = [line for line in server.stderr.splitlines() if not OUR_LOG_LINE.match(line)]
    if verbosity is None:
        assert raw == [], server.stderr
    else:  # what the default leaves out: grpc core's own line per refused connection
        assert any("Handshake failed" in line for line in raw), server.stderr


def test_serve_refuses_tls_settings_it_cannot_use(tmp_path: Path, pki: Pki) -> None:
    first, second = pki.server("server-a"), pki.server("server-b")
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        first.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["--tls-cert", str(first.cert)], {}, "--tls-cert and --tls-key go together"),
        ([], {"A2A_GRPC_TLS_KEY": str(first.key)}, "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", str(pki.ca_file)], {}, "--tls-client-ca needs --tls-cert and --tls-key"),
        (["--tls-cert", str(first.cert), "--tls-key", str(second.key)], {}, "is not the key of the certificate"),
        (["--tls-cert", str(first.cert), "--tls-key", str(encrypted)], {}, "is encrypted"),
        (["--tls-cert", str(first.key), "--tls-key", str(first.key)], {}, "holds no PEM certificate"),
        (["--tls-cert", str(first.cert), "--tls-key", str(tmp_path / "missing.key")], {}, "cannot read the TLS key"),
        (
            ["--tls-cert", str(first.cert), "--tls-key", str(first.key), "--tls-client-ca", str(first.key)],
            {},
            "holds no PEM certificate",
        ),
    ]
    for args, env, expected in cases:
        done = run_serve(["--store", "memory", *args], cwd=tmp_path, env=env)
        assert done.returncode == 2, (args, env, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert done.stderr.startswith("a2a-grpc: "), done.stderr
        assert_no_key_material(done.stdout + done.stderr, first, second)


# ---- SIGHUP on a real `a2a-grpc serve` -----------------------------------------------------------------------


def eventually(found: Callable[[], bool], what: str, server: ServerProcess) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not found():
        assert time.monotonic() < deadline, f"{what} not within {START_SECONDS}s; stderr:\n{server.stderr}"
        time.sleep(0.05)


async def test_sighup_serves_new_connections_the_new_certificate_and_an_open_stream_runs_to_its_end(
    tmp_path: Path, pki: Pki
) -> None:
    first, second = pki.server("server-a"), pki.server("server-b")
    cert, key = tmp_path / "tls" / "server.crt", tmp_path / "tls" / "server.key"
    cert.parent.mkdir()
    install(first, cert, key)
    credentials = ClientTLS(pki.ca_file).channel_credentials()
    tls_flags = ("--tls-cert", str(cert), "--tls-key", str(key))
    with serve_process(tmp_path / "logs", *WRITER, *tls_flags, credentials=credentials) as server:
        async with A2AClient(server.grpc_target, tls_ca=pki.ca_file) as client:
            asked = await client.send_message("the sea", timeout=CALL_SECONDS)
            task = asked.value.task
            assert task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
            stream = client.subscribe(task.id, timeout=60)
            events = aiter(stream)
            snapshot = await asyncio.wait_for(anext(events), CALL_SECONDS)
            assert snapshot.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED

            install(second, cert, key)
            server.send_signal(signal.SIGHUP)
            await asyncio.to_thread(eventually, lambda: RELOADED in server.stderr, "the reload", server)
            for port, alpn in ((server.ports.grpc, ("h2",)), (server.ports.http, ())):
                served = await asyncio.to_thread(served_certificate, port, pki.ca_file, None, alpn)
                assert served.serial_number == second.serial, f"port {port} still serves the old certificate"

            async with A2AClient(
                server.grpc_target, tls_ca=pki.ca_file, channel_options=NEW_CONNECTION
            ) as new_client:  # the answer on a connection made after the reload
                answered = await new_client.send_message(
                    a2a_pb2.Message(
                        message_id="tone",
                        role=a2a_pb2.ROLE_USER,
                        parts=[a2a_pb2.Part(text="cheerful")],
                        task_id=task.id,
                        context_id=task.context_id,
                    ),
                    timeout=CALL_SECONDS,
                )
            assert answered.value.task.status.state == COMPLETED
            rest = [event async for event in events]  # the stream opened before the reload, to its end
        server.send_signal(signal.SIGTERM)
        assert await server.exited() == 0, server.stderr

    assert rest[-1].status_update.status.state == COMPLETED
    pieces = [event.artifact_update for event in rest if event.HasField("artifact_update")]
    assert len(pieces) == 5 and pieces[-1].last_chunk
    [reloaded] = [line for line in server.stderr.splitlines() if RELOADED in line]
    assert f"CN=server-b, serial {second.serial:x}" in reloaded
    assert "INFO" in reloaded
    assert_no_key_material(server.stdout + server.stderr, first, second)


def test_sighup_to_the_parent_of_workers_reloads_every_worker(tmp_path: Path, pki: Pki, postgres_url: str) -> None:
    first, second = pki.server("server-a"), pki.server("server-b")
    cert, key = tmp_path / "tls" / "server.crt", tmp_path / "tls" / "server.key"
    cert.parent.mkdir()
    install(first, cert, key)
    credentials = ClientTLS(pki.ca_file).channel_credentials()
    args = ("--workers", "2", "--grace", "1", "--tls-cert", str(cert), "--tls-key", str(key))
    with serve_workers(tmp_path / "logs", args, postgres_url, credentials) as server:
        eventually(lambda: server.stderr.count("TLS certificate CN=server-a") == 2, "both workers serving", server)
        install(second, cert, key)
        server.send_signal(signal.SIGHUP)
        eventually(lambda: server.stderr.count(RELOADED) == 2, "a reload in each worker", server)
        for _ in range(10):  # new connections, spread over both workers by the kernel
            assert served_certificate(server.ports.grpc, pki.ca_file, None, ("h2",)).serial_number == second.serial
        assert health_status(server.grpc_target, credentials=credentials) == 1  # SERVING
    assert_no_key_material(server.stdout + server.stderr, first, second)


@contextmanager
def serve_workers(
    log_dir: Path, args: tuple[str, ...], store: str, credentials: grpc.ChannelCredentials
) -> Iterator[ServerProcess]:
    with serve_process(log_dir, *args, store=store, credentials=credentials) as server:
        try:
            yield server
        finally:
            server.kill()
            for pid in WORKER_LINE.findall(server.stderr):
                with suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def test_client_tls_wants_a_certificate_and_its_key_together(pki: Pki) -> None:
    with pytest.raises(TLSError, match="together"):
        ClientTLS(pki.ca_file, cert=pki.ca_file)
    with pytest.raises(ValueError, match="not both"):
        A2AClient("127.0.0.1:1", tls_ca=pki.ca_file, credentials=grpc.ssl_channel_credentials())
