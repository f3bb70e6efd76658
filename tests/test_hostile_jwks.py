"""What a malformed or weak key set does to the server's JWT verification, the push receiver and the key files of
`serve --jwt-key` and `card --verify --jwks` (issue 29, findings 7 and 15): a key set that is not one (`{"keys":
5}`, an array nested 30,000 deep, under the size cap) is a failed fetch (the keys kept, the refresher alive, the
caller UNAUTHENTICATED); such a file is a bad setting (one line, exit 2); an RSA key under 2048 bits verifies
nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer
from credentials import (
    AUDIENCE,
    CA,
    ISSUER,
    JwksServer,
    SigningKey,
    ec_key,
    pem_public,
    rsa_key,
    serve_jwks,
    standard_claims,
)
from credentials import b64url as b64url_text
from cryptography.hazmat.primitives.asymmetric import rsa
from process import run_serve
from rpc_helpers import TEST_SECONDS, Metadata, make_stub
from test_cli_client import a2a_grpc

from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.auth.jwks import StaticKeys
from a2a_grpc.card.verification import CardVerifier
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push import NotificationRejected, NotificationVerifier
from a2a_grpc.push.sender import SIGNATURE_HEADER

FIRST, SECOND = rsa_key("k1"), ec_key("k2")
WEAK = SigningKey("weak", rsa.generate_private_key(public_exponent=65537, key_size=1024), "RS256")
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DEEP = b"[" * 30_000 + b"]" * 30_000  # 60,000 bytes: under the 64 KiB a key set may have
MALFORMED = {"keys-not-a-list": b'{"keys": 5}', "nested-30000-deep": DEEP}
MALFORMED_FILES = {
    "keys-not-a-list": MALFORMED["keys-not-a-list"],
    "object-nested-deep": b'{"keys": ' + DEEP + b"}",
    "alg-not-a-string": json.dumps({"keys": [{**FIRST.jwk(), "alg": []}]}).encode(),
}
weak_keys_warn = pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")


@pytest.fixture
def ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CA:
    authority = CA()
    monkeypatch.setenv("SSL_CERT_FILE", authority.write(tmp_path / "test-ca.pem"))
    return authority


@pytest.fixture
async def jwks(ca: CA) -> AsyncIterator[JwksServer]:
    async with serve_jwks(ca, FIRST) as server:
        yield server


def jwt_auth(url: str, *, refresh_seconds: float = 300.0, min_refetch_seconds: float = 0.0) -> AuthSettings:
    jwt = JwtSettings(
        jwks_url=url,
        issuers=(ISSUER,),
        audiences=(AUDIENCE,),
        jwks_refresh_seconds=refresh_seconds,
        jwks_min_refetch_seconds=min_refetch_seconds,
    )
    return AuthSettings(jwt=jwt)


def bearer(subject: str, signing: SigningKey) -> Metadata:
    return (*V1, ("authorization", f"Bearer {signing.sign(standard_claims(subject))}"))


async def list_tasks(server_target: str, metadata: Metadata) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(server_target) as channel:
        try:
            await make_stub(channel).ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata)
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


async def fetched(jwks: JwksServer, count: int) -> None:
    """Until the key set has been fetched `count` times."""
    while len(jwks.fetches) < count:
        jwks.fetched.clear()
        await jwks.fetched.wait()


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
async def test_finding_7_a_malformed_jwks_is_a_failed_fetch_and_callers_get_unauthenticated(
    start_server: StartServer, jwks: JwksServer, caplog: pytest.LogCaptureFixture, body: bytes
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(auth=jwt_auth(jwks.url))
        jwks.raw = body
        before = len(jwks.fetches)
        with caplog.at_level(logging.WARNING, logger="a2a_grpc.auth.jwks"):
            assert await list_tasks(server.grpc_target, bearer("alice", SECOND)) == UNAUTHENTICATED
        assert len(jwks.fetches) == before + 1, "the unknown kid fetched the key set again"
        reason = "not a key set" if body.startswith(b"{") else "not JSON"
        [logged] = caplog.messages
        assert logged.startswith(f"could not fetch the JWKS from {jwks.url}: {reason}")
        assert await list_tasks(server.grpc_target, bearer("bob", FIRST)) == grpc.StatusCode.OK, "keys kept"


async def test_finding_7_the_background_refresh_outlives_a_malformed_jwks(
    start_server: StartServer, jwks: JwksServer
) -> None:
    """Only the refresher fetches here (an unknown kid may not: the interval is an hour), so a key published after
    the malformed key set verifies only if the refresher lived through it."""
    async with asyncio.timeout(TEST_SECONDS):
        auth = jwt_auth(jwks.url, refresh_seconds=0.05, min_refetch_seconds=3600.0)
        server = await start_server(auth=auth)
        jwks.raw = b'{"keys": 5}'
        await fetched(jwks, len(jwks.fetches) + 3)
        jwks.publish(FIRST, SECOND)
        await fetched(jwks, len(jwks.fetches) + 2)  # one begun before the publication may serve the old body
        assert await list_tasks(server.grpc_target, bearer("alice", SECOND)) == grpc.StatusCode.OK


@weak_keys_warn
async def test_finding_15_a_jwt_signed_with_an_rsa_key_under_2048_bits_is_refused(
    start_server: StartServer, jwks: JwksServer, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        jwks.publish(FIRST, WEAK)
        server = await start_server(auth=jwt_auth(jwks.url))
        assert await list_tasks(server.grpc_target, bearer("mallory", WEAK)) == UNAUTHENTICATED
        assert await list_tasks(server.grpc_target, bearer("alice", FIRST)) == grpc.StatusCode.OK
    pem = tmp_path / "weak.pem"
    pem.write_bytes(pem_public(WEAK.key))
    with pytest.raises(ValueError, match=f"--jwt-key {pem} holds an RSA key of 1024 bits, under the 2048 required"):
        StaticKeys.from_file(str(pem))


@weak_keys_warn
async def test_finding_15_the_push_receiver_refuses_an_rsa_key_under_2048_bits() -> None:
    url, body = "https://client.example/hook", b'{"statusUpdate": {"taskId": "t"}}'
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": url,
        "iat": now,
        "exp": now + 300,
        "jti": secrets.token_urlsafe(8),
        "taskId": "t",
        "body_sha256": b64url_text(hashlib.sha256(body).digest()),
    }
    verifier = NotificationVerifier(jwks={"keys": [WEAK.jwk()]}, audience=url, issuer=ISSUER)
    with pytest.raises(NotificationRejected, match="signature algorithm does not match its key"):
        await verifier.verify({SIGNATURE_HEADER: WEAK.sign(claims)}, body)


@pytest.mark.parametrize("content", MALFORMED_FILES.values(), ids=MALFORMED_FILES.keys())
def test_finding_7_a_malformed_key_file_is_one_clear_error_for_both_readers(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "keys.json"
    path.write_bytes(content)
    for read in (StaticKeys.from_file, lambda file: CardVerifier(key_files=[file])):
        with pytest.raises(ValueError, match=f"{path} (starts as a JWKS but is|is neither|holds no)") as refused:
            read(str(path))
        assert "\n" not in str(refused.value) and len(str(refused.value)) < 300


async def test_finding_7_a_malformed_key_file_is_a_bad_setting_of_serve_and_card(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_bytes(b'{"keys": 5}')
    jwt_flags = ["--jwt-key", "keys.json", "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    done = run_serve([*jwt_flags, "--store", "memory", "--listen", "127.0.0.1:0"], cwd=tmp_path)
    assert (done.returncode, done.stderr.splitlines()) == (
        2,
        ["a2a-grpc: --jwt-key keys.json starts as a JWKS but is not a key set (an object whose keys member is a list)"],
    )
    (tmp_path / "deep.json").write_bytes(b'{"keys": ' + DEEP + b"}")
    run = await a2a_grpc("card", "--verify", "--jwks", str(tmp_path / "deep.json"), "http://127.0.0.1:9/")
    assert (run.code, run.stderr.splitlines()) == (
        2,
        [f"a2a-grpc card: the key file {tmp_path / 'deep.json'} starts as a JWKS but is not JSON"],
    )
