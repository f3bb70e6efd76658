"""Requests in flight by key (a webhook host, a caller), bounded: whatever hangs holds its own slots, never
all of them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class KeyedSlots:
    """`limit` requests at a time per key; a key's semaphore lives only while somebody holds or awaits it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}  # holders and waiters, by key

    @contextlib.asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = asyncio.Semaphore(self.limit)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with slots:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._slots[key]

    def __len__(self) -> int:
        """The keys with requests in flight or waiting."""
        return len(self._slots)


def authority(url: str) -> str:
    """The `host[:port]` of `scheme://host[:port]/...` (the whole text of anything else: its own host)."""
    parts = url.split("/", 3)
    return parts[2] if len(parts) > 2 else url
