"""The webhook of the push.* cases: `python -m bench.push_receiver --token TOKEN` (an aiohttp server).

Listens on a free loopback port, prints READY_PREFIX + port, serves until SIGTERM. Runs on uvloop when it is
installed, like our server.

  POST /notify         a push notification: keeps its arrival time (time.time_ns(), taken as the handler starts,
                       the clock the server stamps status updates with) and its body, answers 200 at once; the
                       body is only looked at later, off the hot path
  GET  /bench/progress {"received": N, "finished_tasks": N}: parses what came since the last look
  GET  /bench/summary  every figure the bench reports (see Notifications.summary)
  POST /bench/reset    forget everything received (before the next measurement)
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time
from typing import Any

from aiohttp import web
from google.protobuf import json_format

from a2a_grpc.cli import run_async
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push import TOKEN_HEADERS
from bench.protocol import serve_until_signalled

NOTIFY_PATH = "/notify"
FINAL_STATES = frozenset(
    {
        a2a_pb2.TaskState.TASK_STATE_COMPLETED,
        a2a_pb2.TaskState.TASK_STATE_FAILED,
        a2a_pb2.TaskState.TASK_STATE_CANCELED,
        a2a_pb2.TaskState.TASK_STATE_REJECTED,
    }
)


class Notifications:
    """What the receiver got: raw arrivals, parsed on demand (each body once)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.reset()

    def reset(self) -> None:
        self.arrivals: list[tuple[int, bytes]] = []  # (time.time_ns() at arrival, body), not parsed yet
        self.received = 0
        self.bad_token = 0
        self.malformed = 0
        self.duplicates = 0
        self.artifact_updates = 0
        self.seen: set[bytes] = set()  # distinct bodies: one event delivered twice comes with the same body
        self.events_per_task: dict[str, int] = {}  # distinct notifications of each task
        self.finished: set[str] = set()  # tasks whose final status arrived
        # Distinct status updates: (status timestamp in ns, arrival in ns, final state or not)
        self.statuses: list[tuple[int, int, bool]] = []
        self.first_arrival_ns = 0
        self.last_arrival_ns = 0

    def arrived(self, arrival_ns: int, body: bytes, token: str | None) -> None:
        self.received += 1
        if token != self.token:
            self.bad_token += 1
        self.arrivals.append((arrival_ns, body))

    def parse(self) -> None:
        """Take in what arrived since the last call."""
        arrivals, self.arrivals = self.arrivals, []
        for arrival_ns, body in arrivals:
            self.first_arrival_ns = min(self.first_arrival_ns or arrival_ns, arrival_ns)
            self.last_arrival_ns = max(self.last_arrival_ns, arrival_ns)
            if body in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(body)
            try:
                event = json_format.Parse(body, a2a_pb2.StreamResponse())
            except (json_format.ParseError, UnicodeDecodeError):
                self.malformed += 1
                continue
            kind = event.WhichOneof("payload")
            if kind == "status_update":
                task_id = event.status_update.task_id
                status = event.status_update.status
                final = status.state in FINAL_STATES
                self.statuses.append((status.timestamp.ToNanoseconds(), arrival_ns, final))
                if final:
                    self.finished.add(task_id)
            elif kind == "artifact_update":
                task_id = event.artifact_update.task_id
                self.artifact_updates += 1
            elif kind == "task":
                task_id = event.task.id
                if event.task.status.state in FINAL_STATES:
                    self.finished.add(task_id)
            else:
                self.malformed += 1
                continue
            self.events_per_task[task_id] = self.events_per_task.get(task_id, 0) + 1

    def progress(self) -> dict[str, int]:
        self.parse()
        return {"received": self.received, "finished_tasks": len(self.finished)}

    def summary(self) -> dict[str, Any]:
        self.parse()
        histogram: dict[int, int] = {}
        for count in self.events_per_task.values():
            histogram[count] = histogram.get(count, 0) + 1
        return {
            "received": self.received,
            "distinct": len(self.seen),
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "bad_token": self.bad_token,
            "artifact_updates": self.artifact_updates,
            "tasks": len(self.events_per_task),
            "finished_tasks": len(self.finished),
            "events_per_task": {str(k): v for k, v in sorted(histogram.items())},
            "statuses": self.statuses,
            "first_arrival_ns": self.first_arrival_ns,
            "last_arrival_ns": self.last_arrival_ns,
        }


def make_app(notifications: Notifications) -> web.Application:
    async def notify(request: web.Request) -> web.Response:
        arrival_ns = time.time_ns()
        body = await request.read()
        notifications.arrived(arrival_ns, body, request.headers.get(TOKEN_HEADERS[0]))
        return web.Response()

    async def progress(request: web.Request) -> web.Response:
        return web.json_response(notifications.progress())

    async def summary(request: web.Request) -> web.Response:
        return web.json_response(notifications.summary())

    async def reset(request: web.Request) -> web.Response:
        notifications.reset()
        return web.json_response({})

    app = web.Application()
    app.router.add_post(NOTIFY_PATH, notify)
    app.router.add_get("/bench/progress", progress)
    app.router.add_get("/bench/summary", summary)
    app.router.add_post("/bench/reset", reset)
    return app


async def serve(token: str) -> int:
    runner = web.AppRunner(make_app(Notifications(token)), access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # loopback only
    await web.SockSite(runner, sock, backlog=1024).start()
    return await serve_until_signalled(sock.getsockname()[1], runner.cleanup)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--token", required=True, help="the notification token every push config carries")
    args = parser.parse_args(argv)
    return run_async(serve(args.token))


if __name__ == "__main__":
    sys.exit(main())
