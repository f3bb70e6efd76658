"""A loopback webhook that misbehaves: each notification is answered slowly, with a 500, not at all (it
hangs until the server gives up) or by resetting the connection, or plainly, as the seeded dice say."""

from __future__ import annotations

import asyncio
import random

from aiohttp import web

HANG_SECONDS = 30.0  # longer than any push timeout the scenarios set: the server gives up first
SLOW_SECONDS = 0.5
BEHAVIOURS = ("ok", "slow", "error", "hang", "reset")


class MisbehavingWebhook:
    def __init__(self, rnd: random.Random) -> None:
        self._rnd = rnd
        self.received = 0
        self.answered: dict[str, int] = dict.fromkeys(BEHAVIOURS, 0)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._notify)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _notify(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.received += 1
        behaviour = self._rnd.choice(BEHAVIOURS)
        self.answered[behaviour] += 1
        if behaviour == "slow":
            await asyncio.sleep(SLOW_SECONDS)
        elif behaviour == "error":
            return web.Response(status=500)
        elif behaviour == "hang":
            await asyncio.sleep(HANG_SECONDS)
        elif behaviour == "reset" and request.transport is not None:
            request.transport.abort()
        return web.Response(status=204)
