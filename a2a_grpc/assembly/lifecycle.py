"""The order a server's parts start and stop in. Each registers its undo before it starts, so a start that fails
unwinds what had started, in reverse, leaving no port bound and no thread or task running; a graceful stop drains
the calls, then unwinds the same way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from a2a_grpc.assembly.build import Assembly
from a2a_grpc.assembly.cards import advertise_bound_port, card_document, grpc_url, published_keys, sign_cards
from a2a_grpc.faces import advertise as advertise_faces
from a2a_grpc.push.service import JWKS_PATH

log = logging.getLogger("a2a_grpc.server")  # the server's lines, under the one name operators filter on


async def start(parts: Assembly, undo: AsyncExitStack) -> None:
    """The store open, the task manager started, both ports bound and the cards signed, then both ports serving
    and health SERVING."""
    # First: a key set or discovery document that cannot be had stops start-up before anything runs.
    served = parts.served
    undo.push_async_callback(served.verifiers.close)
    await served.verifiers.start()
    undo.push_async_callback(parts.store.close)
    await parts.store.open()
    undo.push_async_callback(parts.manager.close)
    orphans = await parts.manager.start()
    if orphans:
        log.warning("failed %d task(s) left running by a previous server process", orphans)
    await parts.grpc_port.bind(undo)
    advertise_bound_port(parts.settings.listen, parts.grpc_port.target, served.card, served.extended_card)
    if parts.push is not None:
        undo.push_async_callback(parts.push.stop)
        parts.push.start(grpc_url(served.card))  # the issuer of its signatures
    http = parts.http_port
    if http is not None:
        await http.bind(undo, published_keys(parts.push, served.card_signer))
        http.advertise(served.card, served.extended_card)
    else:
        advertise_faces((served.card, served.extended_card), (), "")  # no HTTP port: the card lists no HTTP binding
    sign_cards(served.card_signer, jwks_url(parts), served.card, served.extended_card)  # the ports they name are bound
    await parts.readiness.starting()
    await parts.grpc_port.start()
    if http is not None:
        await http.serve(card_document(parts.settings, served.card))
    undo.push_async_callback(parts.readiness.close)
    await parts.readiness.open()


async def drain(parts: Assembly, grace: float) -> int:
    """Not ready, new calls refused on both ports, calls in flight given `grace` seconds (both ports drain at
    once), the HTTP port closed, then the tasks still running failed: how many were. What was started is then
    unwound as a failed start is."""
    http = parts.http_port
    if http is not None:
        http.refuse_calls()
    await parts.readiness.close()
    parts.grpc_port.refuse_connections()
    await parts.readiness.health.enter_graceful_shutdown()
    fail_running = _once(parts.manager.close)
    drains = [parts.grpc_port.drain(grace, fail_running), *([http.drain(grace, fail_running)] if http else [])]
    failed = sum(await asyncio.gather(*drains))
    if http is not None:
        await http.close()
    access_log = parts.telemetry.access_log
    if access_log is not None:  # the lines of the last calls on both ports, which it writes in batches
        access_log.flush()
    return failed + await parts.manager.close()


def _once(fail_running: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
    """`fail_running` run once whichever port's drain asks first; its count returned to that one only."""
    running: asyncio.Future[int] | None = None

    async def once() -> int:
        nonlocal running
        first = running is None
        if running is None:
            running = asyncio.ensure_future(fail_running())
        failed = await asyncio.shield(running)
        return failed if first else 0

    return once


def jwks_url(parts: Assembly) -> str | None:
    """Where the HTTP port publishes the keys that sign (None: no HTTP port)."""
    if parts.http_port is None:
        return None
    scheme = "http" if parts.served.tls is None else "https"
    return f"{scheme}://{parts.http_port.target}{JWKS_PATH}"
