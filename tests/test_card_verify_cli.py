"""`a2a-grpc card --verify [--jwks URL|FILE] URL` against real servers: the verdict names the key that signed, and
the exit status is 0 for a card that verifies, 1 for one that does not (and then no card is printed), 2 for a
usage error; `serve --card-signing-key` with a key it cannot use exits 2 naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_keys import make_key_files, signing_key, write_jwks
from conftest import StartServer
from process import run_serve
from served_card import card_url
from test_cli_client import a2a_grpc

from a2a_grpc.push.service import JWKS_PATH


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_key_files(tmp_path_factory.mktemp("cli-keys"), "ec", "ec-other")


async def test_verify_prints_the_verdict_and_the_card(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    server = await start_server(card_signing_keys=(keys["ec"],))
    kid = signing_key(keys["ec"]).kid
    jwks_url = f"http://{server.http_target}{JWKS_PATH}"
    jwks_file = write_jwks(tmp_path / "jwks.json", keys["ec"])
    for extra, source in (
        ([], f"jku {jwks_url}"),
        (["--jwks", jwks_file], f"file {jwks_file}"),
        (["--jwks", jwks_url], f"jku {jwks_url}"),
    ):
        run = await a2a_grpc("card", "--verify", *extra, f"http://{server.http_target}")
        assert run.code == 0, run.stderr
        assert run.stderr.splitlines() == [f"signature verified: ES256, key {kid} from {source}"]
        assert json.loads(run.stdout)["signatures"], "the card, as served"


async def test_an_unsigned_or_untrusted_card_exits_1_saying_why_and_prints_no_card(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    unsigned = await start_server()
    run = await a2a_grpc("card", "--verify", card_url(unsigned))
    assert (run.code, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [f"a2a-grpc: the agent card at {card_url(unsigned)} is not signed"]
    signed = await start_server(card_signing_keys=(keys["ec"],))
    run = await a2a_grpc(
        "card", "--verify", "--jwks", write_jwks(tmp_path / "other.json", keys["ec-other"]), card_url(signed)
    )
    assert (run.code, run.stdout) == (1, "")
    assert f"key {signing_key(keys['ec']).kid} is not a trusted key" in run.stderr


async def test_an_unreadable_jwks_file_is_a_usage_error() -> None:
    run = await a2a_grpc("card", "--verify", "--jwks", "missing.json", "http://127.0.0.1:9/")
    assert run.code == 2
    assert run.stderr.splitlines() == [
        "a2a-grpc card: cannot read the key file missing.json: No such file or directory"
    ]


async def test_jwks_without_verify_and_verify_with_extended_are_usage_errors() -> None:
    run = await a2a_grpc("card", "--jwks", "keys.json", "http://127.0.0.1:9/")
    assert (run.code, run.stderr.strip()) == (2, "a2a-grpc card: --jwks goes with --verify")
    run = await a2a_grpc("card", "--verify", "--extended", "127.0.0.1:9")
    assert run.code == 2 and "leave out --extended" in run.stderr


def test_serve_with_a_key_it_cannot_use_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "weak.pem").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    done = run_serve(["--card-signing-key", "weak.pem", "--store", "memory", "--listen", "127.0.0.1:0"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["a2a-grpc: --card-signing-key weak.pem: not a PEM private key"]
