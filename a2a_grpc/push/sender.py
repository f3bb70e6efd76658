"""One push notification delivery attempt (A2A §4.3.3, §13.2).

Each attempt POSTs one `StreamResponse` as ProtoJSON to the config's URL with these headers:

- `Content-Type: application/a2a+json`
- `Authorization: <scheme> <credentials>` when the config has `authentication`
- `X-A2A-Notification-Token` and `A2A-Notification-Token`: the config's token, when it has one
- `X-A2A-Notification-Signature`: with a signer, a JWT (see `a2a_grpc.push.signing`) that binds the
  webhook URL (aud), the task id and the SHA-256 of the body

Redirects are never followed: a 3xx response gives up, like any 4xx but 408 and 429. Log lines name
the destination by `safe_host` only: a URL's path or query, a token or credentials may be secrets.
"""

from __future__ import annotations

import enum
import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.guard import AddressPolicy, GuardedResolver, PushTargetRefused
from a2a_grpc.push.signing import PushSigner
from a2a_grpc.settings.defaults import PUSH_TIMEOUT_SECONDS

CONTENT_TYPE = "application/a2a+json"
TOKEN_HEADERS = ("X-A2A-Notification-Token", "A2A-Notification-Token")
SIGNATURE_HEADER = "X-A2A-Notification-Signature"
POOL_LIMIT = 64
POOL_LIMIT_PER_HOST = 16
MAX_RETRY_AFTER = 3600.0
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")

_log = logging.getLogger(__name__)

ConnectorFactory = Callable[[AbstractResolver], aiohttp.BaseConnector]


class Outcome(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class Attempt:
    """How an attempt went; `reason` is short and safe to log."""

    outcome: Outcome
    reason: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def delivered(self) -> bool:
        return self.outcome is Outcome.DELIVERED

    @property
    def retry(self) -> bool:
        return self.outcome is Outcome.RETRY

    @property
    def give_up(self) -> bool:
        return self.outcome is Outcome.GIVE_UP


class PushSender:
    """Posts notifications through one owned `aiohttp.ClientSession`; `close()` it when done.

    `resolver` (default: aiohttp's) is wrapped in a `GuardedResolver` and owned by the sender from
    then on. `connector_factory` builds the connector around that guarded resolver (tests use it).
    """

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        timeout_seconds: float = PUSH_TIMEOUT_SECONDS,
        resolver: AbstractResolver | None = None,
        connector_factory: ConnectorFactory | None = None,
        signer: PushSigner | None = None,
    ) -> None:
        self._policy = policy
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._resolver = resolver
        self._connector_factory = connector_factory or _default_connector
        self._signer = signer
        self._session: aiohttp.ClientSession | None = None
        self._guarded_resolver: GuardedResolver | None = None

    async def post(self, config: a2a_pb2.TaskPushNotificationConfig, body: bytes, task_id: str) -> Attempt:
        attempt = await self._attempt(config, body, task_id)
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("push for task %s to %s: %s", task_id, safe_host(config.url), attempt.reason)
        return attempt

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._guarded_resolver is not None:
            await self._guarded_resolver.close()

    async def _attempt(self, config: a2a_pb2.TaskPushNotificationConfig, body: bytes, task_id: str) -> Attempt:
        try:
            # aiohttp does not ask the resolver about a literal IP: this check is its connect-time check.
            url = self._policy.check_url(config.url)
            headers = self._headers(config, body, task_id)
            async with self._client().post(url, data=body, headers=headers, allow_redirects=False) as response:
                return _classify(response)
        except PushTargetRefused as exc:
            return Attempt(Outcome.GIVE_UP, f"refused: {exc}")
        except TimeoutError:
            return Attempt(Outcome.RETRY, "timeout")
        except aiohttp.ClientError as exc:
            return Attempt(Outcome.RETRY, f"connection failed: {type(exc).__name__}")

    def _headers(self, config: a2a_pb2.TaskPushNotificationConfig, body: bytes, task_id: str) -> dict[str, str]:
        headers = {"Content-Type": CONTENT_TYPE}
        auth = config.authentication
        if config.HasField("authentication") and auth.scheme:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}".rstrip()
        if config.token:
            headers.update(dict.fromkeys(TOKEN_HEADERS, config.token))
        if not all(_HEADER_VALUE.fullmatch(value) for value in headers.values()):
            raise PushTargetRefused("token", "token or credentials hold characters not allowed in a header")
        if self._signer is not None:
            headers[SIGNATURE_HEADER] = self._signer.sign(config.url, task_id, body)
        return headers

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._guarded_resolver = GuardedResolver(self._policy, self._resolver or aiohttp.DefaultResolver())
            self._session = aiohttp.ClientSession(
                connector=self._connector_factory(self._guarded_resolver),
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
            )
        return self._session


def backoff(attempt: int, base: float = 0.5, cap: float = 60.0, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number `attempt` (0-based): full jitter, at least `retry_after`, at most `cap`."""
    ceiling = min(cap, base * 2 ** min(max(attempt, 0), 64))
    delay = random.uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(cap, delay)


def safe_host(url: str) -> str:
    """Just the host of `url`, for log lines."""
    try:
        return URL(url).host or "<no host>"
    except ValueError:
        return "<invalid url>"


def _default_connector(resolver: AbstractResolver) -> aiohttp.BaseConnector:
    return aiohttp.TCPConnector(resolver=resolver, limit=POOL_LIMIT, limit_per_host=POOL_LIMIT_PER_HOST)


def _classify(response: aiohttp.ClientResponse) -> Attempt:
    status = response.status
    if 200 <= status < 300:
        return Attempt(Outcome.DELIVERED, f"HTTP {status}", status)
    if status in (408, 429) or status >= 500:
        retry_after = _retry_after(response.headers.get("Retry-After"))
        return Attempt(Outcome.RETRY, f"HTTP {status}", status, retry_after)
    if 300 <= status < 400:
        return Attempt(Outcome.GIVE_UP, f"HTTP {status}: redirects are not followed", status)
    return Attempt(Outcome.GIVE_UP, f"HTTP {status}", status)


def _retry_after(value: str | None) -> float | None:
    """Retry-After as delta-seconds or an HTTP-date, in seconds from now, capped."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(MAX_RETRY_AFTER, max(0.0, seconds))
