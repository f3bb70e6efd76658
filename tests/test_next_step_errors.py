"""Errors that name the next step: each says which flag (or header) fixes it, in one line.

Covered: the required-extension refusal names `--extension URI` to a command-line user and the
`a2a-extensions` header to a caller on stubs; `--agent` of a module serve cannot find names `--app-dir`
(and a missing dependency of the module does not); a PostgreSQL store that refuses the connection names its
host and port, never the password; the command-line client recognises TLS mistakes (a plaintext client on a
TLS port, a client without a certificate on a mutual TLS port, a TLS client on a plaintext port, an untrusted
server certificate) and names the flag; a status without a reason is printed without an empty reason.
(A port in use names `--listen` / `--http-listen`: test_serve_cli.py and test_workers.py.)
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import grpc
import pytest
from certs import Pki
from conftest import BASE_CARD, V1, StartServer, send_request
from process import free_port, run_serve
from test_cli_client import Run, a2a_grpc

from a2a_grpc.generated import a2a_pb2_grpc
from a2a_grpc.store.postgres_common import address_of

REQUIRED = "https://example.com/ext/required/v1"
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extensions": [{"uri": REQUIRED, "required": True}]},
}
CALL_SECONDS = 20.0


# ---- the required-extension refusal ----------------------------------------------------------------------------


async def test_the_refusal_names_the_flag_to_the_cli_and_the_header_to_stubs(start_server: StartServer) -> None:
    server = await start_server(card=CARD)
    run = await a2a_grpc("send", server.grpc_target, "hi")
    first = run.stderr.splitlines()[0]
    assert run.code == 1
    assert first.startswith("a2a-grpc: FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED: "), run.stderr
    assert first.endswith(f"; add --extension {REQUIRED}"), first
    assert "header" not in first, "a command-line user has a flag, not a header"
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(send_request(), metadata=V1, timeout=CALL_SECONDS)
    assert "send them in the 'a2a-extensions' header" in (refused.value.details() or "")


# ---- serve --agent from the wrong directory ---------------------------------------------------------------------


def test_an_agent_module_serve_cannot_find_names_app_dir(tmp_path: Path) -> None:
    package = tmp_path / "src" / "mypackage"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ticket.py").write_text("import not_installed_anywhere\n\n\nclass TicketAgent: ...\n")
    common = ["--listen", f"127.0.0.1:{free_port()}", "--http-listen", "", "--store", "memory"]

    wrong_directory = run_serve([*common, "--agent", "mypackage.ticket:TicketAgent"], cwd=tmp_path)
    assert wrong_directory.returncode == 2
    line = Run(2, "", wrong_directory.stderr).line
    assert line.startswith("a2a-grpc: cannot load agent mypackage.ticket:TicketAgent: ModuleNotFoundError: "), line
    assert "No module named 'mypackage'" in line
    assert "--app-dir" in line and "holds mypackage" in line

    found = run_serve([*common, "--agent", "mypackage.ticket:TicketAgent", "--app-dir", "src"], cwd=tmp_path)
    line = Run(2, "", found.stderr).line  # found, but what it imports is not installed: no word of --app-dir
    assert found.returncode == 2
    assert line.endswith("No module named 'not_installed_anywhere'"), line


# ---- a PostgreSQL store that refuses the connection -------------------------------------------------------------


def closed_port() -> int:
    """A loopback port that was bound and closed: a connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_refused_store_connection_names_host_and_port_not_the_password(tmp_path: Path) -> None:
    port = closed_port()
    store = f"postgresql://app:s3cretPW@127.0.0.1:{port}/a2a"
    done = run_serve(["--listen", f"127.0.0.1:{free_port()}", "--http-listen", "", "--store", store], cwd=tmp_path)
    line = Run(done.returncode, "", done.stderr).line
    assert done.returncode == 1
    assert line.startswith(f"a2a-grpc: cannot open the task store at 127.0.0.1:{port}: "), line
    assert "s3cretPW" not in done.stderr and "app:" not in done.stderr


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://app:s3cretPW@db.internal:6432/a2a", "db.internal:6432"),
        ("postgresql://app:s3cret%40PW@db.internal/a2a", "db.internal:5432"),
        ("postgresql://app@h1:6000,h2/a2a?port=7000", "h1:6000,h2:7000"),
        ("postgresql://app@[::1]/a2a", "[::1]:5432"),
        ("postgresql:///a2a?host=/run/postgresql&port=6000", "/run/postgresql:6000"),
        ("postgresql://app:s3c?retPW@db.internal/a2a", "an address the URL does not make clear"),
    ],
)
def test_the_store_address_names_host_and_port_never_the_user_or_password(
    url: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGHOST", raising=False)
    monkeypatch.delenv("PGPORT", raising=False)
    assert address_of(url) == named


# ---- TLS mistakes the command-line client recognises -------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


def tls_server_settings(pki: Pki, *, mutual: bool) -> dict[str, Any]:
    issued = pki.server("server")
    return {
        "tls_cert": str(issued.cert),
        "tls_key": str(issued.key),
        "tls_client_ca": str(pki.ca_file) if mutual else None,
    }


def assert_names(run: Run, *fragments: str) -> None:
    assert run.code == 1, run.stderr
    line = run.line
    assert line.startswith("a2a-grpc: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert " -:" not in line, "no empty reason"


async def test_a_plaintext_client_on_a_tls_port_is_told_grpcs_tls_ca_and_https(
    start_server: StartServer, pki: Pki
) -> None:
    server = await start_server(**tls_server_settings(pki, mutual=False))
    sent, by_card, card = await asyncio.gather(
        a2a_grpc("send", server.grpc_target, "hi"),
        a2a_grpc("send", f"http://{server.http_target}", "hi"),
        a2a_grpc("card", f"http://{server.http_target}"),
    )
    assert_names(sent, "a2a-grpc: UNAVAILABLE: ", "if it serves TLS", "grpcs://HOST:PORT", "--tls-ca", "https://")
    for run in (by_card, card):
        assert_names(run, "if it serves TLS", "https://", "--tls-ca")


async def test_a_client_without_a_certificate_on_a_mutual_tls_port_is_told_tls_cert_and_tls_key(
    start_server: StartServer, pki: Pki
) -> None:
    server = await start_server(**tls_server_settings(pki, mutual=True))
    sent, card = await asyncio.gather(
        a2a_grpc("send", server.grpc_target, "hi", "--tls-ca", pki.ca_file),
        a2a_grpc("card", f"https://{server.http_target}", "--tls-ca", pki.ca_file),
    )
    for run in (sent, card):
        assert_names(run, "requires client certificates", "--tls-cert FILE and --tls-key FILE")
    assert sent.line.startswith("a2a-grpc: UNAVAILABLE: ")


async def test_a_tls_client_on_a_plaintext_port_or_an_untrusted_server_is_told_what_to_change(
    start_server: StartServer, pki: Pki
) -> None:
    plaintext = await start_server()
    tls = await start_server(**tls_server_settings(pki, mutual=False))
    stranger = Pki(pki.directory / "stranger", "stranger CA")
    sent, card, untrusted = await asyncio.gather(
        a2a_grpc("send", plaintext.grpc_target, "hi", "--tls-ca", pki.ca_file),
        a2a_grpc("card", f"https://{plaintext.http_target}", "--tls-ca", pki.ca_file),
        a2a_grpc("send", tls.grpc_target, "hi", "--tls-ca", stranger.ca_file),
    )
    assert_names(sent, "does not speak TLS", "leave out grpcs:// and the --tls-* flags")
    assert_names(card, "does not speak TLS", "http://")
    assert_names(untrusted, "not signed by a CA this client trusts", "--tls-ca FILE")


async def test_an_error_without_a_reason_prints_no_reason_part() -> None:
    run = await a2a_grpc("send", f"127.0.0.1:{closed_port()}", "hi", "--timeout", str(CALL_SECONDS))  # UNAVAILABLE
    assert run.code == 1
    assert run.line.startswith("a2a-grpc: UNAVAILABLE: "), run.stderr
