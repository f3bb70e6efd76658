"""Signed notifications: PushSigner's JWTs verify with NotificationVerifier, and every tampering,
replay, stale or foreign signature is rejected. Keys are made by the test; a JWKS is served on
127.0.0.1 over plain http only through the verifier's `allow_http_jwks` test switch."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push import (
    SIGNATURE_HEADER,
    AddressPolicy,
    NotificationRejected,
    NotificationVerifier,
    PushSender,
    PushSigner,
    jwk_thumbprint,
)

URL = "https://client.example/a2a/webhook"
ISSUER = "https://agent.example"
TOKEN = "tok-123"


def write_key(path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    return str(path)


@pytest.fixture(scope="module")
def key_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("keys")
    return {
        "rsa": write_key(folder / "rsa.pem", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "ec": write_key(folder / "ec.pem", ec.generate_private_key(ec.SECP256R1())),
        "ec2": write_key(folder / "ec2.pem", ec.generate_private_key(ec.SECP256R1())),
    }


@pytest.fixture(scope="module")
def ec_key(key_files: dict[str, str]) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(Path(key_files["ec"]).read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def event_body(state: a2a_pb2.TaskState = a2a_pb2.TASK_STATE_WORKING) -> bytes:
    event = a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(task_id="task-1", status=a2a_pb2.TaskStatus(state=state))
    )
    return json_format.MessageToJson(event, indent=None).encode()


def signed(signer: PushSigner, body: bytes, url: str = URL) -> dict[str, str]:
    return {SIGNATURE_HEADER: signer.sign(url, "task-1", body), "X-A2A-Notification-Token": TOKEN}


def verifier(signer: PushSigner, **options: Any) -> NotificationVerifier:
    return NotificationVerifier(jwks=signer.jwks(), audience=URL, issuer=ISSUER, **options)


@pytest.mark.parametrize(("kind", "algorithm"), [("rsa", "RS256"), ("ec", "ES256")])
async def test_a_signed_notification_verifies(key_files: dict[str, str], kind: str, algorithm: str) -> None:
    signer = PushSigner.from_pem_files([key_files[kind]], ISSUER)
    body = event_body()
    headers = signed(signer, body)
    event = await verifier(signer, expected_token=TOKEN).verify(headers, body)
    assert event.status_update.status.state == a2a_pb2.TASK_STATE_WORKING
    header = jwt.get_unverified_header(headers[SIGNATURE_HEADER])
    assert header["alg"] == algorithm and header["kid"] == signer.kid
    claims = jwt.decode(headers[SIGNATURE_HEADER], options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 300
    assert {"iss", "aud", "jti", "taskId", "body_sha256"} <= set(claims)


def test_the_jwks_publishes_public_keys_under_their_thumbprints(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"], key_files["rsa"]], ISSUER)
    keys = signer.jwks()["keys"]
    assert [key["alg"] for key in keys] == ["ES256", "RS256"]
    assert all(key["kid"] == jwk_thumbprint(key) and "d" not in key for key in keys)


def test_the_thumbprint_is_rfc_7638() -> None:
    example = {  # RFC 7638 §3.1
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert jwk_thumbprint(example) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_weak_or_foreign_keys_are_refused(tmp_path: Path) -> None:
    small = write_key(tmp_path / "small.pem", rsa.generate_private_key(public_exponent=65537, key_size=1024))
    p384 = write_key(tmp_path / "p384.pem", ec.generate_private_key(ec.SECP384R1()))
    for path in (small, p384):
        with pytest.raises(ValueError):
            PushSigner.from_pem_files([path], ISSUER)
    with pytest.raises(ValueError):
        PushSigner.from_pem_files([], ISSUER)


async def test_tampered_body_wrong_audience_issuer_and_token_are_rejected(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    body = event_body()
    cases: list[tuple[NotificationVerifier, dict[str, str], bytes, str]] = [
        (verifier(signer), signed(signer, body), event_body(a2a_pb2.TASK_STATE_FAILED), "body"),
        (verifier(signer), signed(signer, body, url="https://other.example/hook"), body, "InvalidAudience"),
        (
            NotificationVerifier(jwks=signer.jwks(), audience=URL, issuer="https://x"),
            signed(signer, body),
            body,
            "Issuer",
        ),
        (
            verifier(signer, expected_token=TOKEN),
            {**signed(signer, body), "X-A2A-Notification-Token": "t"},
            body,
            "token",
        ),
        (verifier(signer, expected_token=TOKEN), {SIGNATURE_HEADER: signer.sign(URL, "task-1", body)}, body, "token"),
        (verifier(signer), {"X-A2A-Notification-Token": TOKEN}, body, "missing signature"),
        (verifier(signer), {SIGNATURE_HEADER: "not.a.jwt"}, body, "malformed"),
    ]
    for check, headers, sent_body, reason in cases:
        with pytest.raises(NotificationRejected, match=reason):
            await check.verify(headers, sent_body)


async def test_header_names_are_case_insensitive(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    body = event_body()
    headers = {name.lower(): value for name, value in signed(signer, body).items()}
    assert (await verifier(signer, expected_token=TOKEN).verify(headers, body)).HasField("status_update")


def clock(shift: float) -> Callable[[], float]:
    return lambda: time.time() + shift


async def test_stale_future_and_long_lived_signatures_are_rejected(
    key_files: dict[str, str], ec_key: ec.EllipticCurvePrivateKey
) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    body = event_body()
    for shift, reason in ((-400, "expired"), (400, "ImmatureSignature")):
        skewed = PushSigner([ec_key], ISSUER, clock=clock(shift))
        with pytest.raises(NotificationRejected, match=reason):
            await verifier(signer).verify(signed(skewed, body), body)
    with pytest.raises(NotificationRejected, match="replay window"):
        await verifier(signer, replay_window_seconds=100).verify(signed(signer, body), body)


async def test_a_replayed_notification_is_rejected(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["rsa"]], ISSUER)
    check = verifier(signer)
    body = event_body()
    headers = signed(signer, body)
    await check.verify(headers, body)
    with pytest.raises(NotificationRejected, match="replayed"):
        await check.verify(headers, body)
    await check.verify(signed(signer, body), body)  # a new jti is fine


async def test_the_replay_memory_is_bounded(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    check = verifier(signer, max_jti=2)
    body = event_body()
    for _ in range(2):
        await check.verify(signed(signer, body), body)
    with pytest.raises(NotificationRejected, match="too many"):
        await check.verify(signed(signer, body), body)


async def test_unknown_kid_none_and_hmac_algorithms_are_rejected(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    other = PushSigner.from_pem_files([key_files["ec2"]], ISSUER)
    body = event_body()
    check = verifier(signer)
    with pytest.raises(NotificationRejected, match="unknown signing key"):
        await check.verify(signed(other, body), body)
    claims = jwt.decode(signed(signer, body)[SIGNATURE_HEADER], options={"verify_signature": False})
    unsigned = jwt.encode(claims, "", algorithm="none", headers={"kid": signer.kid})
    with pytest.raises(NotificationRejected, match="algorithm not allowed"):
        await check.verify({SIGNATURE_HEADER: unsigned}, body)
    hmac_token = jwt.encode(
        claims, "a shared secret of thirty-two bytes!", algorithm="HS256", headers={"kid": signer.kid}
    )
    with pytest.raises(NotificationRejected, match="algorithm not allowed"):
        await check.verify({SIGNATURE_HEADER: hmac_token}, body)


async def test_a_token_of_the_old_key_verifies_after_rotation(key_files: dict[str, str]) -> None:
    old = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    body = event_body()
    headers = signed(old, body)
    rotated = PushSigner.from_pem_files([key_files["rsa"], key_files["ec"]], ISSUER)
    check = verifier(rotated)
    await check.verify(headers, body)
    await check.verify(signed(rotated, body), body)
    assert rotated.kid != old.kid


@pytest.fixture
async def jwks_server() -> AsyncIterator[tuple[str, dict[str, Any], list[int]]]:
    """A loopback JWKS endpoint: its URL, the document it serves (tests replace 'keys'), fetch count."""
    document: dict[str, Any] = {"keys": []}
    fetches: list[int] = []

    async def serve(_: web.Request) -> web.Response:
        fetches.append(1)
        return web.json_response(document)

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/.well-known/jwks.json", document, fetches
    await runner.cleanup()


async def test_a_fetched_jwks_is_cached_and_refetched_on_an_unknown_kid(
    key_files: dict[str, str], jwks_server: tuple[str, dict[str, Any], list[int]]
) -> None:
    url, document, fetches = jwks_server
    old = PushSigner.from_pem_files([key_files["ec"]], ISSUER)
    rotated = PushSigner.from_pem_files([key_files["rsa"], key_files["ec"]], ISSUER)
    stranger = PushSigner.from_pem_files([key_files["ec2"]], ISSUER)
    document["keys"] = old.jwks()["keys"]
    check = NotificationVerifier(url, audience=URL, jwks_refetch_seconds=0, allow_http_jwks=True)
    body = event_body()
    await check.verify(signed(old, body), body)
    await check.verify(signed(old, body), body)
    assert len(fetches) == 1
    document["keys"] = rotated.jwks()["keys"]
    await check.verify(signed(rotated, body), body)
    assert len(fetches) == 2
    slow = NotificationVerifier(url, audience=URL, jwks_refetch_seconds=3600, allow_http_jwks=True)
    await slow.verify(signed(old, body), body)
    for _ in range(3):
        with pytest.raises(NotificationRejected, match="unknown signing key"):
            await slow.verify(signed(stranger, body), body)
    assert len(fetches) == 3


def test_a_jwks_url_must_be_https() -> None:
    with pytest.raises(ValueError, match="https"):
        NotificationVerifier("http://agent.example/.well-known/jwks.json", audience=URL)
    with pytest.raises(ValueError):
        NotificationVerifier(audience=URL)


async def test_a_sender_with_a_signer_posts_what_the_verifier_accepts(key_files: dict[str, str]) -> None:
    signer = PushSigner.from_pem_files([key_files["rsa"]], ISSUER)
    received: list[a2a_pb2.StreamResponse] = []
    check: NotificationVerifier | None = None

    async def webhook(request: web.Request) -> web.Response:
        assert check is not None
        try:
            received.append(await check.verify(request.headers, await request.read()))
        except NotificationRejected as exc:
            return web.Response(status=401, text=exc.reason)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", webhook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    check = NotificationVerifier(jwks=signer.jwks(), audience=url, issuer=ISSUER, expected_token=TOKEN)
    sender = PushSender(AddressPolicy(allow=["127.0.0.1"], allow_http=True), signer=signer)
    try:
        push_config = a2a_pb2.TaskPushNotificationConfig(task_id="task-1", url=url, token=TOKEN)
        attempt = await sender.post(push_config, event_body(a2a_pb2.TASK_STATE_COMPLETED), "task-1")
    finally:
        await sender.close()
        await runner.cleanup()
    assert attempt.delivered, attempt.reason
    assert received[0].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
