"""Issue 29, finding 13: rates a token bucket cannot hold are refused at start. `--max-requests-per-second 1e-300`
once started, and once a caller's bucket was empty every call got UNKNOWN ("Unexpected OverflowError") with a
traceback, while the access log said RESOURCE_EXHAUSTED. Now: one line and exit status 2 from serve, ValueError
from Limits, and no retry delay whatever can break the RetryInfo a refusal carries."""

from __future__ import annotations

import math
from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer, rich_status
from google.rpc import error_details_pb2
from process import free_port, run_serve
from rpc_helpers import Clients, assert_error, rpc_error

from a2a_grpc.errors import MAX_RETRY_NANOSECONDS, RateLimitedError, error_from_status, status_trailers
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server.limits import Limits
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.setting_types import MAX_RATE, MIN_RATE

UNHOLDABLE = [1e-300, 1e-20, MIN_RATE / 2, math.nan, math.inf, -1.0, MAX_RATE]
RATE_FLAGS = ("--max-requests-per-second", "--max-auth-failures-per-second")


@pytest.mark.parametrize(
    ("flag", "rate"),
    [(RATE_FLAGS[0], "1e-300"), (RATE_FLAGS[0], "nan"), (RATE_FLAGS[1], "1e-20"), (RATE_FLAGS[1], "inf")],
)
def test_tiny_rates_stop_serve_with_one_line(tmp_path: Path, flag: str, rate: str) -> None:
    args = ["--listen", f"127.0.0.1:{free_port()}", "--http-listen", "", "--store", "memory", flag, rate]
    done = run_serve(args, cwd=tmp_path)
    assert done.returncode == 2
    [told] = done.stderr.splitlines()
    assert told.startswith("a2a-grpc:") and flag in told and rate in told, told


@pytest.mark.parametrize("rate", UNHOLDABLE, ids=str)
def test_tiny_rates_are_refused_by_limits(rate: float) -> None:
    with pytest.raises(ValueError, match="requests_per_second"):
        Limits(requests_per_second=rate)
    with pytest.raises(ValueError, match="auth_failures_per_second"):
        Limits(auth_failures_per_second=rate)
    with pytest.raises(ValueError, match="requests_per_second"):
        A2AServer(ServerSettings(max_requests_per_second=rate, store_url="memory"))


def test_tiny_rates_the_bounds_and_no_limit_are_held() -> None:
    Limits(requests_per_second=MIN_RATE, auth_failures_per_second=0)
    Limits(requests_per_second=0, auth_failures_per_second=MAX_RATE / 2)


@pytest.mark.parametrize("delay", [math.inf, math.nan, 1e300, 1e20, -1.0], ids=str)
def test_tiny_rates_no_retry_delay_breaks_the_retry_info(delay: float) -> None:
    sent = RateLimitedError("slow down", retry_delay=delay)
    received = error_from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "", status_trailers(sent))
    assert isinstance(received, RateLimitedError) and received.retry_delay is not None
    assert 0 <= received.retry_delay <= MAX_RETRY_NANOSECONDS / 1e9


async def test_tiny_rates_the_smallest_rate_refuses_with_a_retry_info(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(max_requests_per_second=MIN_RATE)
    stub = clients.stub(server)
    request = a2a_pb2.GetTaskRequest(id="no-such-task")
    assert (await rpc_error(stub.GetTask(request, metadata=V1))).code() == grpc.StatusCode.NOT_FOUND  # its one token
    refused = await rpc_error(stub.GetTask(request, metadata=V1))
    assert_error(refused, grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")
    [retry] = [detail for detail in rich_status(refused).details if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    info = error_details_pb2.RetryInfo()
    retry.Unpack(info)
    assert info.retry_delay.seconds == pytest.approx(1 / MIN_RATE, rel=1e-3)
