"""The limits, against real servers: requests per second and open streams per caller and in all
(RESOURCE_EXHAUSTED with a RetryInfo, while others are still served), parts per message and extensions
per call (INVALID_ARGUMENT naming the field or header)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter

import grpc
import pytest
from agents import PacedAgent
from conftest import V1, StartServer, bad_request, rich_status, send_request, user_message
from google.rpc import error_details_pb2
from rpc_helpers import Clients, Metadata, assert_error, bearer, make_stub, read_all, rpc_error, stream_error

from a2a_grpc.client import A2AClient
from a2a_grpc.errors import (
    RateLimitedError,
    ResourceExhaustedError,
    TooManyStreamsError,
    error_from_status,
    status_trailers,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server.limits import Limits, TokenBuckets
from a2a_grpc.telemetry import ACCESS_LOGGER

RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
TOKENS = {"token-a": "alice", "token-b": "bob"}
ALICE, BOB = bearer("token-a"), bearer("token-b")
NEW_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)  # a channel of its own, not one another channel opened
PEER = re.compile(r"peer\W+(ipv4:[0-9.]+:[0-9]+)")


def retry_delay(error: grpc.aio.AioRpcError) -> float:
    for detail in rich_status(error).details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToNanoseconds() / 1e9)
    raise AssertionError(f"no RetryInfo in {error!r}")


def get_task(task_id: str = "no-such-task") -> a2a_pb2.GetTaskRequest:
    return a2a_pb2.GetTaskRequest(id=task_id)


# ---- requests per second ------------------------------------------------------------------------


async def test_the_rate_limit_refuses_a_caller_with_retry_info_and_serves_the_others(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(bearer_tokens=TOKENS, max_requests_per_second=2)
    now = [1000.0]
    server.limits.clock = lambda: now[0]  # the buckets' clock stands still unless the test moves it
    stub = clients.stub(server)
    for _ in range(2):  # a burst of one second's worth passes: TASK_NOT_FOUND, not refused
        error = await rpc_error(stub.GetTask(get_task(), metadata=ALICE))
        assert error.code() == grpc.StatusCode.NOT_FOUND
    refused = await rpc_error(stub.GetTask(get_task(), metadata=ALICE))
    assert_error(refused, RESOURCE_EXHAUSTED, "RATE_LIMITED", limit="2")
    assert 0 < retry_delay(refused) <= 0.5
    # bob is another caller, with a bucket of his own
    served = await rpc_error(stub.GetTask(get_task(), metadata=BOB))
    assert served.code() == grpc.StatusCode.NOT_FOUND
    # streams count too, and are refused before they open
    assert_error(
        await stream_error(stub.SendStreamingMessage(send_request(), metadata=ALICE)),
        RESOURCE_EXHAUSTED,
        "RATE_LIMITED",
    )
    now[0] += retry_delay(refused)  # the bucket refills
    again = await rpc_error(stub.GetTask(get_task(), metadata=ALICE))
    assert again.code() == grpc.StatusCode.NOT_FOUND


async def test_no_rate_limit_by_default(start_server: StartServer, clients: Clients) -> None:
    stub = clients.stub(await start_server())
    for _ in range(50):
        assert (await rpc_error(stub.GetTask(get_task(), metadata=V1))).code() == grpc.StatusCode.NOT_FOUND


def test_a_token_bucket_refills_at_its_rate_and_forgets_idle_callers() -> None:
    limits = Limits(requests_per_second=10)
    now = [100.0]
    limits.clock = lambda: now[0]
    for _ in range(10):
        limits.take_request("a")
    with pytest.raises(RateLimitedError) as caught:
        limits.take_request("a")
    assert caught.value.retry_delay == pytest.approx(0.1)
    now[0] += 0.1
    limits.take_request("a")
    limits.take_request("b")
    buckets = TokenBuckets(10, lambda: now[0])
    for key in ("a", "b"):
        buckets.take(key)
    now[0] += 5
    buckets._drop_full(now[0])
    assert len(buckets) == 0


# ---- streams ------------------------------------------------------------------------------------


async def open_stream(stub: object, metadata: Metadata) -> grpc.aio.UnaryStreamCall:
    """A SendStreamingMessage stream that has sent its first event (so it holds its slot)."""
    call = stub.SendStreamingMessage(send_request(), metadata=metadata)  # type: ignore[attr-defined]
    first = await call.read()
    assert first is not grpc.aio.EOF
    return call


async def test_the_stream_limit_per_caller_refuses_the_extra_stream_and_frees_slots(
    start_server: StartServer, clients: Clients
) -> None:
    agent = PacedAgent(chunks=1)
    server = await start_server(agent=agent, bearer_tokens=TOKENS, max_streams_per_caller=2)
    stub = clients.stub(server)
    first = await open_stream(stub, ALICE)
    second = await open_stream(stub, ALICE)
    refused = await stream_error(stub.SendStreamingMessage(send_request(), metadata=ALICE))
    assert_error(refused, RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS", limit="2", scope="caller")
    assert retry_delay(refused) > 0
    # unary calls are not streams: alice is still served
    immediately = send_request(configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True))
    assert (await stub.SendMessage(immediately, metadata=ALICE)).HasField("task")
    # another caller keeps streaming
    bobs = await open_stream(stub, BOB)
    # a stream that ends, however it ends, frees its slot: one cancelled by its client...
    first.cancel()
    third = await _opened_when_freed(stub, ALICE)
    # ...and one that finished
    agent.step(10)
    agent.finish()
    for call in (second, bobs, third):
        await read_all(call)
    await _opened_when_freed(stub, ALICE)


async def _opened_when_freed(stub: object, metadata: Metadata) -> grpc.aio.UnaryStreamCall:
    """A new stream, once the server has seen a slot freed (the client's cancel travels asynchronously)."""
    for _ in range(100):
        call = stub.SendStreamingMessage(send_request(), metadata=metadata)  # type: ignore[attr-defined]
        try:
            item = await call.read()
        except grpc.aio.AioRpcError as error:
            assert error.code() == RESOURCE_EXHAUSTED
            await asyncio.sleep(0.02)
            continue
        assert item is not grpc.aio.EOF
        return call
    raise AssertionError("the slot was never freed")


async def test_the_stream_limit_in_all(start_server: StartServer, clients: Clients) -> None:
    agent = PacedAgent(chunks=1)
    server = await start_server(agent=agent, bearer_tokens=TOKENS, max_streams=1)
    stub = clients.stub(server)
    held = await open_stream(stub, ALICE)
    refused = await stream_error(stub.SendStreamingMessage(send_request(), metadata=BOB))
    assert_error(refused, RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS", limit="1", scope="server")
    agent.step(10)
    agent.finish()
    await read_all(held)
    await read_all(await _opened_when_freed(stub, BOB))


async def test_streams_refused_after_taking_their_slot_give_it_back(
    start_server: StartServer, clients: Clients
) -> None:
    """A stream refused once it holds its slot (a tenant the card does not name, a task that does not exist)
    gives the slot back: the caller's one slot still opens a stream afterwards."""
    agent = PacedAgent(chunks=1)
    server = await start_server(agent=agent, bearer_tokens=TOKENS, max_streams_per_caller=1)
    stub = clients.stub(server)
    for _ in range(3):
        bad_tenant = await stream_error(stub.SendStreamingMessage(send_request(tenant="nobody"), metadata=ALICE))
        assert bad_tenant.code() == INVALID_ARGUMENT
        missing = await stream_error(stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="gone"), metadata=ALICE))
        assert missing.code() == grpc.StatusCode.NOT_FOUND
    held = await open_stream(stub, ALICE)
    agent.step(10)
    agent.finish()
    await read_all(held)


def test_a_failed_stream_opening_gives_its_slot_back() -> None:
    limits = Limits(max_streams_per_caller=1, max_streams=5)
    release = limits.open_stream("a")
    with pytest.raises(TooManyStreamsError):
        limits.open_stream("a")
    release()
    release()  # at most once
    assert (limits.streams_of("a"), limits.open_streams) == (0, 0)
    limits.open_stream("a")
    assert limits.open_streams == 1


# ---- request shape ------------------------------------------------------------------------------


async def test_too_many_parts_is_invalid_argument_naming_the_field(start_server: StartServer, clients: Clients) -> None:
    stub = clients.stub(await start_server(max_parts=3))
    request = a2a_pb2.SendMessageRequest(message=with_parts(4))
    error = await rpc_error(stub.SendMessage(request, metadata=V1))
    assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
    [violation] = bad_request(error).field_violations
    assert violation.field == "message.parts"
    assert "at most 3" in violation.description
    streamed = await stream_error(stub.SendStreamingMessage(request, metadata=V1))
    assert [v.field for v in bad_request(streamed).field_violations] == ["message.parts"]
    assert (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=with_parts(3)), metadata=V1)).HasField("task")


def with_parts(count: int) -> a2a_pb2.Message:
    message = user_message("p0")
    message.parts.extend(a2a_pb2.Part(text=f"p{index}") for index in range(1, count))
    return message


async def test_too_many_extensions_is_invalid_argument_naming_the_header(
    start_server: StartServer, clients: Clients
) -> None:
    stub = clients.stub(await start_server(max_extensions_per_call=2))
    many = ",".join(f"https://example.com/ext/{index}" for index in range(3))
    error = await rpc_error(stub.SendMessage(send_request(), metadata=(*V1, ("a2a-extensions", many))))
    assert_error(error, INVALID_ARGUMENT, "INVALID_PARAMS")
    [violation] = bad_request(error).field_violations
    assert violation.field == "a2a-extensions"
    # split across entries, they count the same; repeats count once
    split = (*V1, ("a2a-extensions", "https://example.com/ext/0"), ("a2a-extensions", many))
    assert (await rpc_error(stub.GetTask(get_task(), metadata=split))).code() == INVALID_ARGUMENT
    two = (*V1, ("a2a-extensions", "https://example.com/ext/0, https://example.com/ext/1, https://example.com/ext/0"))
    assert (await stub.SendMessage(send_request(), metadata=two)).HasField("task")


# ---- the client ---------------------------------------------------------------------------------


def test_retry_info_travels_both_ways() -> None:
    for cls in (RateLimitedError, TooManyStreamsError):
        sent = cls("slow down", metadata={"limit": "2"}, retry_delay=0.25)
        received = error_from_status(RESOURCE_EXHAUSTED, "", status_trailers(sent))
        assert type(received) is cls and isinstance(received, ResourceExhaustedError)
        assert received.retry_delay == pytest.approx(0.25)
        assert received.metadata == {"limit": "2"}
    plain = error_from_status(RESOURCE_EXHAUSTED, "full", None)
    assert type(plain) is ResourceExhaustedError and plain.retry_delay is None


async def test_the_client_decodes_a_refusal_with_its_retry_delay(start_server: StartServer) -> None:
    server = await start_server(max_requests_per_second=1)
    async with A2AClient(server.grpc_target) as client:
        await client.send_message("first")
        with pytest.raises(RateLimitedError) as caught:
            await client.send_message("second")
    assert caught.value.code == RESOURCE_EXHAUSTED
    assert caught.value.retry_delay is not None and 0 < caught.value.retry_delay <= 1.0


# ---- failed authentication ------------------------------------------------------------------------


async def test_failed_authentication_is_throttled_per_address_with_retry_info(
    start_server: StartServer, clients: Clients
) -> None:
    """300 wrong tokens at once: each is checked; a burst of one second's worth is refused UNAUTHENTICATED, the
    rest RESOURCE_EXHAUSTED; a right token from the throttled address is served at once; once the wait has
    passed, a wrong token is UNAUTHENTICATED again."""
    server = await start_server(bearer_tokens=TOKENS, max_auth_failures_per_second=5)
    now = [1000.0]
    server.limits.clock = lambda: now[0]
    stub = clients.stub(server)
    wrong = (*V1, ("authorization", "Bearer guessed"))
    errors = await asyncio.gather(*(rpc_error(stub.GetTask(get_task(), metadata=wrong)) for _ in range(300)))
    codes = Counter(error.code() for error in errors)
    assert codes == {grpc.StatusCode.UNAUTHENTICATED: 5, RESOURCE_EXHAUSTED: 295}
    throttled = next(error for error in errors if error.code() == RESOURCE_EXHAUSTED)
    assert_error(throttled, RESOURCE_EXHAUSTED, "RATE_LIMITED", limit="5", scope="authentication-failures")
    assert 0 < retry_delay(throttled) <= 0.2
    served = await rpc_error(stub.GetTask(get_task(), metadata=ALICE))
    assert served.code() == grpc.StatusCode.NOT_FOUND, "a valid credential is never throttled"
    now[0] += retry_delay(throttled)
    again = await rpc_error(stub.GetTask(get_task(), metadata=wrong))
    assert again.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_one_address_throttled_for_bad_tokens_still_serves_every_valid_token_from_it(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 14: behind a NAT, a proxy or a mesh sidecar every caller has one address. Bad tokens on one connection
    until the address is throttled; then every call with a valid token, on another connection from that address,
    is served, while the bad tokens stay throttled."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    server = await start_server(bearer_tokens=TOKENS, max_auth_failures_per_second=2)
    server.limits.clock = lambda: 1000.0  # the address's budget does not refill during the test
    wrong = bearer("guessed")
    async with (
        grpc.aio.insecure_channel(server.grpc_target, options=NEW_CONNECTION) as guessing,
        grpc.aio.insecure_channel(server.grpc_target, options=NEW_CONNECTION) as valid,
    ):
        guesser, caller = make_stub(guessing), make_stub(valid)
        codes = [(await rpc_error(guesser.GetTask(get_task(), metadata=wrong))).code() for _ in range(3)]
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 2 + [RESOURCE_EXHAUSTED]
        for _ in range(20):
            served = await rpc_error(caller.GetTask(get_task(), metadata=ALICE))
            assert served.code() == grpc.StatusCode.NOT_FOUND, served.details()
            throttled = await rpc_error(guesser.GetTask(get_task(), metadata=wrong))
            assert_error(throttled, RESOURCE_EXHAUSTED, "RATE_LIMITED", scope="authentication-failures")
    lines = [record.getMessage() for record in caplog.records if record.name == ACCESS_LOGGER]
    peers = {("alice" in line, peer) for line in lines for peer in PEER.findall(line)}
    assert len(peers) == 2, f"one connection each: {peers}"
    (_, one), (_, other) = peers
    assert one != other and one.rpartition(":")[0] == other.rpartition(":")[0] == "ipv4:127.0.0.1"


def test_the_throttle_counts_each_address_apart_whatever_its_port() -> None:
    limits = Limits(auth_failures_per_second=2)
    now = [50.0]
    limits.clock = lambda: now[0]
    for port in (1001, 1002):
        limits.auth_failed(f"ipv4:127.0.0.9:{port}")
    with pytest.raises(RateLimitedError):
        limits.auth_failed("ipv4:127.0.0.9:1003")
    limits.auth_failed("ipv4:127.0.0.8:1001")  # another address: untouched
    limits.auth_failed("ipv6:%5B::1%5D:1001")
