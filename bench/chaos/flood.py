"""A client flood of calls to methods no service serves (issue 29, findings 5 and 12): FLOOD_CALLS at once, to
unknown methods of the A2A services and of services the server has never heard of, a few with large bodies.

Such calls are admitted as any call before they are refused, so besides the invariants every call keeps (no
server fault, no UNAUTHENTICATED for accepted credentials) a flood must show it was counted: a caller whose
credentials the server refuses is never answered UNIMPLEMENTED (that would be a method answered without
authentication), and in a scenario with a request rate (or the failed-authentication throttle) a flood of
FLOOD_CALLS, three times the largest burst the chaos servers allow, that ends within FLOOD_SECONDS has some
calls refused RESOURCE_EXHAUSTED (a slower one, on a busy machine, may have been given tokens enough).
"""

from __future__ import annotations

import asyncio
import time

import grpc

from bench.chaos.workload import CALL_SECONDS, Client, Operations

FLOOD_CALLS = 90
FLOOD_SECONDS = 1.0  # a flood this quick outruns every bucket of the chaos servers (bursts of 30 at most)
UNKNOWN_METHODS = ("/a2a.v1.A2AService/NoSuchMethod", "/lf.a2a.v1.A2AService/Nope", "/evil.Svc/X")
SMALL_BODY, LARGE_BODY = b"\x0a\x01x", b"\x0a" * (1024 * 1024)
LARGE_SHARE = 0.02
UNIMPLEMENTED, RESOURCE_EXHAUSTED = grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED


async def _unknown_call(client: Client) -> grpc.StatusCode:
    method = client.rnd.choice(UNKNOWN_METHODS)
    body = LARGE_BODY if client.rnd.random() < LARGE_SHARE else SMALL_BODY
    try:
        await client.channel.unary_unary(method)(body, metadata=client.metadata(), timeout=CALL_SECONDS)
    except grpc.aio.AioRpcError as error:
        code = error.code()
    else:
        code = grpc.StatusCode.OK
    client.record(code, f"unknown method {method}")
    if code == grpc.StatusCode.OK:
        client.ledger.violation(f"unknown method {method} was answered OK")
    elif code == UNIMPLEMENTED and not client.caller.accepted:
        client.ledger.violation(f"unknown method {method}: UNIMPLEMENTED for {client.caller.name}, unauthenticated")
    return code


async def limited_flood(client: Client) -> None:
    """FLOOD_CALLS unknown-method calls at once, in a scenario whose limits must refuse some of them."""
    started = time.monotonic()
    ended = await asyncio.gather(*(_unknown_call(client) for _ in range(FLOOD_CALLS)), return_exceptions=True)
    quick = time.monotonic() - started < FLOOD_SECONDS
    cut = [outcome for outcome in ended if not isinstance(outcome, grpc.StatusCode)]
    if cut:  # the round closed the channel under the flood
        client.ledger.codes["CANCELLED by closed channel"] += len(cut)
    elif quick and RESOURCE_EXHAUSTED not in ended and grpc.StatusCode.CANCELLED not in ended:
        client.ledger.violation(f"a flood of {FLOOD_CALLS} unknown-method calls by {client.caller.name}: none limited")


LIMITED_FLOOD_OPERATIONS: Operations = ((limited_flood, 1),)
