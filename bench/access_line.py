"""In-process microbenchmark of one access line: `python -m bench.access_line [--format FORMAT] [-n N]`.

Writes N lines of a SendMessage call (as the bench's echo agent answers it) through `AccessLog.write`,
the way `a2a-grpc serve` configures logging (a StreamHandler with the TextFormatter, or with `--log-format
json` the JsonFormatter; `text-record`: the same text lines through a plain logging.Formatter, as an
application's own handler has them), to /dev/null, inside a running event loop as a server does (lines are
then made and written in batches, but for text-record's), and prints the microseconds each line took, best of a few rounds, its flush
included. With --no-handler, the logger is enabled but has no handler (what is left: the AccessLog's own
work).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import Callable

from a2a_grpc.arrival import Arrival
from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.telemetry import ACCESS_LOGGER, AccessLog, JsonFormatter, TextFormatter
from a2a_grpc.telemetry.logs import TEXT_FORMAT
from a2a_grpc.telemetry.outcome import OK

FORMATTERS: dict[str, Callable[[], logging.Formatter]] = {
    "json": JsonFormatter,  # `a2a-grpc serve --log-format json`
    "text": TextFormatter,  # `a2a-grpc serve`
    "text-record": lambda: logging.Formatter(TEXT_FORMAT),  # the same lines, through an application's formatter
}


def per_line_us(log_format: str, lines: int, handler: bool = True, rounds: int = 5) -> float:
    """The best round's microseconds per access line."""
    logger = logging.getLogger(ACCESS_LOGGER)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    sink = open("/dev/null", "w")  # noqa: SIM115 - closed below
    stream = logging.StreamHandler(sink)
    stream.setFormatter(FORMATTERS[log_format]())
    if handler:
        logger.addHandler(stream)
    try:
        access = AccessLog(logger)
        response = a2a_pb2.SendMessageResponse()
        response.task.id = "8f2b7a4e-5c1d-4e8a-9b3f-2d6c0a1e7f45"
        response.task.context_id = "1c9e4d2a-7b3f-4a6e-8d5c-0f2e1b3a9c87"
        return asyncio.run(_best_round(access, response.SerializeToString(), lines, rounds)) / lines * 1e6
    finally:
        logger.removeHandler(stream)
        sink.close()


async def _best_round(access: AccessLog, response: bytes, lines: int, rounds: int) -> float:
    """The seconds the fastest round took to log `lines` calls answered `response` (encoded, as servers send it)."""
    call = CallContext(method="SendMessage", principal="alice")
    arrival = Arrival(peer="ipv4:127.0.0.1:53124")
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(lines):
            access.write("SendMessage", arrival, call, OK, 0.000873, response, None)
        access.flush()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--format", choices=sorted(FORMATTERS), default="json")
    parser.add_argument("-n", type=int, default=20_000, help="lines per round (default 20000)")
    parser.add_argument("--no-handler", action="store_true", help="no handler: the AccessLog's own work only")
    args = parser.parse_args(argv)
    us = per_line_us(args.format, args.n, handler=not args.no_handler)
    print(f"{us:.2f} us per access line ({args.format}{', no handler' if args.no_handler else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
