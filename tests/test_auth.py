"""Authentication driven by the card, with real credentials made here: JWTs signed with keys generated here
and served as a JWKS over HTTPS on 127.0.0.1 (a CA made here, trusted through SSL_CERT_FILE), API keys,
static bearer tokens, and client certificates from that CA on the TLS listener."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import logging
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import jwt
import pytest
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, send_request
from credentials import (
    AUDIENCE,
    CA,
    ISSUER,
    JwksServer,
    b64url,
    ec_key,
    hs256_with_public_key,
    pem_cert,
    pem_key,
    pem_public,
    rsa_key,
    serve_jwks,
    standard_claims,
    unsigned_token,
)
from process import Ports, run_serve
from rpc_helpers import TEST_SECONDS, Metadata, Stub, make_stub, read_all

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.auth.api_keys import HashedSecrets, load_api_keys
from a2a_grpc.auth.jwks import JwksCache, StaticKeys
from a2a_grpc.auth.principal import CredentialRejected, KeysUnknown
from a2a_grpc.auth.tokens import MAX_TOKEN_CHARS, JwtVerifier
from a2a_grpc.card import CardError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import A2A_SERVICE, AGENT_CARD_PATH
from a2a_grpc.server import A2AServer, ServerSettings

OK = grpc.StatusCode.OK
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
PERMISSION_DENIED = grpc.StatusCode.PERMISSION_DENIED
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION

FIRST, SECOND, STRANGER = rsa_key("k1"), ec_key("k2"), rsa_key("k1")  # STRANGER: k1's kid, another key
STATIC_TOKEN = "static-token-1c0ffee5eed"
PLAIN_KEY, HASHED_KEY = "plain-api-key-7f3e9a", "hashed-api-key-41b2d8"
SECRETS = [STATIC_TOKEN, PLAIN_KEY, HASHED_KEY]
EXTENDED_SKILL = {"id": "secret", "name": "Secret", "description": "For callers we know.", "tags": ["x"]}
EVERY_RPC = [method.name for method in A2A_SERVICE.methods]
# The key set's clock and the JWKS server's are read a moment apart: fetches look this much closer at most.
CLOCKS_APART = 0.05


def bearer(token: str) -> Metadata:
    return (*V1, ("authorization", f"Bearer {token}"))


def api_key(key: str, header: str = "x-api-key") -> Metadata:
    return (*V1, (header, key))


def jwt_for(subject: str = "alice", signing: Any = FIRST, **claims: Any) -> str:
    return str(signing.sign(standard_claims(subject, **claims)))


# ---- set-up --------------------------------------------------------------------------------------


@pytest.fixture
def ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CA:
    """A CA made for the test, which the JWKS fetch trusts through SSL_CERT_FILE (on top of the system's)."""
    authority = CA()
    monkeypatch.setenv("SSL_CERT_FILE", authority.write(tmp_path / "test-ca.pem"))
    return authority


@pytest.fixture
async def jwks(ca: CA) -> AsyncIterator[JwksServer]:
    async with serve_jwks(ca, FIRST) as server:
        yield server


def jwt_settings(url: str, **overrides: Any) -> JwtSettings:
    options: dict[str, Any] = {"issuers": (ISSUER,), "audiences": (AUDIENCE,), "jwks_min_refetch_seconds": 0}
    return JwtSettings(jwks_url=url, **{**options, **overrides})


def write_api_keys(tmp_path: Path) -> str:
    path = tmp_path / "api-keys"
    hashed = hashlib.sha256(HASHED_KEY.encode()).hexdigest()
    path.write_text(f"# test keys\n\n{PLAIN_KEY}=key-holder\nsha256:{hashed}=hashed-key-holder\n")
    return str(path)


def write_card(tmp_path: Path, name: str, card: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(card))
    return str(path)


EXTENDED = {**BASE_CARD, "capabilities": {**BASE_CARD["capabilities"], "extendedAgentCard": True}}


async def start_secured(start_server: StartServer, tmp_path: Path, jwks: JwksServer, **options: Any) -> A2AServer:
    """A server with every flag-configured scheme: static tokens, JWTs and API keys, and an extended card."""
    extended = {**EXTENDED, "name": "test agent (extended)", "skills": [*BASE_CARD["skills"], EXTENDED_SKILL]}
    options.setdefault("card", EXTENDED)
    return await start_server(
        bearer_tokens={STATIC_TOKEN: "token-holder"},
        auth=AuthSettings(jwt=jwt_settings(jwks.url), api_keys=write_api_keys(tmp_path)),
        extended_card_path=write_card(tmp_path, "extended.json", extended),
        **options,
    )


@pytest.fixture
async def channels() -> AsyncIterator[list[grpc.aio.Channel]]:
    opened: list[grpc.aio.Channel] = []
    yield opened
    for channel in opened:
        await channel.close()


@pytest.fixture
def connect(channels: list[grpc.aio.Channel]) -> Callable[..., Stub]:
    def stub(server: A2AServer, credentials: grpc.ChannelCredentials | None = None) -> Stub:
        if credentials is None:
            channel = grpc.aio.insecure_channel(server.grpc_target)
        else:
            channel = grpc.aio.secure_channel(server.grpc_target, credentials)
        channels.append(channel)
        return make_stub(channel)

    return stub


# ---- every RPC -----------------------------------------------------------------------------------

Outcome = tuple[grpc.StatusCode, str]


async def _unary(call: Awaitable[Any]) -> tuple[Outcome, Any]:
    try:
        response = await call
    except grpc.aio.AioRpcError as error:
        return (error.code(), error.details() or ""), None
    return (OK, ""), response


async def _stream(call: Any) -> tuple[Outcome, Any]:
    try:
        items = await read_all(call)
    except grpc.aio.AioRpcError as error:
        return (error.code(), error.details() or ""), None
    return (OK, ""), items


async def every_rpc(stub: Stub, metadata: Metadata) -> dict[str, Outcome]:
    """Each of the 11 RPCs once, as the caller `metadata` authenticates: the push config ones on the task the
    caller's SendMessage created (a made-up id when it was refused)."""
    outcomes: dict[str, Outcome] = {}
    outcomes["SendMessage"], sent = await _unary(stub.SendMessage(send_request("hi"), metadata=metadata))
    task_id = sent.task.id if sent is not None else "no-such-task"
    streamed = stub.SendStreamingMessage(send_request("hi"), metadata=metadata)
    outcomes["SendStreamingMessage"], _ = await _stream(streamed)
    outcomes["GetTask"], _ = await _unary(stub.GetTask(a2a_pb2.GetTaskRequest(id=task_id), metadata=metadata))
    outcomes["ListTasks"], _ = await _unary(stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=metadata))
    outcomes["CancelTask"], _ = await _unary(stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task_id), metadata=metadata))
    subscribe = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=metadata)
    outcomes["SubscribeToTask"], _ = await _stream(subscribe)
    config = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, id="cfg", url=DEAD_HOOK)
    outcomes["CreateTaskPushNotificationConfig"], _ = await _unary(
        stub.CreateTaskPushNotificationConfig(config, metadata=metadata)
    )
    get_config = a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id="cfg")
    outcomes["GetTaskPushNotificationConfig"], _ = await _unary(
        stub.GetTaskPushNotificationConfig(get_config, metadata=metadata)
    )
    list_configs = a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id)
    outcomes["ListTaskPushNotificationConfigs"], _ = await _unary(
        stub.ListTaskPushNotificationConfigs(list_configs, metadata=metadata)
    )
    delete_config = a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="cfg")
    outcomes["DeleteTaskPushNotificationConfig"], _ = await _unary(
        stub.DeleteTaskPushNotificationConfig(delete_config, metadata=metadata)
    )
    outcomes["GetExtendedAgentCard"], card = await _unary(
        stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata)
    )
    assert sorted(outcomes) == sorted(EVERY_RPC)
    if card is not None:
        assert card.name == "test agent (extended)"
    return outcomes


# The echo agent completes at once: cancelling and subscribing to a completed task are refused as such.
ACCEPTED = {name: OK for name in EVERY_RPC} | {
    "CancelTask": FAILED_PRECONDITION,
    "SubscribeToTask": FAILED_PRECONDITION,
}


def codes(outcomes: dict[str, Outcome]) -> dict[str, grpc.StatusCode]:
    return {name: code for name, (code, _) in outcomes.items()}


async def test_each_scheme_is_accepted_and_refused_on_every_rpc(
    start_server: StartServer, tmp_path: Path, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_secured(start_server, tmp_path, jwks)
        stub = connect(server)
        accepted = {
            "static token": bearer(STATIC_TOKEN),
            "JWT": bearer(jwt_for()),
            "API key": api_key(PLAIN_KEY),
            "hashed API key": api_key(HASHED_KEY),
        }
        for caller, metadata in accepted.items():
            assert codes(await every_rpc(stub, metadata)) == ACCEPTED, caller

        now = int(time.time())
        refused = {
            "no credential": V1,
            "unknown static token": bearer("not-" + STATIC_TOKEN),
            "expired JWT": bearer(jwt_for(exp=now - 300)),
            "unknown API key": api_key("not-" + PLAIN_KEY),
            "API key in another header": api_key(PLAIN_KEY, header="x-other-key"),
            "basic auth": (*V1, ("authorization", "Basic dXNlcjpwYXNz")),
        }
        expected_details = None
        for caller, metadata in refused.items():
            outcomes = await every_rpc(stub, metadata)
            assert codes(outcomes) == {name: UNAUTHENTICATED for name in EVERY_RPC}, caller
            details = {detail for _, detail in outcomes.values()}
            assert len(details) == 1, details
            expected_details = expected_details or details
            assert details == expected_details, "what failed is never told"
        [message] = expected_details or [""]
        for named in ("bearer", "jwt", "apiKey", "x-api-key", "Bearer <JWT>"):
            assert named in message, message


async def test_bad_jwts_are_refused(start_server: StartServer, tmp_path: Path, jwks: JwksServer) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(auth=AuthSettings(jwt=jwt_settings(jwks.url)))
        now = int(time.time())
        claims = standard_claims("mallory")
        bad = {
            "expired": jwt_for(exp=now - 120),  # beyond the 60 s leeway
            "not yet valid": jwt_for(nbf=now + 600),
            "wrong audience": jwt_for(aud="someone-else"),
            "wrong issuer": jwt_for(iss="https://evil.test"),
            "alg none": unsigned_token(claims, FIRST.kid),
            "HS256 signed with the public key": hs256_with_public_key(claims, FIRST),
            "signed by another key with a known kid": jwt_for(signing=STRANGER),
            "unknown kid": str(SECOND.sign(claims, kid="k-unknown")),
            "no exp": FIRST.sign({k: v for k, v in claims.items() if k != "exp"}),
            "no sub": FIRST.sign({k: v for k, v in claims.items() if k != "sub"}),
            "no aud": FIRST.sign({k: v for k, v in claims.items() if k != "aud"}),
            "not a JWT": "definitely.not.a-jwt",
            "payload altered": _altered(jwt_for()),
        }
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            for what, token in bad.items():
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
                assert refused.value.code() == UNAUTHENTICATED, what
            within_leeway = jwt_for(exp=now - 20)
            listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(within_leeway))
            assert listed.total_size == 0


def _altered(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


async def test_scopes_a_requirement_lists_are_enforced(start_server: StartServer, jwks: JwksServer) -> None:
    card = {
        **BASE_CARD,
        "securitySchemes": {"oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": ISSUER + "/.well-known"}}},
        "securityRequirements": [{"schemes": {"oidc": {"list": ["a2a.write"]}}}],
    }
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=card, auth=AuthSettings(jwt=jwt_settings(jwks.url)))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            for token in (jwt_for(scope="a2a.read a2a.write"), jwt_for(scp=["a2a.write"]), jwt_for(scp="x a2a.write")):
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
            for token in (jwt_for(), jwt_for(scope="a2a.read"), jwt_for(scp=["a2a.writer"])):
                with pytest.raises(grpc.aio.AioRpcError) as denied:
                    await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
                assert denied.value.code() == PERMISSION_DENIED
                assert "a2a.write" in (denied.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
                await stub.ListTasks(
                    a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for(aud="other", scope="a2a.write"))
                )
            assert unauthenticated.value.code() == UNAUTHENTICATED
        served = await http_card(server)
        assert "jwt" not in served["securitySchemes"], "the card's own JWT scheme is the one enforced"
        assert served["securityRequirements"] == [{"schemes": {"oidc": {"list": ["a2a.write"]}}}]


async def test_a_jwks_rotation_is_picked_up_without_a_restart(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(auth=AuthSettings(jwt=jwt_settings(jwks.url)))
        stub = connect(server)
        assert len(jwks.fetches) == 1, "fetched at start-up"
        old = jwt_for("alice")
        for _ in range(3):
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(old))
        assert len(jwks.fetches) == 1, "known keys and remembered tokens fetch nothing"

        jwks.publish(SECOND)  # k1 withdrawn, k2 in
        rotated = jwt_for("alice", signing=SECOND)
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(rotated))
        assert len(jwks.fetches) == 2, "an unknown kid fetches the key set again"
        with pytest.raises(grpc.aio.AioRpcError) as withdrawn:
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(old))
        assert withdrawn.value.code() == UNAUTHENTICATED, "a withdrawn key no longer verifies, remembered or not"


async def test_unknown_kids_fetch_the_key_set_at_most_once_per_interval(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        settings = jwt_settings(jwks.url, jwks_min_refetch_seconds=2.0)
        server = await start_server(auth=AuthSettings(jwt=settings))
        stub = connect(server)
        made_up = [str(FIRST.sign(standard_claims("x"), kid=f"made-up-{n}")) for n in range(10)]
        for token in made_up:
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
        gaps = [later - earlier for earlier, later in itertools.pairwise(jwks.fetches)]
        assert all(gap >= 2.0 - CLOCKS_APART for gap in gaps), f"made-up kids fetched sooner than the interval: {gaps}"

        await asyncio.sleep(max(0.0, jwks.fetches[-1] + 2.1 - time.monotonic()))  # the interval has passed
        fetched = len(jwks.fetches)
        jwks.publish(FIRST, SECOND)
        calls = [
            stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for(f"c{n}", SECOND))) for n in range(20)
        ]
        await asyncio.gather(*calls)
        assert len(jwks.fetches) == fetched + 1, "twenty calls with a new kid at once: one fetch"


async def test_a_static_key_file_verifies_tokens(start_server: StartServer, tmp_path: Path) -> None:
    pem = tmp_path / "issuer.pem"
    pem.write_bytes(pem_public(FIRST.key))
    keyset = tmp_path / "issuer.jwks"
    keyset.write_text(json.dumps({"keys": [FIRST.jwk(), SECOND.jwk()]}))
    async with asyncio.timeout(TEST_SECONDS):
        for key_path in (pem, keyset):
            settings = JwtSettings(key_path=str(key_path), issuers=(ISSUER,), audiences=(AUDIENCE,))
            server = await start_server(auth=AuthSettings(jwt=settings))
            async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                stub = make_stub(channel)
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for()))
                for token in (jwt_for(signing=STRANGER), hs256_with_public_key(standard_claims("m"), FIRST)):
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
                    assert refused.value.code() == UNAUTHENTICATED
                if key_path == keyset:
                    await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for(signing=SECOND)))


# ---- the principal -------------------------------------------------------------------------------


class RecordingAgent:
    """Completes at once, recording who asked and what their credential said."""

    def __init__(self) -> None:
        self.callers: list[tuple[str, dict[str, Any]]] = []

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        self.callers.append((context.caller, dict(context.caller_claims)))
        await events.complete("done")

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_the_principal_and_its_claims_reach_the_agent(
    start_server: StartServer, tmp_path: Path, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = RecordingAgent()
        server = await start_secured(start_server, tmp_path, jwks, agent=agent)
        stub = connect(server)
        await stub.SendMessage(send_request("a"), metadata=bearer(jwt_for("alice", email="alice@example.com")))
        await stub.SendMessage(send_request("b"), metadata=api_key(PLAIN_KEY))
        await stub.SendMessage(send_request("c"), metadata=bearer(STATIC_TOKEN))
        (jwt_caller, claims), (key_caller, key_claims), (token_caller, token_claims) = agent.callers
        assert (jwt_caller, claims["email"], claims["iss"], claims["aud"]) == (
            "alice",
            "alice@example.com",
            ISSUER,
            AUDIENCE,
        )
        assert (key_caller, key_claims) == ("key-holder", {})
        assert (token_caller, token_claims) == ("token-holder", {})


# ---- the card ------------------------------------------------------------------------------------


V03_KEYS = ("url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security")


async def http_card(server: A2AServer) -> dict[str, Any]:
    """The served card's 1.0 fields: without the 0.3 fields merged in for 0.3 readers (tests/test_v03_face.py)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{server.http_target}{AGENT_CARD_PATH}") as response,
    ):
        document: dict[str, Any] = await response.json()
    document = {key: value for key, value in document.items() if key not in V03_KEYS}
    document.pop("supportsAuthenticatedExtendedCard", None)
    for name, scheme in document.get("securitySchemes", {}).items():
        document["securitySchemes"][name] = {key: value for key, value in scheme.items() if key.endswith("Scheme")}
    return document


async def test_the_card_declares_the_schemes_the_flags_configure(
    start_server: StartServer, tmp_path: Path, jwks: JwksServer
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        served = await http_card(await start_secured(start_server, tmp_path, jwks))
    assert served["securitySchemes"] == {
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A bearer token the operator issued"}},
        "jwt": {
            "httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT", "description": "A JWT access token"}
        },
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key", "description": "An API key"}},
    }
    assert served["securityRequirements"] == [
        {"schemes": {"bearer": {}}},
        {"schemes": {"jwt": {}}},
        {"schemes": {"apiKey": {}}},
    ]


async def test_a_card_that_declares_its_schemes_keeps_them(start_server: StartServer, tmp_path: Path) -> None:
    card = {
        **BASE_CARD,
        "securitySchemes": {"partnerKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-Partner-Key"}}},
        "securityRequirements": [{"schemes": {"partnerKey": {}}}],
    }
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=card, auth=AuthSettings(api_keys=write_api_keys(tmp_path)))
        served = await http_card(server)
        assert served["securitySchemes"] == card["securitySchemes"]
        assert served["securityRequirements"] == card["securityRequirements"]
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=api_key(PLAIN_KEY, header="x-partner-key"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=api_key(PLAIN_KEY))
            assert refused.value.code() == UNAUTHENTICATED
            assert "x-partner-key: <API key> (scheme partnerKey)" in (refused.value.details() or "")


async def test_an_empty_requirement_admits_anonymous_callers_but_not_bad_credentials(
    start_server: StartServer, tmp_path: Path
) -> None:
    card = {**BASE_CARD, "securityRequirements": [{"schemes": {"apiKey": {}}}, {}]}
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=card, auth=AuthSettings(api_keys=write_api_keys(tmp_path)))
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            anonymous = (await stub.SendMessage(send_request("x"), metadata=V1)).task
            keyed = (await stub.SendMessage(send_request("y"), metadata=api_key(PLAIN_KEY))).task
            listed = await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=V1)
            assert [task.id for task in listed.tasks] == [anonymous.id], "the key holder's task is its own"
            assert keyed.id != anonymous.id
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=api_key("wrong"))
            assert refused.value.code() == UNAUTHENTICATED


@pytest.mark.parametrize(
    ("card_changes", "settings", "refusal"),
    [
        (
            {
                "securitySchemes": {"oauth": {"openIdConnectSecurityScheme": {"openIdConnectUrl": ISSUER}}},
                "securityRequirements": [{"schemes": {"oauth": {}}}],
            },
            {},
            r"'oauth' \(OpenID Connect, https://issuer.test\) needs --jwt-audience",
        ),
        ({"securityRequirements": [{"schemes": {"nobody": {}}}]}, {}, "securitySchemes does not declare"),
        (
            {
                "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "x-key"}}},
                "securityRequirements": [{"schemes": {"key": {"list": ["admin"]}}}],
            },
            {"api_keys": True},
            "lists scopes for 'key'",
        ),
        (
            {
                "securitySchemes": {"basic": {"httpAuthSecurityScheme": {"scheme": "Basic"}}},
                "securityRequirements": [{"schemes": {"basic": {}}}],
            },
            {},
            "cannot verify",
        ),
        (
            {
                "securitySchemes": {"cert": {"mtlsSecurityScheme": {}}},
                "securityRequirements": [{"schemes": {"cert": {}}}],
            },
            {},
            "needs a TLS listener with a client CA",
        ),
        ({"capabilities": {"extendedAgentCard": True}}, {}, "extendedAgentCard needs a security requirement"),
    ],
)
def test_a_card_the_server_cannot_enforce_is_refused_at_start_up(
    tmp_path: Path, card_changes: dict[str, Any], settings: dict[str, Any], refusal: str
) -> None:
    card_path = write_card(tmp_path, "card.json", {**BASE_CARD, **card_changes})
    auth = AuthSettings(api_keys=write_api_keys(tmp_path) if settings.get("api_keys") else None)
    with pytest.raises(CardError, match=refusal):
        A2AServer(ServerSettings(card_path=card_path, store_url="memory", auth=auth))


@pytest.mark.parametrize(
    ("jwt", "refusal"),
    [
        (JwtSettings(jwks_url="http://127.0.0.1:1/jwks.json", issuers=(ISSUER,), audiences=(AUDIENCE,)), "https"),
        (JwtSettings(jwks_url="https://issuer.test/jwks.json", audiences=(AUDIENCE,)), "--jwt-issuer"),
        (JwtSettings(jwks_url="https://issuer.test/jwks.json", issuers=(ISSUER,)), "--jwt-audience"),
        (JwtSettings(jwks_url="https://issuer.test/jwks.json", key_path="k.pem", audiences=(AUDIENCE,)), "one of"),
        (
            JwtSettings(issuers=(ISSUER,), audiences=(AUDIENCE,)),
            "needs --jwt-jwks-url or --jwt-key .* openIdConnectUrl",
        ),
    ],
)
def test_jwt_settings_that_cannot_work_are_refused(jwt: JwtSettings, refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        A2AServer(ServerSettings(store_url="memory", auth=AuthSettings(jwt=jwt)))


async def test_an_open_server_says_so_in_one_warning(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="a2a_grpc"):
        await start_server()
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warnings == ["open server: the agent card has no security requirements, every caller is anonymous"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="a2a_grpc"):
        await start_server(bearer_tokens={STATIC_TOKEN: "someone"})
    assert not [record for record in caplog.records if "open server" in record.getMessage()]


# ---- OpenID Connect discovery --------------------------------------------------------------------

DEAD_DISCOVERY = "https://127.0.0.1:9/.well-known/openid-configuration"  # a loopback port nothing listens on


def oidc_card(discovery_url: str) -> dict[str, Any]:
    """A card whose one scheme is an OpenID Connect scheme: no --jwt-jwks-url, --jwt-key or --jwt-issuer."""
    return {
        **BASE_CARD,
        "securitySchemes": {"oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": discovery_url}}},
        "securityRequirements": [{"schemes": {"oidc": {}}}],
    }


def audience_only(**overrides: Any) -> AuthSettings:
    return AuthSettings(jwt=JwtSettings(audiences=(AUDIENCE,), jwks_min_refetch_seconds=0, **overrides))


async def test_an_openid_connect_scheme_is_verified_with_the_provider_it_discovers(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=oidc_card(jwks.discovery_url), auth=audience_only())
        assert (jwks.discovery_fetches, len(jwks.fetches)) == (1, 1), "discovered, then the key set fetched"
        stub = connect(server)
        good = bearer(jwt_for("alice"))
        task = (await stub.SendMessage(send_request("hi"), metadata=good)).task
        assert (await stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=good)).id == task.id
        assert [listed.id for listed in (await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=good)).tasks] == [
            task.id
        ]
        refused = {
            "wrong issuer": jwt_for(iss="https://evil.test"),
            "expired": jwt_for(exp=int(time.time()) - 300),
            "unsigned": unsigned_token(standard_claims("mallory"), FIRST.kid),
            "wrong audience": jwt_for(aud="someone-else"),
        }
        for what, token in refused.items():
            for call in (
                stub.SendMessage(send_request("hi"), metadata=bearer(token)),
                stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token)),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refusal:
                    await call
                assert refusal.value.code() == UNAUTHENTICATED, what
                assert "(scheme oidc)" in (refusal.value.details() or "")
        served = await http_card(server)
        assert served["securitySchemes"] == oidc_card(jwks.discovery_url)["securitySchemes"], "no jwt scheme added"


async def test_a_configured_issuer_replaces_the_discovered_one(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        auth = audience_only(issuers=("https://other.test",))
        stub = connect(await start_server(card=oidc_card(jwks.discovery_url), auth=auth))
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for(iss="https://other.test")))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for()))
        assert refused.value.code() == UNAUTHENTICATED


async def test_a_rotation_of_the_discovered_key_set_is_picked_up(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        stub = connect(await start_server(card=oidc_card(jwks.discovery_url), auth=audience_only()))
        old = jwt_for("alice")
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(old))
        jwks.publish(SECOND)  # k1 withdrawn, k2 in
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for("alice", signing=SECOND)))
        assert (jwks.discovery_fetches, len(jwks.fetches)) == (1, 2), "the new kid fetched the key set, not discovery"
        with pytest.raises(grpc.aio.AioRpcError) as withdrawn:
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(old))
        assert withdrawn.value.code() == UNAUTHENTICATED


def oauth_card(metadata_url: str) -> dict[str, Any]:
    """A card whose one scheme is an OAuth 2.0 scheme naming its authorization server's metadata (RFC 8414)."""
    flows = {"clientCredentials": {"tokenUrl": f"{ISSUER}/token", "scopes": {"a2a.write": "send messages"}}}
    oauth = {"oauth2SecurityScheme": {"flows": flows, "oauth2MetadataUrl": metadata_url}}
    return {
        **BASE_CARD,
        "securitySchemes": {"oauth": oauth},
        "securityRequirements": [{"schemes": {"oauth": {"list": ["a2a.write"]}}}],
    }


async def test_an_oauth2_scheme_is_verified_with_the_server_its_metadata_names(
    start_server: StartServer, jwks: JwksServer, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(card=oauth_card(jwks.metadata_url), auth=audience_only())
        assert (jwks.discovery_fetches, len(jwks.fetches)) == (1, 1), "the metadata read, then the key set fetched"
        stub = connect(server)
        await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(jwt_for("alice", scope="a2a.write")))
        refused = {
            UNAUTHENTICATED: [jwt_for(iss="https://evil.test", scope="a2a.write"), jwt_for(aud="x", scope="a2a.write")],
            PERMISSION_DENIED: [jwt_for("alice", scope="a2a.read")],
        }
        for code, tokens in refused.items():
            for token in tokens:
                with pytest.raises(grpc.aio.AioRpcError) as refusal:
                    await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
                assert refusal.value.code() == code
        served = await http_card(server)
        assert served["securitySchemes"] == oauth_card(jwks.metadata_url)["securitySchemes"], "no jwt scheme added"


@pytest.mark.parametrize(
    ("discovery", "refusal"),
    [
        (None, "cannot fetch the discovery document"),
        ({"jwks_uri": "http://127.0.0.1:9/jwks.json"}, "names no https jwks_uri"),
        ({"jwks_uri": None}, "names no https jwks_uri"),
        ({"issuer": None}, "names no issuer"),
    ],
)
async def test_serve_stops_in_one_line_naming_a_discovery_document_it_cannot_use(
    tmp_path: Path, jwks: JwksServer, discovery: dict[str, Any] | None, refusal: str
) -> None:
    url = DEAD_DISCOVERY if discovery is None else jwks.discovery_url
    jwks.discovery = {key: value for key, value in {**jwks.discovery, **(discovery or {})}.items() if value}
    card = write_card(tmp_path, "card.json", oidc_card(url))
    flags = [*Ports.free().flags(), "--store", "memory", "--card", card, "--jwt-audience", AUDIENCE]
    # in a thread: this loop serves the discovery document (the child trusts the CA through SSL_CERT_FILE)
    done = await asyncio.to_thread(run_serve, flags, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("a2a-grpc: ") and refusal in line and url in line, line
    assert not jwks.fetches, "no key set fetched"


def test_serve_refuses_an_openid_connect_scheme_without_an_audience(tmp_path: Path) -> None:
    card = write_card(tmp_path, "card.json", oidc_card(DEAD_DISCOVERY))
    done = run_serve([*Ports.free().flags(), "--store", "memory", "--card", card], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"a2a-grpc: security scheme 'oidc' (OpenID Connect, {DEAD_DISCOVERY}) needs --jwt-audience: the discovery "
        "document names the keys and the issuer, not the audience a token must name"
    ]


@pytest.mark.parametrize(
    ("auth", "refusal"),
    [
        (AuthSettings(), "({kind}, {url}) needs --jwt-audience"),
        (AuthSettings(jwt=JwtSettings(issuers=(ISSUER,))), "({kind}, {url}) needs --jwt-audience"),
        (audience_only(), "discovery URL {url} is not https"),
    ],
)
@pytest.mark.parametrize(
    ("scheme", "kind", "card_of", "path"),
    [
        ("oidc", "OpenID Connect", oidc_card, "openid-configuration"),
        ("oauth", "OAuth 2.0", oauth_card, "oauth-authorization-server"),
    ],
)
def test_a_discovered_scheme_without_an_audience_or_https_is_refused(
    tmp_path: Path,
    auth: AuthSettings,
    refusal: str,
    scheme: str,
    kind: str,
    card_of: Callable[[str], dict[str, Any]],
    path: str,
) -> None:
    url = f"http://issuer.test/.well-known/{path}"
    card = write_card(tmp_path, "card.json", card_of(url))
    expected = re.escape(refusal.format(kind=kind, url=url))
    with pytest.raises(CardError, match=f"security scheme '{scheme}'.*{expected}"):
        A2AServer(ServerSettings(card_path=card, store_url="memory", auth=auth))


# ---- API key files -------------------------------------------------------------------------------


def test_api_keys_from_a_file_or_the_environment_are_kept_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_file = load_api_keys(write_api_keys(tmp_path))
    monkeypatch.setenv("TEST_API_KEYS", f"{PLAIN_KEY}=key-holder,{HASHED_KEY}=hashed-key-holder")
    from_env = load_api_keys("env:TEST_API_KEYS")
    for keys in (from_file, from_env):
        assert (keys.principal(PLAIN_KEY), keys.principal(HASHED_KEY), keys.principal("nope")) == (
            "key-holder",
            "hashed-key-holder",
            None,
        )
        stored = keys._principals
        assert all(len(digest) == 32 for digest in stored), "only SHA-256 digests are kept"
        assert PLAIN_KEY not in repr(stored)
    assert isinstance(from_file, HashedSecrets)


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        (f"{PLAIN_KEY}\n", "line 1 is not KEY=PRINCIPAL"),
        (f"# c\n{PLAIN_KEY}=a\n{PLAIN_KEY}=b\n", "line 3 gives a key already listed another principal"),
        ("# nothing\n", "lists no API key"),
    ],
)
def test_a_bad_api_key_file_is_refused_without_showing_a_key(tmp_path: Path, content: str, refusal: str) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    with pytest.raises(ValueError, match=refusal) as refused:
        load_api_keys(str(path))
    assert PLAIN_KEY not in str(refused.value)


# ---- the key set, directly -----------------------------------------------------------------------


async def test_a_jwks_over_https_is_trusted_through_ssl_cert_file_only(
    jwks: JwksServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    trusted = JwksCache(jwks.url)
    assert await trusted.refresh()
    assert trusted.key("k1").algorithms == {"RS256"}
    with pytest.raises(CredentialRejected):
        StaticKeys({}, any_kid=False).key("k1")
    monkeypatch.delenv("SSL_CERT_FILE")
    untrusted = JwksCache(jwks.url)
    with caplog.at_level(logging.WARNING, logger="a2a_grpc.auth"):
        assert not await untrusted.refresh(), "the system store alone does not trust the test CA"
    assert "could not fetch the JWKS" in caplog.text
    with pytest.raises(KeysUnknown if untrusted.may_refetch() else CredentialRejected):
        untrusted.key("k1")


# ---- mutual TLS ----------------------------------------------------------------------------------


def tls_server_files(ca: CA, tmp_path: Path) -> dict[str, str]:
    cert, key = ca.issue("127.0.0.1", ips=["127.0.0.1"], server=True).write(tmp_path, "server")
    return {"tls_cert": cert, "tls_key": key, "tls_client_ca": ca.write(tmp_path / "client-ca.pem")}


def client_credentials(ca: CA, certificate_of: CA | None = None, **names: Any) -> grpc.ChannelCredentials:
    """Channel credentials trusting `ca`, presenting a client certificate `certificate_of` issued (none: None)."""
    if certificate_of is None:
        return grpc.ssl_channel_credentials(ca.pem)
    issued = certificate_of.issue(**names)
    return grpc.ssl_channel_credentials(ca.pem, pem_key(issued.key), pem_cert(issued.cert))


async def test_mutual_tls_names_the_caller_on_every_rpc(
    start_server: StartServer, tmp_path: Path, ca: CA, connect: Callable[..., Stub]
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        agent = RecordingAgent()
        extended = {**EXTENDED, "name": "test agent (extended)"}
        server = await start_server(
            card=EXTENDED,
            agent=agent,
            extended_card_path=write_card(tmp_path, "extended.json", extended),
            v03_card=True,
            **tls_server_files(ca, tmp_path),
        )
        alice = connect(server, client_credentials(ca, ca, common_name="alice", dns=["alice.test"]))
        assert codes(await every_rpc(alice, V1)) == ACCEPTED
        caller, claims = agent.callers[0]
        assert (caller, claims["common_name"], claims["subject_alternative_names"]) == (
            "alice",
            "alice",
            ("alice.test",),
        )
        assert "CN=alice" in claims["subject"]

        workload = connect(server, client_credentials(ca, ca, common_name=None, uris=["spiffe://test/workload"]))
        await workload.SendMessage(send_request("w"), metadata=V1)
        assert agent.callers[-1][0] == "spiffe://test/workload", "no common name: the first alternative name"

        for stranger in (client_credentials(ca), client_credentials(ca, CA("another CA"), common_name="alice")):
            refused = codes(await every_rpc(connect(server, stranger), V1))
            assert refused == {name: grpc.StatusCode.UNAVAILABLE for name in EVERY_RPC}, "refused at the handshake"

        served = await _https_card(server, ca, tmp_path)
        description = "A client certificate from the server's client CA"
        assert served["securitySchemes"] == {
            "mtls": {
                "mtlsSecurityScheme": {"description": description},
                "type": "mutualTLS",
                "description": description,
            }
        }, "the 1.0 form, and 0.3's beside it (--v03-card)"
        assert served["securityRequirements"] == [{"schemes": {"mtls": {}}}]


KEY_SCHEME = {"key": {"apiKeySecurityScheme": {"location": "header", "name": "x-api-key"}}}


@pytest.mark.parametrize(
    ("card_security", "served_requirements"),
    [
        (
            {
                "securitySchemes": {"cert": {"mtlsSecurityScheme": {}}, **KEY_SCHEME},
                "securityRequirements": [{"schemes": {"cert": {}, "key": {}}}],
            },
            [{"schemes": {"cert": {}, "key": {}}}],
        ),
        (  # the client CA's scheme joins the card's requirement: the key stays required
            {"securitySchemes": KEY_SCHEME, "securityRequirements": [{"schemes": {"key": {}}}]},
            [{"schemes": {"key": {}, "mtls": {}}}],
        ),
    ],
)
async def test_a_requirement_of_a_certificate_and_an_api_key_needs_both(
    start_server: StartServer,
    tmp_path: Path,
    ca: CA,
    connect: Callable[..., Stub],
    card_security: dict[str, Any],
    served_requirements: list[dict[str, Any]],
) -> None:
    card = {**BASE_CARD, **card_security}
    async with asyncio.timeout(TEST_SECONDS):
        agent = RecordingAgent()
        server = await start_server(
            card=card,
            agent=agent,
            auth=AuthSettings(api_keys=write_api_keys(tmp_path)),
            **tls_server_files(ca, tmp_path),
        )
        stub = connect(server, client_credentials(ca, ca, common_name="workload-7"))
        for metadata in (V1, api_key("wrong")):
            assert codes(await every_rpc(stub, metadata)) == {name: UNAUTHENTICATED for name in EVERY_RPC}
        await stub.SendMessage(send_request("x"), metadata=api_key(PLAIN_KEY))
        assert agent.callers == [("key-holder", {})], "the key names the caller; the certificate admits it"
        served = await _https_card(server, ca, tmp_path)
        assert served["securityRequirements"] == served_requirements


async def _https_card(server: A2AServer, ca: CA, tmp_path: Path) -> dict[str, Any]:
    issued = ca.issue("card-reader")
    cert, key = issued.write(tmp_path, "card-reader")
    context = ssl.create_default_context(cadata=ca.pem.decode())
    context.load_cert_chain(cert, key)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://{server.http_target}{AGENT_CARD_PATH}", ssl=context) as response,
    ):
        document: dict[str, Any] = await response.json()
        return document


# ---- no secret in any log line -------------------------------------------------------------------


async def test_no_credential_reaches_a_log_line(
    start_server: StartServer,
    tmp_path: Path,
    jwks: JwksServer,
    connect: Callable[..., Stub],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    good_jwt, expired_jwt = jwt_for(), jwt_for(exp=int(time.time()) - 600)
    forged = [hs256_with_public_key(standard_claims("m"), FIRST), unsigned_token(standard_claims("m"), "k1")]
    with caplog.at_level(logging.DEBUG):
        async with asyncio.timeout(TEST_SECONDS):
            server = await start_secured(start_server, tmp_path, jwks)
            stub = connect(server)
            for metadata in (
                bearer(STATIC_TOKEN),
                bearer(good_jwt),
                api_key(PLAIN_KEY),
                api_key(HASHED_KEY),
                bearer(expired_jwt),
                bearer("wrong-" + STATIC_TOKEN),
                api_key("wrong-" + PLAIN_KEY),
                *(bearer(token) for token in forged),
            ):
                await every_rpc(stub, metadata)
            await server.stop(0)
    logged = caplog.text + "".join(str(record.args) for record in caplog.records) + "".join(capfd.readouterr())
    assert "refused the credential presented" in logged, "the refusals were logged (at DEBUG)"
    assert "principal=alice" in logged, "and the calls"
    signatures = [token.rsplit(".", 1)[1] for token in (good_jwt, expired_jwt, forged[0])]
    key_material = [pem_key(FIRST.key).decode().splitlines()[1]]
    for secret in [*SECRETS, good_jwt, expired_jwt, *forged, *signatures, *key_material]:
        assert secret not in logged
    hashed = hashlib.sha256(HASHED_KEY.encode()).hexdigest()
    assert hashed not in logged


# ---- hostile tokens --------------------------------------------------------------------------------


def signed_payload(payload: str, signing: Any = FIRST) -> str:
    """A token signed by `signing` over `payload`, JSON text as it stands (json.dumps could not write some)."""
    headers = {"kid": signing.kid}
    return str(jwt.PyJWS().encode(payload.encode(), signing.key, algorithm=signing.algorithm, headers=headers))


def claims_text(**raw: str) -> str:
    """The standard claims as JSON text, with `raw` claims spliced in as written."""
    kept = [
        f"{json.dumps(key)}:{json.dumps(value)}" for key, value in standard_claims("alice").items() if key not in raw
    ]
    return "{" + ",".join([*kept, *(f"{json.dumps(key)}:{value}" for key, value in raw.items())]) + "}"


DEEP = "[" * 1500 + "]" * 1500  # JSON nested past the interpreter's stack
HOSTILE_TOKENS: dict[str, Callable[[], str]] = {
    "a header nested 3000 deep": lambda: f"{b64url(b'[' * 3000)}.{b64url(b'{}')}.x",
    "a header of 4 KB": lambda: f"{b64url(json.dumps({'alg': 'ES256', 'pad': 'x' * 3000}).encode())}.e30.x",
    "a header that is a list": lambda: f"{b64url(b'[]')}.e30.x",
    "claims nested 1500 deep, validly signed": lambda: signed_payload(claims_text(deep=DEEP)),
    "exp 1e400, validly signed": lambda: signed_payload(claims_text(exp="1e400")),
    "exp a word, validly signed": lambda: signed_payload(claims_text(exp='"soon"')),
    "nbf 10**400, validly signed": lambda: signed_payload(claims_text(nbf="1" + "0" * 400)),
    "iat a list, validly signed": lambda: signed_payload(claims_text(iat="[]")),
    "sub an object, validly signed": lambda: signed_payload(claims_text(sub="{}")),
    "not base64 at all": lambda: "%%%.%%%.%%%",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_TOKENS))
async def test_a_hostile_jwt_is_unauthenticated_and_logged_at_debug_only(
    kind: str, start_server: StartServer, jwks: JwksServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(auth=AuthSettings(jwt=jwt_settings(jwks.url)))
    token = HOSTILE_TOKENS[kind]()
    with caplog.at_level(logging.DEBUG):
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await make_stub(channel).ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))
    assert refused.value.code() == UNAUTHENTICATED, refused.value
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG and "access" not in r.name] == []
    assert not any(r.exc_info for r in caplog.records)


async def test_a_validly_signed_jwt_expiring_in_10_to_the_400_seconds_is_accepted(
    start_server: StartServer, jwks: JwksServer
) -> None:
    server = await start_server(auth=AuthSettings(jwt=jwt_settings(jwks.url)))
    token = signed_payload(claims_text(exp="1" + "0" * 400))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        for _ in range(2):  # verified, then remembered
            await make_stub(channel).ListTasks(a2a_pb2.ListTasksRequest(), metadata=bearer(token))


def test_a_token_longer_than_any_grpc_header_is_refused_unread() -> None:
    """gRPC bounds a header to 16 KiB; the verifier bounds a token itself, wherever it comes from."""
    verifier = JwtVerifier(StaticKeys({}, any_kid=False), issuers=(ISSUER,), audiences=(AUDIENCE,))
    with pytest.raises(CredentialRejected, match="too long"):
        verifier.verify(jwt_for() + "." * MAX_TOKEN_CHARS)
