"""A server stays up whatever its clients cut: a storm of calls cut at random moments (streams cancelled before
or after some events, subscriptions cancelled, unary calls with 1-5 ms deadlines, a channel closed under its
calls) against real `a2a-grpc serve` processes, each with a feature on that ends calls: the text access log
(the default), the JSON access log on SQLite, /metrics scraped throughout.

Before the call's end stopped reading the grpc context, the first of these died of a segmentation fault
within a round or two: the access log asked a cancelled call for its peer (a2a_grpc.arrival)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2
from bench.chaos.agent import ECHO
from bench.chaos.ledger import Caller, Ledger
from bench.chaos.legacy import LEGACY_CUT_OPERATIONS
from bench.chaos.rounds import ScenarioRun
from bench.chaos.scenarios import V1, Scenario, anonymous
from bench.chaos.workload import CUT_OPERATIONS, stub_of, text_message

STORM_ROUNDS = 40  # of 60 cut calls each
SEED = 7


def json_access_log(_: Path) -> tuple[list[str], list[Caller]]:
    return ["--log-format", "json"], [Caller("anonymous", (V1,))]


SERVERS = {
    "text access log": Scenario("storm-text-log", anonymous, operations=CUT_OPERATIONS + LEGACY_CUT_OPERATIONS),
    "JSON access log on SQLite": Scenario("storm-json-log", json_access_log, operations=CUT_OPERATIONS),
    "metrics scraped": Scenario("storm-metrics", anonymous, scrape_metrics=True, operations=CUT_OPERATIONS),
}


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_a_storm_of_cut_calls_leaves_the_server_alive_serving_and_answering(server: str, tmp_path: Path) -> None:
    ledger = Ledger()
    storm = ScenarioRun(SERVERS[server], SEED, tmp_path, ledger)
    await storm.start()
    try:
        for number in range(STORM_ROUNDS):
            await storm.round(number)  # after each: alive, SERVING, nothing unhandled in its log
        (target,) = (s.target for s in storm.servers)
        async with grpc.aio.insecure_channel(target) as channel:
            request = a2a_pb2.SendMessageRequest(message=text_message(ECHO))
            answer = await stub_of(channel).SendMessage(request, metadata=(V1,), timeout=30)
        assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    finally:
        await storm.stop()  # SIGTERM: it must exit 0
    assert ledger.violations == []
    assert ledger.cuts > STORM_ROUNDS * 30
