"""Issue 29, findings 5 and 12: a call to a method no service serves is admitted as any call is (the chain's
authentication, failed-authentication throttle and request rate) before it is refused UNIMPLEMENTED, so unknown
methods neither skip authentication nor bypass the limits."""

from __future__ import annotations

from collections import Counter

import grpc
from conftest import StartServer
from rpc_helpers import assert_error, bearer

from a2a_grpc.server import A2AServer

UNKNOWN_METHODS = ("/a2a.v1.A2AService/NoSuchMethod", "/evil.Svc/X", "/lf.a2a.v1.A2AService/Nope")
TOKENS = {"token-a": "alice", "token-b": "bob"}
ALICE, BOB, WRONG = bearer("token-a"), bearer("token-b"), bearer("guessed")
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


async def unknown_call(
    channel: grpc.aio.Channel, method: str, metadata: tuple[tuple[str, str], ...]
) -> grpc.aio.AioRpcError:
    try:
        await channel.unary_unary(method)(b"\x0a\x01x", metadata=metadata)
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError(f"{method} was answered")


def frozen(server: A2AServer) -> None:
    """The limits' buckets refill only when the test says so."""
    server.limits.clock = lambda: 1000.0


async def test_finding_5_a_flood_of_unknown_methods_is_rate_limited_per_caller(start_server: StartServer) -> None:
    server = await start_server(bearer_tokens=TOKENS, max_requests_per_second=3)
    frozen(server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        errors = [await unknown_call(channel, UNKNOWN_METHODS[n % 3], ALICE) for n in range(12)]
        assert [error.code() for error in errors] == [UNIMPLEMENTED] * 3 + [RESOURCE_EXHAUSTED] * 9
        assert_error(errors[0], UNIMPLEMENTED, "METHOD_NOT_FOUND")
        assert_error(errors[-1], RESOURCE_EXHAUSTED, "RATE_LIMITED", limit="3")
        # the same bucket as the served methods: alice's GetTask is refused too, bob has his own bucket
        refused = await unknown_call(channel, "/lf.a2a.v1.A2AService/GetTask", ALICE)
        assert refused.code() == RESOURCE_EXHAUSTED
        assert (await unknown_call(channel, "/evil.Svc/X", BOB)).code() == UNIMPLEMENTED


async def test_finding_5_anonymous_unknown_calls_count_against_their_address(start_server: StartServer) -> None:
    server = await start_server(max_requests_per_second=2)
    frozen(server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        codes = [(await unknown_call(channel, "/evil.Svc/X", ())).code() for _ in range(5)]
    assert codes == [UNIMPLEMENTED] * 2 + [RESOURCE_EXHAUSTED] * 3


async def test_finding_12_unknown_methods_authenticate_their_caller(start_server: StartServer) -> None:
    server = await start_server(bearer_tokens=TOKENS)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        for method in UNKNOWN_METHODS:
            assert_error(await unknown_call(channel, method, WRONG), UNAUTHENTICATED, "UNAUTHENTICATED")
            assert (await unknown_call(channel, method, ())).code() == UNAUTHENTICATED
            assert_error(await unknown_call(channel, method, ALICE), UNIMPLEMENTED, "METHOD_NOT_FOUND")
        streamed = channel.unary_stream("/evil.Svc/Stream")(b"", metadata=WRONG)
        try:
            await streamed.read()
        except grpc.aio.AioRpcError as error:
            assert error.code() == UNAUTHENTICATED
        else:
            raise AssertionError("the stream was answered")


async def test_finding_12_bad_tokens_to_unknown_methods_count_against_the_failed_authentication_throttle(
    start_server: StartServer,
) -> None:
    server = await start_server(bearer_tokens=TOKENS, max_auth_failures_per_second=5)
    frozen(server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        errors = [await unknown_call(channel, UNKNOWN_METHODS[n % 3], WRONG) for n in range(20)]
        assert Counter(error.code() for error in errors) == {UNAUTHENTICATED: 5, RESOURCE_EXHAUSTED: 15}
        assert_error(errors[-1], RESOURCE_EXHAUSTED, "RATE_LIMITED", scope="authentication-failures")
        # the address spent its budget on unknown methods: a guess at a served method is throttled as well
        assert (await unknown_call(channel, "/lf.a2a.v1.A2AService/GetTask", WRONG)).code() == RESOURCE_EXHAUSTED
