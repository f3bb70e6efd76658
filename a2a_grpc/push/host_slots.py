"""Requests in flight to each webhook host, bounded: a host that hangs holds its own slots, never all of them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class HostSlots:
    """`limit` requests at a time per host; a host's semaphore lives only while somebody holds or awaits it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}  # holders and waiters, by host

    @contextlib.asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        slots = self._slots.get(host)
        if slots is None:
            slots = self._slots[host] = asyncio.Semaphore(self.limit)
        self._users[host] = self._users.get(host, 0) + 1
        try:
            async with slots:
                yield
        finally:
            self._users[host] -= 1
            if not self._users[host]:
                del self._users[host], self._slots[host]

    def __len__(self) -> int:
        """The hosts with requests in flight or waiting."""
        return len(self._slots)


def authority(url: str) -> str:
    """The `host[:port]` of `scheme://host[:port]/...` (the whole text of anything else: its own host)."""
    parts = url.split("/", 3)
    return parts[2] if len(parts) > 2 else url
