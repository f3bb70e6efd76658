"""Verifying push notifications, for the authors of webhook receivers.

`NotificationVerifier.verify` checks a notification's `X-A2A-Notification-Signature` JWT against the
agent's JWKS (its signature, algorithm, audience, issuer, lifetime, body hash and jti), the token
header when one is expected, and returns the body as a `StreamResponse`. An aiohttp receiver:

    from aiohttp import web

    from a2a_grpc.push import NotificationRejected, NotificationVerifier

    verifier = NotificationVerifier(
        jwks_url="https://agent.example.com/.well-known/jwks.json",
        audience="https://me.example.com/a2a/webhook",  # the url of your push config, exactly
        issuer="https://agent.example.com",
        expected_token="the token of your push config",
    )


    async def webhook(request: web.Request) -> web.Response:
        try:
            event = await verifier.verify(request.headers, await request.read())
        except NotificationRejected as exc:
            return web.Response(status=401, text=exc.reason)
        print(event.WhichOneof("payload"))
        return web.Response(status=204)


    app = web.Application(client_max_size=1 << 20)
    app.router.add_post("/a2a/webhook", webhook)
    web.run_app(app, port=8080)
"""

from __future__ import annotations

import heapq
import hmac
import time
from collections.abc import Mapping
from typing import Any

import jwt
from google.protobuf import json_format

from a2a_grpc.auth.jwks import JwksCache, JwksError, KeySet, StaticKeys, VerificationKey, keys_by_kid
from a2a_grpc.auth.principal import CredentialRejected, KeysUnknown
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.sender import SIGNATURE_HEADER, TOKEN_HEADERS
from a2a_grpc.push.signing import body_sha256

ALGORITHMS = frozenset({"RS256", "ES256"})
_REQUIRED_CLAIMS = ["iss", "aud", "iat", "exp", "jti", "taskId", "body_sha256"]


class NotificationRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotificationVerifier:
    """Verifies notifications against a JWKS given as `jwks` or fetched (HTTPS) from `jwks_url`.

    A fetched JWKS is cached and fetched again on an unknown kid, at most once per
    `jwks_refetch_seconds` (a2a_grpc.auth.jwks, which the server's JWT verification uses too). Tokens that live longer than `replay_window_seconds` are refused, and the
    jti of each accepted one is remembered until it expires (at most `max_jti` at once: when full,
    notifications are refused rather than risking a replay). `allow_http_jwks` is for tests.
    """

    def __init__(
        self,
        jwks_url: str | None = None,
        jwks: dict[str, Any] | None = None,
        *,
        audience: str,
        issuer: str | None = None,
        expected_token: str | None = None,
        leeway_seconds: float = 60,
        replay_window_seconds: float = 600,
        max_jti: int = 100_000,
        jwks_refetch_seconds: float = 60,
        allow_http_jwks: bool = False,
    ) -> None:
        if (jwks_url is None) == (jwks is None):
            raise ValueError("give exactly one of jwks_url and jwks")
        self._keys: KeySet
        if jwks_url is not None:
            try:
                self._keys = JwksCache(jwks_url, min_refetch_seconds=jwks_refetch_seconds, allow_http=allow_http_jwks)
            except JwksError:
                raise ValueError("jwks_url must be https") from None
        else:
            self._keys = StaticKeys(keys_by_kid(jwks), any_kid=False)
        self._audience = audience
        self._issuer = issuer
        self._expected_token = expected_token
        self._leeway = leeway_seconds
        self._replay_window = replay_window_seconds
        self._max_jti = max_jti
        self._seen_jti: set[str] = set()
        self._jti_expiry: list[tuple[float, str]] = []

    async def verify(self, headers: Mapping[str, str], body: bytes) -> a2a_pb2.StreamResponse:
        lowered = {name.lower(): value for name, value in headers.items()}
        self._check_token(lowered)
        token = lowered.get(SIGNATURE_HEADER.lower())
        if not token:
            raise NotificationRejected("missing signature")
        claims = self._decode(token, await self._key(token))
        if not hmac.compare_digest(str(claims["body_sha256"]), body_sha256(body)):
            raise NotificationRejected("body does not match its signature")
        event = _parse(body)
        self._remember(str(claims["jti"]), int(claims["exp"]))
        return event

    def _check_token(self, headers: Mapping[str, str]) -> None:
        if self._expected_token is None:
            return
        tokens = [headers[name.lower()] for name in TOKEN_HEADERS if name.lower() in headers]
        expected = self._expected_token.encode()
        if not tokens or not all(hmac.compare_digest(token.encode(), expected) for token in tokens):
            raise NotificationRejected("wrong or missing notification token")

    async def _key(self, token: str) -> tuple[VerificationKey, str]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise NotificationRejected("malformed signature") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS:
            raise NotificationRejected("signature algorithm not allowed")
        if not isinstance(kid, str):
            raise NotificationRejected("signature has no kid")
        try:
            try:
                key = self._keys.key(kid)
            except KeysUnknown as unknown:
                if not await unknown.refresh():
                    raise NotificationRejected("could not fetch the JWKS") from None
                key = self._keys.key(kid)
        except (CredentialRejected, KeysUnknown):
            raise NotificationRejected("unknown signing key") from None
        if algorithm not in key.algorithms:
            raise NotificationRejected("signature algorithm does not match its key")
        return key, algorithm

    def _decode(self, token: str, key_and_algorithm: tuple[VerificationKey, str]) -> dict[str, Any]:
        key, algorithm = key_and_algorithm
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise NotificationRejected("signature expired") from None
        except jwt.PyJWTError as exc:
            raise NotificationRejected(f"invalid signature: {type(exc).__name__}") from None
        if int(claims["exp"]) - int(claims["iat"]) > self._replay_window:
            raise NotificationRejected("signature lives longer than the replay window")
        return claims

    def _remember(self, jti: str, expires: float) -> None:
        now = time.time()
        while self._jti_expiry and self._jti_expiry[0][0] < now:
            self._seen_jti.discard(heapq.heappop(self._jti_expiry)[1])
        if jti in self._seen_jti:
            raise NotificationRejected("replayed notification")
        if len(self._seen_jti) >= self._max_jti:
            raise NotificationRejected("too many notifications to check for replays")
        self._seen_jti.add(jti)
        heapq.heappush(self._jti_expiry, (expires + self._leeway, jti))


def _parse(body: bytes) -> a2a_pb2.StreamResponse:
    event = a2a_pb2.StreamResponse()
    try:
        json_format.Parse(body.decode("utf-8"), event, ignore_unknown_fields=True)
    except (UnicodeDecodeError, json_format.ParseError):
        raise NotificationRejected("body is not a StreamResponse") from None
    if event.WhichOneof("payload") is None:
        raise NotificationRejected("body is not a StreamResponse")
    return event
