"""Push notifications as the server runs them: settings, the webhook check at config time, the worker."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from a2a_grpc.push.guard import AddressPolicy, PushTargetRefused
from a2a_grpc.push.sender import PushSender
from a2a_grpc.push.signing import PushSigner, load_pem_keys
from a2a_grpc.push.worker import DeliverySettings, PushWorker
from a2a_grpc.settings import defaults
from a2a_grpc.store.base import TaskStore

JWKS_PATH = "/.well-known/jwks.json"
# With a store only this process uses (memory, SQLite) a claim guards against nobody else: it only has to
# keep this process's claim loop from handing a webhook to a second courier, and a claim that lapses while
# its courier still runs is taken again by this process. Held short, so that the claims of a process that
# was killed (kept by a SQLite store) do not hold its webhooks back for long after the restart.
LOCAL_CLAIM_SECONDS = 5.0


@dataclass(frozen=True)
class PushSettings:
    allow: tuple[str, ...] = ()  # hosts and CIDRs webhooks may reach although private or local
    allow_http: bool = defaults.PUSH_ALLOW_HTTP  # webhooks may be plain http:// URLs
    signing_keys: tuple[str, ...] = ()  # PEM private key files: the first signs, all are published
    timeout_seconds: float = defaults.PUSH_TIMEOUT_SECONDS  # one delivery attempt
    delivery: DeliverySettings = field(default_factory=DeliverySettings)


class PushService:
    """Checks webhook URLs when configs are set, and delivers notifications once started."""

    def __init__(
        self,
        settings: PushSettings,
        store: TaskStore,
        claimer: str,
        on_delivery: Callable[[str], None] | None = None,  # told each attempt's outcome (PushWorker)
    ) -> None:
        self.settings = settings
        self._on_delivery = on_delivery
        self.policy = AddressPolicy(settings.allow, settings.allow_http)
        self._keys = load_pem_keys(settings.signing_keys)  # read at once: a bad key file stops the start-up
        self.signer: PushSigner | None = None
        self._store = store
        self._claimer = claimer
        self._resolver: aiohttp.ThreadedResolver | None = None
        self._worker: PushWorker | None = None

    def start(self, issuer: str) -> None:
        """Deliver from now on, signing as `issuer` (the server's address, known once it listens)."""
        self.signer = PushSigner(self._keys, issuer) if self._keys else None
        self._resolver = aiohttp.ThreadedResolver()
        sender = PushSender(self.policy, timeout_seconds=self.settings.timeout_seconds, signer=self.signer)
        delivery = self.settings.delivery
        if self._store.shared is None:
            claim_seconds = min(delivery.claim_seconds, LOCAL_CLAIM_SECONDS)
            delivery = dataclasses.replace(delivery, claim_seconds=claim_seconds)
        self._worker = PushWorker(self._store, sender, self._claimer, delivery, self._on_delivery)
        self._worker.start()

    async def stop(self) -> None:
        if self._worker is not None:
            await self._worker.stop()
            self._worker = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None

    def wake(self, task_id: str) -> None:
        """The task stored events and has push configs: deliver now rather than at the next sweep."""
        if self._worker is not None:
            self._worker.wake(task_id)

    async def check_webhook(self, url: str) -> None:
        """Raise PushTargetRefused for a URL the worker would refuse to dial (its resolved addresses too).
        A host name that does not resolve within the delivery timeout is refused: the caller waits on it."""
        if self._resolver is None:
            self.policy.check_url(url)
            return
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                await self.policy.check_destination(url, self._resolver)
        except TimeoutError:
            raise PushTargetRefused("url", "host could not be resolved in time") from None
