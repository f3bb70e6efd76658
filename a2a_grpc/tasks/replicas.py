"""What a replica does to share a store with others: keep its lease, notice dead replicas, follow the
events and cancel requests other replicas write.

The task manager owns one `ReplicaKeeper` when its store is shared. The keeper renews this replica's
heartbeat, fails the running tasks whose runner's lease expired (each exactly once: the failing write
is versioned, so only the first replica's lands), and, while the store's notification connection is
down, polls for what notifications would have said.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable

from a2a_grpc.store.base import SharedStore

log = logging.getLogger(__name__)

# A replica whose heartbeat is older than this has died: the tasks it ran are failed.
LEASE_SECONDS = 10.0
# How often a replica polls the store for events and cancel requests while notifications are down.
POLL_SECONDS = 1.0


class ReplicaKeeper:
    """The background work of one replica; the callbacks are the task manager's."""

    def __init__(
        self,
        store: SharedStore,
        *,
        watched_tasks: Callable[[], Iterable[str]],
        note_events: Callable[[str, int], None],
        take_cancels: Callable[[], Coroutine[object, object, None]],
        fail_expired: Callable[[str, str], Awaitable[None]],
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.store = store
        self._watched_tasks = watched_tasks
        self._note_events = note_events
        self._take_cancels = take_cancels
        self._fail_expired = fail_expired
        self.lease_seconds = lease_seconds
        self._poll_seconds = min(poll_seconds, lease_seconds / 3)
        self._loops: list[asyncio.Task[None]] = []
        self._cancel_checks: set[asyncio.Task[None]] = set()
        self._failing = False  # the last round failed: log once per incident

    def start(self) -> None:
        self.store.listen(self._note_events, self._cancel_requested)
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._keep_lease()), loop.create_task(self._follow())]

    async def stop(self) -> None:
        tasks = [*self._loops, *self._cancel_checks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel_requested(self) -> None:
        check = asyncio.get_running_loop().create_task(self._take_cancels())
        self._cancel_checks.add(check)
        check.add_done_callback(self._cancel_checks.discard)

    async def _keep_lease(self) -> None:
        """Renew the heartbeat, and fail the runs of replicas whose lease expired, but only after a whole
        lease of this replica's own heartbeats: after an outage of the store every replica's heartbeat
        looks old until the others have had the time to renew theirs too."""
        loop = asyncio.get_running_loop()
        healthy_since: float | None = None
        while True:
            try:
                await self.store.heartbeat()
                healthy_since = loop.time() if healthy_since is None else healthy_since
                if loop.time() - healthy_since >= self.lease_seconds:
                    await self._fail_expired_runs()
                self._recovered()
            except Exception as error:  # the store is unreachable: the next round retries
                healthy_since = None
                self._failed(error)
            await asyncio.sleep(self.lease_seconds / 3)

    async def _follow(self) -> None:
        """While notifications are down, and once just after they come back, poll for what they say."""
        was_listening = True
        while True:
            listening = self.store.listening
            if not (listening and was_listening):
                try:
                    await self._poll()
                except Exception as error:
                    listening = False  # poll again next round
                    self._failed(error)
            was_listening = listening
            await asyncio.sleep(self._poll_seconds)

    async def _fail_expired_runs(self) -> None:
        expired = await self.store.expired_runs(self.lease_seconds)
        await asyncio.gather(*(self._fail_expired(task_id, owner) for task_id, owner in expired))

    async def _poll(self) -> None:
        watched = list(self._watched_tasks())
        if watched:
            for task_id, seq in (await self.store.event_heads(watched)).items():
                self._note_events(task_id, seq)
        await self._take_cancels()

    def _failed(self, error: BaseException) -> None:
        if not self._failing:
            self._failing = True
            log.warning("cannot reach the shared task store; retrying: %s", error)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("the shared task store is reachable again")
