"""The bench's results: the printed table, the side-by-side ratios, the targets, the JSON file."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.http_report import http_ratios, http_targets

Record = dict[str, Any]

NOTES = (
    "Every server runs in its own process on 127.0.0.1; load comes from closed-loop grpc.aio worker "
    "processes using our generated stubs; only calls that complete inside the measurement window count.",
    "send cases at one concurrency are measured together: every send server runs at once and the load moves "
    "from one to the next in turns of a fraction of a second (after a settling pause), every other cycle in "
    "reverse order. A ratio between two send cases is the median of their per-cycle ratios over every run "
    "(each on fresh server processes, since one process may run a few percent faster than the next), so a "
    "neighbour's burst or the machine's drift, which lasts seconds, weighs on both sides alike; the quartiles "
    "of the per-cycle ratios show how steady it was. Other ratios divide the median runs of their cases.",
    "server CPU is the CPU time of the server process (all threads, to the nanosecond) over the window, per "
    "request (or per event); 'srv cores', 'load cores' (the load workers) and 'other' (every other process on "
    "the machine, from /proc/stat) are CPU-seconds per second (1.00 = one core busy); a busy 'other' means a "
    "noisy neighbour. The servers run on one half of the CPUs and the load workers on the other (unless "
    "--no-pin), so that a server's figures do not follow how the scheduler happens to share the cores out.",
    "ext = the card declares one REQUIRED extension and every call requests it (a2a-extensions), so the "
    "extension interceptor negotiates, activates and echoes it (in the trailers, the default for unary calls; "
    "ext-headers echoes in the response headers too, as `--unary-echo headers` does). "
    "noext = the same server with negotiate_extensions=False (the interceptor is not in the chain), no "
    "extension declared and no header sent. Everything else (version check, validation, store, agent) is "
    "identical, so the extension overhead (1 - ext/noext in requests/s, ext/noext - 1 in server CPU per "
    "request) is what the whole extension feature costs per call. The stream, fanout and memory cases run our "
    "server as configured by default (interceptor on, no extension declared).",
    "our servers (but for the telemetry.* cases, which set the access log themselves) run as `a2a-grpc serve` "
    "runs by default: logging set up as serve sets it up, the access log on, its text lines on stderr, which the "
    "bench writes to a file.",
    "bare = a grpc.aio servicer returning a prebuilt Task (no interceptors, checks, store or agent): the "
    "ceiling for Python on this machine, and the load generator's own ceiling.",
    "sdk = the reference a2a-sdk gRPC server (GrpcHandler + DefaultRequestHandler + InMemoryTaskStore) with "
    "an echo agent, in its own venv, driven with the same load generator and the same wire.",
)
REPLICA_NOTES = (
    "replicas.send.{sqlite,pg,pg-workers2} = our server as in send.sqlite.noext (echo agent, no extension "
    "interceptor) on SQLite, on PostgreSQL, and as `--workers 2` on PostgreSQL (a supervisor and two worker "
    "processes sharing the port, a2a_grpc.workers), each driven over 8 connections per load process (the "
    "kernel spreads connections between the workers, not calls; the count each worker got is shown). The "
    "server side of these cases (the server's processes, workers included, and the PostgreSQL cluster, whose "
    "backends inherit its CPUs) runs on the servers' CPUs (unless --no-pin); srv cores/us are the server's whole process tree; "
    "PostgreSQL's CPU is shown apart and is not in 'other'. The bench's PostgreSQL commits without waiting "
    "for the disk (synchronous_commit=off), as the SQLite store does (WAL, synchronous=NORMAL).",
    "replicas.subscribe = two server processes on one PostgreSQL database: the tick agent on one publishes an "
    "artifact chunk every 10 ms (100 events/s), stamped with the moment it publishes it (CLOCK_MONOTONIC, one "
    "clock for the machine); one SubscribeToTask on the other server, with stream-resume on, receives them. "
    "p50/p99 are publishing -> arrival (the store commit, NOTIFY, the other replica's read of the log and the "
    "stream) over the measured round, after a warm-up round; every event must arrive once, numbered one after "
    "the other, in order.",
)
PUSH_NOTES = (
    "push.send.sqlite = our server as in send.sqlite.noext (echo agent, SQLite, no extension interceptor; its card "
    "declares pushNotifications, with 127.0.0.1 and plain http allowed as webhook destinations), each SendMessage "
    "carrying one push config (configuration.task_push_notification_config: url and token) that names the bench's "
    "webhook receiver, so that the server stores the config with the task and POSTs each of the task's events "
    "(the artifact, then the COMPLETED status: 2 notifications per task) to it. push.send.sqlite.off = the "
    "identical server and messages without the config: the ratio between the two, measured in the same "
    "interleaved turns, is what push costs. srv us/op are the server's CPU in its own turns; 'whole job' divides "
    "the server's CPU from the first call to the last notification (the deliveries that spill past its turns "
    "included) by the calls that succeeded.",
    "The push receiver is an aiohttp server in a process of its own on 127.0.0.1 (on the load workers' CPUs "
    "unless --no-pin: like the load generator it stands for the world outside the server), answering 200 with "
    "no body at once; it only keeps each notification's arrival and body, and parses them (ProtoJSON, checked "
    "against StreamResponse) after the load. Its CPU is counted apart (receiver cores, us per notification), "
    "not in 'other'.",
    "Delivery latency = the notification's arrival at the receiver (time.time_ns() as its handler starts) - the "
    "timestamp of the COMPLETED status it carries (status.timestamp, stamped by the server with time.time_ns() "
    "when the agent completed the task, just before the write that stores the event): one clock, the machine's. "
    "It covers the store commit, the push worker's claim and read of the event log, the artifact's notification "
    "before it (in order) and the POST. p50/p99 are over the tasks completed inside the server's counted turns. "
    "After the load stops, the bench waits until every task's COMPLETED status arrived (at most 120 s, or until "
    "nothing came for 10 s), then counts: tasks notified of the calls that succeeded, distinct notifications of "
    "the 2 owed per task ('missing' = the shortfall), duplicates (the same body again: delivery is at least "
    "once), bodies that are no StreamResponse, wrong tokens.",
)
TELEMETRY_NOTES = (
    "telemetry.send.* = our server as in send.memory.noext (echo agent, memory store, no extension interceptor), "
    "measured at the highest --concurrency only, side by side: off = access log, metrics and tracing off; on = "
    "the access log written as in production (INFO on the a2a_grpc.access logger, JSON lines through a "
    "logging.FileHandler and JsonFormatter to a file) and the Prometheus metrics counted; tracing = those and an "
    "OpenTelemetry span per call (the SDK's TracerProvider, OTEL_TRACES_EXPORTER=none: made and ended, exported "
    "nowhere). The ratios on/off and tracing/off, from the same interleaved turns, are what they cost.",
)
FACE_NOTES = (
    "send.memory.v03 = a server identical to send.memory.ext's (echo agent declaring the required extension, "
    "memory store; a process of its own) called on its A2A 0.3 face, a2a.v1.A2AService/SendMessage on the same "
    "port as its 1.0 face: a 0.3 SendMessageRequest (the "
    "message in `request`, its text in `content`, no configuration, so the call waits for the task), no "
    "a2a-version header, the extension requested in x-a2a-extensions as the 0.3 SDKs do. The server admits it "
    "through the same interceptor chain, translates it to 1.0, calls the 1.0 servicer and translates the answer "
    "back. send.memory.v03-noext = the same with send.memory.noext's settings (no extension interceptor, no "
    "extension header). The ratios v03/ext and v03-noext/noext, from the same interleaved turns, are what the "
    "0.3 face costs against the 1.0 face on identical servers.",
)
AUTH_NOTES = (
    "auth.send.* = our server as in send.memory.noext (echo agent, memory store, no extension interceptor), "
    "measured at the highest --concurrency only, side by side: plain = plaintext, no authentication; jwt = every "
    "call must carry a JWT (authorization: Bearer, ES256, checked against the PEM public key of --jwt-key, its "
    "iss and aud required): the load sends one token, valid for a day, so the server checks its signature once "
    "and then finds it in its cache of accepted tokens; tls = the port speaks TLS (--tls-cert, --tls-key: a P-256 "
    "certificate for 127.0.0.1 issued by a CA made for the run, the only one the load trusts), each connection "
    "of the load shaking hands once. The keys, certificates and token are made in the run's scratch directory. "
    "Before the load, every run checks that its jwt server refuses a call without the token (UNAUTHENTICATED) "
    "and its tls server a plaintext call (UNAVAILABLE). The ratios jwt/plain and tls/plain, from the same "
    "interleaved turns, are what they cost.",
)


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


NAME_WIDTH = 28  # replicas.send.pg-workers2@64
HEADER = (
    f"{'case':<{NAME_WIDTH}} {'conc':>5} {'rate':>10} {'unit':<9} {'p50 ms':>8} {'p99 ms':>8} "
    f"{'srv us/op':>10} {'srv cores':>9} {'load cores':>10} {'other':>6} {'errors':>6}"
)


def row(r: Record) -> list[str]:
    """The table line(s) of one record."""
    name = r["family"]
    if "skipped" in r or "failed" in r:
        word = "SKIPPED" if "skipped" in r else "FAILED"
        return [f"{name:<{NAME_WIDTH}} {_fmt(r.get('concurrency')):>5} {word}: {r.get('skipped') or r.get('failed')}"]
    if r["kind"] == "memory":
        return [
            f"{name:<{NAME_WIDTH}} {_fmt(r['concurrency']):>5} {_fmt(r['rate']):>10} {r['unit']:<9} "
            f"RSS idle {r['rss_idle_mb']:.1f} MiB, after {r['completed']:,} tasks {r['rss_after_mb']:.1f} MiB "
            f"({_fmt(r['bytes_per_task'])} B/task), listed {r['tasks_listed']:,}, errors {r['errors']}"
        ]
    if r["kind"] == "readload":
        return [
            f"{name:<{NAME_WIDTH}} {_fmt(r['concurrency']):>5} {_fmt(r['rate']):>10} {r['unit']:<9} "
            f"{_fmt(r['list_p50_ms'], 2):>8} {_fmt(r['list_p99_ms'], 2):>8}  errors {r['errors']}",
            f"{'':<{NAME_WIDTH}}   readiness: {r['not_serving']} NOT_SERVING, {r['health_failed']} unanswered of "
            f"{r['polls']} polls; health p50 {_fmt(r['health_p50_ms'], 2)} ms, p99 {_fmt(r['health_p99_ms'], 2)} ms, "
            f"max {_fmt(r['health_max_ms'], 1)} ms; GetTask p50 {_fmt(r['get_p50_ms'], 2)} ms, "
            f"p99 {_fmt(r['get_p99_ms'], 2)} ms",
            *([f"{'':<{NAME_WIDTH}}   first error: {r['first_error']}"] if r["errors"] else []),
        ]
    lines = [
        f"{name:<{NAME_WIDTH}} {_fmt(r['concurrency']):>5} {_fmt(r['rate']):>10} {r['unit']:<9} "
        f"{_fmt(r['p50_ms'], 2):>8} {_fmt(r['p99_ms'], 2):>8} {_fmt(r['server_cpu_us']):>10} "
        f"{_fmt(r['server_cpu_cores'], 2):>9} {_fmt(r['load_cpu_cores'], 2):>10} "
        f"{_fmt(r['other_cpu_cores'], 2):>6} {r['errors']:>6}"
    ]
    details = _details(r)
    if details:
        lines.append(f"{'':<{NAME_WIDTH}}   {'; '.join(details)}")
    if r["errors"]:
        lines.append(f"{'':<{NAME_WIDTH}}   first error: {r['first_error']}")
    return lines


def _details(r: Record) -> list[str]:
    """What a replicas or push case shows besides the columns."""
    details = []
    if "push_expected" in r:
        drain = r["push_drain_seconds"]
        details.append(
            f"push: {r['push_notified_tasks']:,} of {r['push_expected_tasks']:,} tasks notified, "
            f"{r['push_distinct']:,} of {r['push_expected']:,} notifications ({r['push_missing']} missing, "
            f"{r['push_duplicates']} duplicates); delivery p50 {r['push_p50_ms']:.2f} ms, p99 "
            f"{r['push_p99_ms']:.2f} ms, max {r['push_max_ms']:.1f} ms; last one "
            + ("-" if drain is None else f"{drain:+.2f} s")
            + " after its last turn"
        )
        if r["push_malformed"] or r["push_bad_token"] or r["push_failed_calls"]:
            details.append(
                f"push: {r['push_malformed']} malformed, {r['push_bad_token']} with a wrong token, "
                f"{r['push_failed_calls']} calls failed"
            )
    if r["family"].startswith("push.") and "server_cpu_us_whole" in r:
        receiver = f"receiver {r.get('receiver_cpu_cores', 0.0):.2f} cores in its turns"
        if r.get("receiver_cpu_us") is not None:
            receiver += f", {r['receiver_cpu_us']:.0f} us/notification"
        details.append(f"server {_fmt(r['server_cpu_us_whole'])} us/req over the whole job; {receiver}")
    if r.get("unsecured_call") is not None:
        details.append(f"a call without credentials refused: {r['unsecured_call']}")
    if r.get("access_log_lines") is not None:
        details.append(f"access log: {r['access_log_lines']:,} JSON lines written this run")
    if r.get("db_cpu_cores") is not None:
        details.append(f"PostgreSQL {r['db_cpu_cores']:.2f} cores, {_fmt(r['db_cpu_us'])} us/op")
    if "connections_per_worker" in r:
        details.append(f"connections per worker {'+'.join(map(str, r['connections_per_worker']))}")
    if r["kind"] == "replica":
        details.append(
            f"{r['completed']:,} of {r['expected_events']:,} events published at {r['target_rate']:.0f}/s arrived, "
            f"{r['seq_gaps']} seq gaps, {r['out_of_order']} out of order"
        )
    return details


def table(records: Iterable[Record]) -> str:
    lines = [HEADER, "-" * len(HEADER)]
    for r in records:
        lines += row(r)
    return "\n".join(lines)


CYCLE_FIGURES = {"rate": "cycle_rates", "server_cpu_us": "cycle_cpu_us"}


def _paired(records: dict[str, Record], top: str, bottom: str, figure: str = "rate") -> list[float]:
    """`top` / `bottom` of `figure` (rate or server_cpu_us): one ratio per cycle when both cases were measured
    in the same interleaved cycles, else the one ratio of their figures; none when either is missing."""
    a, b = records.get(top, {}), records.get(bottom, {})
    cycles = CYCLE_FIGURES[figure]
    if cycles in a and cycles in b and len(a[cycles]) == len(b[cycles]):
        pairs = list(zip(a[cycles], b[cycles], strict=True))
    else:
        pairs = [(a.get(figure), b.get(figure))]
    return [x / y for x, y in pairs if x and y]


def _ratio(records: dict[str, Record], top: str, bottom: str) -> float | None:
    values = _paired(records, top, bottom)
    return statistics.median(values) if values else None


def _entry(label: str, values: list[float], percent: bool = False) -> Record:
    """A ratio: the median of its values, and their quartiles when there are several."""
    entry: Record = {"ratio": label, "value": statistics.median(values) if values else None, "percent": percent}
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        entry["quartiles"] = [q1, q3]
    return entry


def _overheads(records: dict[str, Record], store: str, c: int, variant: str = "ext") -> list[Record]:
    """What the extensions cost send.{store}.{variant} against noext: requests/s lost, server CPU per request added."""
    ext, noext = f"send.{store}.{variant}@{c}", f"send.{store}.noext@{c}"
    lost = [1 - r for r in _paired(records, ext, noext)]
    added = _added_cpu(records, ext, noext)
    return [
        _entry(f"extension overhead send.{store}@{c} (1 - {variant}/noext)", lost, percent=True),
        _entry(f"extension overhead send.{store}@{c}, server CPU ({variant}/noext - 1)", added, percent=True),
    ]


def _added_cpu(records: dict[str, Record], ext: str, noext: str) -> list[float]:
    return [r - 1 for r in _paired(records, ext, noext, "server_cpu_us")]


def ratios(records: list[Record], concurrencies: list[int]) -> list[Record]:
    by_name = {r["name"]: r for r in records}
    out: list[Record] = []
    for c in concurrencies:
        for store in ("memory", "sqlite"):
            for ext in ("ext", "noext"):
                ours = f"send.{store}.{ext}@{c}"
                out.append(_entry(f"{ours} / sdk", _paired(by_name, ours, f"send.sdk@{c}")))
                out.append(_entry(f"{ours} / bare", _paired(by_name, ours, f"send.bare@{c}")))
            out += _overheads(by_name, store, c)
        out += _overheads(by_name, "memory", c, "ext-headers")
        out.append(_entry(f"send.sdk@{c} / bare", _paired(by_name, f"send.sdk@{c}", f"send.bare@{c}")))
        out.append(_entry(f"send.bare-asks@{c} / bare", _paired(by_name, f"send.bare-asks@{c}", f"send.bare@{c}")))
        interceptor = f"send.bare.interceptor@{c}"
        out.append(_entry(f"{interceptor} / bare", _paired(by_name, interceptor, f"send.bare@{c}")))
        out += _replica_ratios(by_name, c)
        out += _push_ratios(by_name, c)
        out += _telemetry_ratios(by_name, c)
        out += _auth_ratios(by_name, c)
        out += _face_ratios(by_name, c)
        out += http_ratios(by_name, c, _entry, _paired)
    for top, bottom in (
        ("stream.ours", "stream.sdk"),
        ("stream.ours", "stream.bare"),
        ("stream.sdk", "stream.bare"),
        ("fanout.ours", "fanout.sdk"),
    ):
        out.append(_entry(f"{top} / {bottom}", _paired(by_name, top, bottom)))
    c = max(concurrencies)
    for ours, other in (
        (f"send.memory.ext@{c}", f"send.sdk@{c}"),
        (f"send.memory.noext@{c}", f"send.sdk@{c}"),
        (f"send.sqlite.ext@{c}", f"send.sdk@{c}"),
        (f"send.memory.noext@{c}", f"send.bare@{c}"),
        ("stream.ours", "stream.sdk"),
        ("stream.ours", "stream.bare"),
        ("fanout.ours", "fanout.sdk"),
    ):
        # how many times more server CPU per request (or event) `other` spends than `ours`
        spent = _paired(by_name, other, ours, "server_cpu_us")
        out.append(_entry(f"server CPU per op: {other} / {ours}", spent))
    return [r for r in out if r["value"] is not None]


PUSH_ON, PUSH_OFF = "push.send.sqlite", "push.send.sqlite.off"
PUSH_FLOOR = 0.7


def _push_ratios(records: dict[str, Record], c: int) -> list[Record]:
    on, off = f"{PUSH_ON}@{c}", f"{PUSH_OFF}@{c}"
    whole = [records.get(n, {}).get("server_cpu_us_whole") for n in (on, off)]
    return [
        _entry(f"{on} / off", _paired(records, on, off)),
        _entry(f"push overhead {PUSH_ON}@{c}, server CPU (push/off - 1)", _added_cpu(records, on, off), percent=True),
        _entry(
            f"push overhead {PUSH_ON}@{c}, server CPU over the whole job (push/off - 1)",
            [whole[0] / whole[1] - 1] if whole[0] and whole[1] else [],
            percent=True,
        ),
    ]


def _push_targets(records: dict[str, Record], c: int) -> list[Record]:
    out: list[Record] = []
    value = _ratio(records, f"{PUSH_ON}@{c}", f"{PUSH_OFF}@{c}")
    if value is not None:
        out.append(
            {"target": f"{PUSH_ON}@{c} >= {PUSH_FLOOR}x {PUSH_OFF}@{c}", "value": value, "met": value >= PUSH_FLOOR}
        )
    pushed = records.get(f"{PUSH_ON}@{c}", {})
    if "push_missing" in pushed:
        missing = max(pushed.get("push_missing_runs") or [pushed["push_missing"]])
        name = f"{PUSH_ON}@{c}: every notification owed delivered (all runs)"
        out.append({"target": name, "value": missing, "met": missing == 0, "unit": "missing"})
    return out


TELEMETRY_OFF, TELEMETRY_ON, TELEMETRY_TRACING = "telemetry.send.off", "telemetry.send.on", "telemetry.send.tracing"
TELEMETRY_FLOOR = 0.9


def _against_baseline(
    records: dict[str, Record], c: int, kind: str, baseline: tuple[str, str], compared: Iterable[tuple[str, str]]
) -> list[Record]:
    """Each of `compared` (a family and its label) against `baseline` at `c`: its rate ratio, and its server
    CPU per request on top of the baseline's, as the `kind` overhead."""
    base_family, base_label = baseline
    base = f"{base_family}@{c}"
    out = []
    for family, label in compared:
        name = f"{family}@{c}"
        out.append(_entry(f"{name} / {base_label}", _paired(records, name, base)))
        overhead = f"{kind} overhead {name}, server CPU ({label}/{base_label} - 1)"
        out.append(_entry(overhead, _added_cpu(records, name, base), True))
    return out


def _telemetry_ratios(records: dict[str, Record], c: int) -> list[Record]:
    compared = ((TELEMETRY_ON, "on"), (TELEMETRY_TRACING, "tracing"))
    return _against_baseline(records, c, "telemetry", (TELEMETRY_OFF, "off"), compared)


def _telemetry_targets(records: dict[str, Record], c: int) -> list[Record]:
    value = _ratio(records, f"{TELEMETRY_ON}@{c}", f"{TELEMETRY_OFF}@{c}")
    if value is None:
        return []
    name = f"{TELEMETRY_ON}@{c} >= {TELEMETRY_FLOOR}x {TELEMETRY_OFF}@{c}"
    return [{"target": name, "value": value, "met": value >= TELEMETRY_FLOOR}]


def telemetry_notes(records: list[Record], concurrencies: list[int]) -> list[str]:
    """The telemetry cases' server CPU per request, and what each call costs on top of `off`."""
    return _cpu_notes(records, max(concurrencies), (TELEMETRY_OFF, "off"), (TELEMETRY_ON, TELEMETRY_TRACING))


def _cpu_notes(records: list[Record], c: int, baseline: tuple[str, str], families: Iterable[str]) -> list[str]:
    """The server CPU per request of `baseline` (a family and its label) and `families` at `c`, and what each
    of `families` costs per call on top of the baseline's."""
    by_name = {r["name"]: r for r in records if "rate" in r}
    base, label = baseline
    base_us = by_name.get(f"{base}@{c}", {}).get("server_cpu_us")
    notes = []
    for family in (base, *families):
        r = by_name.get(f"{family}@{c}")
        if r is None:
            continue
        added = "" if family == base or not base_us else f" ({r['server_cpu_us'] - base_us:+.0f} us on {label}'s)"
        notes.append(
            f"{family}@{c}: {r['rate']:,.0f} req/s, server CPU per request {_fmt(r['server_cpu_us'])} us{added}"
        )
    return notes


AUTH_PLAIN = "auth.send.plain"
AUTH_FLOORS = (("auth.send.jwt", "jwt", 0.85), ("auth.send.tls", "tls", 0.7))  # family, label, target ratio


def _auth_ratios(records: dict[str, Record], c: int) -> list[Record]:
    compared = ((family, label) for family, label, _ in AUTH_FLOORS)
    return _against_baseline(records, c, "auth", (AUTH_PLAIN, "plain"), compared)


def _auth_targets(records: dict[str, Record], c: int) -> list[Record]:
    out: list[Record] = []
    for family, _, floor in AUTH_FLOORS:
        value = _ratio(records, f"{family}@{c}", f"{AUTH_PLAIN}@{c}")
        if value is not None:
            out.append({"target": f"{family}@{c} >= {floor}x {AUTH_PLAIN}@{c}", "value": value, "met": value >= floor})
    return out


def auth_notes(records: list[Record], concurrencies: list[int]) -> list[str]:
    """The auth cases' server CPU per request, and what each call costs on top of `plain`."""
    return _cpu_notes(records, max(concurrencies), (AUTH_PLAIN, "plain"), (family for family, _, _ in AUTH_FLOORS))


# the 0.3 face's send cases, each against the 1.0 case on an identical server: family, label, baseline, its label
FACE_PAIRS = (
    ("send.memory.v03", "v03", "send.memory.ext", "ext"),
    ("send.memory.v03-noext", "v03-noext", "send.memory.noext", "noext"),
)
FACE_FLOOR = 0.85


def _face_ratios(records: dict[str, Record], c: int) -> list[Record]:
    out: list[Record] = []
    for family, label, base, base_label in FACE_PAIRS:
        out += _against_baseline(records, c, "0.3 face", (base, base_label), ((family, label),))
    return out


def _face_targets(records: dict[str, Record], c: int) -> list[Record]:
    out: list[Record] = []
    for family, _, base, _ in FACE_PAIRS:
        value = _ratio(records, f"{family}@{c}", f"{base}@{c}")
        if value is not None:
            name = f"{family}@{c} >= {FACE_FLOOR}x {base}@{c}"
            out.append({"target": name, "value": value, "met": value >= FACE_FLOOR})
    return out


def face_notes(records: list[Record], concurrencies: list[int]) -> list[str]:
    """The 0.3 face's server CPU per request at full load, and what it costs on top of the 1.0 face's."""
    c = max(concurrencies)
    notes: list[str] = []
    for family, _, base, base_label in FACE_PAIRS:
        notes += _cpu_notes(records, c, (base, base_label), (family,))
    return notes


REPLICA_PAIRS = (
    ("replicas.send.pg", "replicas.send.sqlite", 0.6),
    ("replicas.send.pg-workers2", "replicas.send.pg", 1.3),
)


def _store_cpu_us(r: Record) -> float | None:
    """Server CPU per request, the database server's included."""
    if r.get("server_cpu_us") is None:
        return None
    return float(r["server_cpu_us"] + (r.get("db_cpu_us") or 0.0))


def _replica_ratios(records: dict[str, Record], c: int) -> list[Record]:
    out = []
    for top, bottom, _ in REPLICA_PAIRS:
        out.append(
            _entry(
                f"{top}@{c} / {bottom.removeprefix('replicas.send.')}", _paired(records, f"{top}@{c}", f"{bottom}@{c}")
            )
        )
    for top, bottom, _ in REPLICA_PAIRS:
        spent = [_store_cpu_us(records.get(f"{n}@{c}", {})) for n in (top, bottom)]
        values = [spent[0] / spent[1]] if spent[0] and spent[1] else []
        out.append(_entry(f"server+PostgreSQL CPU per op: {top}@{c} / {bottom.removeprefix('replicas.send.')}", values))
    return out


def _replica_targets(records: dict[str, Record], c: int) -> list[Record]:
    out: list[Record] = []
    for top, bottom, floor in REPLICA_PAIRS:
        value = _ratio(records, f"{top}@{c}", f"{bottom}@{c}")
        if value is not None:
            out.append({"target": f"{top}@{c} >= {floor}x {bottom}@{c}", "value": value, "met": value >= floor})
    ticks = records.get("replicas.subscribe", {})
    if "p99_ms" in ticks:
        name = f"replicas.subscribe p99 < 50 ms at {ticks['target_rate']:.0f} events/s, every event in order"
        met = ticks["p99_ms"] < 50 and not ticks["errors"]
        out.append({"target": name, "value": ticks["p99_ms"], "met": met, "unit": "ms"})
    return out


def targets(records: list[Record], concurrencies: list[int]) -> list[Record]:
    """The figures the server aims at, at the highest concurrency measured (64 in a full run)."""
    by_name = {r["name"]: r for r in records}
    c = max(concurrencies)
    out: list[Record] = []
    kept = _ratio(by_name, f"send.memory.ext@{c}", f"send.bare@{c}")
    if kept is not None:
        out.append({"target": f"send.memory.ext@{c} >= 0.75x bare", "value": kept, "met": kept >= 0.75})
    for store in ("memory", "sqlite"):
        added = _added_cpu(by_name, f"send.{store}.ext@{c}", f"send.{store}.noext@{c}")
        if added:
            name = f"extension overhead send.{store}@{c} < 5% (server CPU, ext/noext - 1)"
            value = statistics.median(added)
            out.append({"target": name, "value": value, "met": value < 0.05, "percent": True})
    out += _replica_targets(by_name, c) + _push_targets(by_name, c)
    out += _telemetry_targets(by_name, c) + _auth_targets(by_name, c) + _face_targets(by_name, c)
    return out + http_targets(by_name, c, _ratio)


def ceiling_note(records: list[Record], concurrencies: list[int]) -> str | None:
    bare = next((r for r in records if r["name"] == f"send.bare@{max(concurrencies)}" and "rate" in r), None)
    if bare is None:
        return None
    busy = bare["server_cpu_cores"]
    limit = (
        "the bare server was CPU-bound, so this is the server's ceiling"
        if busy >= 0.9
        else "the bare server was not CPU-bound, so the load generator (sharing the machine's cores) or too few "
        "callers (each waits for its answer) is the limit"
    )
    return (
        f"load generator ceiling: {bare['rate']:,.0f} req/s against the bare servicer at concurrency "
        f"{bare['concurrency']} (server {busy:.2f} cores, load workers {bare['load_cpu_cores']:.2f} cores); {limit}."
    )


NOISY_NEIGHBOUR_CORES = 0.2


def noise_note(records: list[Record]) -> str | None:
    """A warning when other processes used the machine's CPU during some cases."""
    noisy = [r for r in records if (r.get("other_cpu_cores") or 0) > NOISY_NEIGHBOUR_CORES]
    if not noisy:
        return None
    worst = max(noisy, key=lambda r: r["other_cpu_cores"])
    return (
        f"WARNING: other processes used more than {NOISY_NEIGHBOUR_CORES} cores during {len(noisy)} case(s) "
        f"(up to {worst['other_cpu_cores']:.2f} in {worst['name']}); those figures are noisy, run again on a quiet machine."
    )


def unsaturated_note(records: list[Record], concurrencies: list[int]) -> str | None:
    """Cases under full load whose server was not CPU-bound: their rate says more about the load
    generator (or the neighbours) than the server, and server CPU per op is the better comparison."""
    full_load = {f"send.{v}@{max(concurrencies)}" for v in ("bare", "sdk", "memory.ext", "memory.noext")}
    found = [
        f"{r['name']} ({r['server_cpu_cores']:.2f})"
        for r in records
        if "rate" in r
        and r["kind"] != "memory"
        and (r["name"] in full_load or r["kind"] in ("stream", "fanout"))
        and r["server_cpu_cores"] < 0.9
    ]
    if not found:
        return None
    return (
        "under full load but not CPU-bound (server cores in brackets): "
        + ", ".join(found)
        + "; compare these by server CPU per op rather than by rate."
    )


def replica_cpu_notes(records: list[Record], concurrencies: list[int]) -> list[str]:
    """Where the CPUs went in the replicas.send cases at full load (what limits them), and what pinning leaves
    the workers on this machine."""
    c = max(concurrencies)
    notes = []
    for r in records:
        if not r["name"].startswith("replicas.send.") or r.get("concurrency") != c or "rate" not in r:
            continue
        db = r.get("db_cpu_cores") or 0.0
        used = r["server_cpu_cores"] + db + r["load_cpu_cores"] + r["other_cpu_cores"]
        notes.append(
            f"{r['name']}: CPU-seconds per second: server {r['server_cpu_cores']:.2f}, PostgreSQL {db:.2f}, "
            f"load {r['load_cpu_cores']:.2f}, other {r['other_cpu_cores']:.2f} = {used:.2f} of {r['cpus']} CPUs"
        )
    workers = next((r for r in records if r["name"] == f"replicas.send.pg-workers2@{c}" and "rate" in r), None)
    if workers is not None and workers["server_cpus"] is not None and workers["server_cpus"] < workers["workers"]:
        notes.append(
            f"replicas.send.pg-workers2: pinned, the server side (both workers and PostgreSQL) has "
            f"{workers['server_cpus']} of the {workers['cpus']} CPUs, fewer than its {workers['workers']} workers: "
            "they take turns on it, so the ratio to one process shows what the second worker costs, not what it "
            "could gain; --no-pin lets them use every CPU (shared with the load generator and PostgreSQL)."
        )
    return notes


def _shown(value: float, figure: Record) -> str:
    if figure.get("unit") == "ms":
        return f"{value:.1f} ms"
    if figure.get("unit"):
        return f"{value:,.0f} {figure['unit']}"
    return f"{value * 100:+.1f}%" if figure.get("percent") else f"{value:.2f}x"


def push_cpu_notes(records: list[Record], concurrencies: list[int]) -> list[str]:
    """What limits the push cases at full load: where the CPUs went in their turns, and the server's CPU per
    request with and without push."""
    c = max(concurrencies)
    by_name = {r["name"]: r for r in records if "rate" in r}
    notes = []
    for name in (f"{PUSH_ON}@{c}", f"{PUSH_OFF}@{c}"):
        r = by_name.get(name)
        if r is None:
            continue
        receiver = r.get("receiver_cpu_cores", 0.0)
        used = r["server_cpu_cores"] + receiver + r["load_cpu_cores"] + r["other_cpu_cores"]
        notes.append(
            f"{name}: {r['rate']:,.0f} req/s; CPU-seconds per second in its turns: server {r['server_cpu_cores']:.2f}, "
            f"push receiver {receiver:.2f}, load {r['load_cpu_cores']:.2f}, other {r['other_cpu_cores']:.2f} = "
            f"{used:.2f} of {r['cpus']} CPUs; server CPU per request {_fmt(r['server_cpu_us'])} us in its turns, "
            f"{_fmt(r.get('server_cpu_us_whole'))} us over the whole job"
        )
    on = by_name.get(f"{PUSH_ON}@{c}")
    if on is not None and "push_expected" in on:
        notes.append(
            f"{PUSH_ON}@{c}: delivery p50 {on['push_p50_ms']:.2f} ms, p99 {on['push_p99_ms']:.2f} ms over "
            f"{on['push_latency_samples']:,} tasks; receiver {_fmt(on.get('receiver_cpu_us'))} us per notification; "
            f"{on['push_missing']} of {on['push_expected']:,} notifications missing, {on['push_duplicates']} duplicates"
        )
    return notes


def fixed_notes(records: list[Record], extra: Iterable[str]) -> list[str]:
    """`extra` (what the run left out), then how the figures are made (the replicas' and push cases' when
    measured)."""
    replicas = any(r["name"].startswith("replicas.") and "rate" in r for r in records)
    push = any(r["name"].startswith("push.") and "rate" in r for r in records)
    telemetry = any(r["name"].startswith("telemetry.") and "rate" in r for r in records)
    auth = any(r["name"].startswith("auth.") and "rate" in r for r in records)
    face = any(r["name"].startswith(tuple(family for family, _, _, _ in FACE_PAIRS)) and "rate" in r for r in records)
    return [
        *extra,
        *NOTES,
        *(REPLICA_NOTES if replicas else ()),
        *(PUSH_NOTES if push else ()),
        *(TELEMETRY_NOTES if telemetry else ()),
        *(AUTH_NOTES if auth else ()),
        *(FACE_NOTES if face else ()),
    ]


def _notes(records: list[Record], concurrencies: list[int], extra: Iterable[str]) -> list[str]:
    found = [
        n
        for n in (noise_note(records), ceiling_note(records, concurrencies), unsaturated_note(records, concurrencies))
        if n
    ]
    return (
        found
        + replica_cpu_notes(records, concurrencies)
        + push_cpu_notes(records, concurrencies)
        + telemetry_notes(records, concurrencies)
        + auth_notes(records, concurrencies)
        + face_notes(records, concurrencies)
        + fixed_notes(records, extra)
    )


def summary(records: list[Record], concurrencies: list[int], extra_notes: Iterable[str] = ()) -> str:
    found_ratios = ratios(records, concurrencies)
    found = targets(records, concurrencies)
    width = max([60] + [len(r["ratio"]) for r in found_ratios] + [len(t["target"]) for t in found])
    lines = ["", "Ratios (measured side by side in this run; per-cycle quartiles in brackets):"]
    for r in found_ratios:
        spread = "" if "quartiles" not in r else f"  [{_shown(r['quartiles'][0], r)} .. {_shown(r['quartiles'][1], r)}]"
        lines.append(f"  {r['ratio']:<{width}} {_shown(r['value'], r):>7}{spread}")
    if found:
        lines += ["", "Targets:"]
        for t in found:
            lines.append(f"  {t['target']:<{width}} {_shown(t['value'], t):>7}  {'met' if t['met'] else 'NOT met'}")
    lines += ["", "Notes:"] + [f"  - {n}" for n in _notes(records, concurrencies, extra_notes)]
    return "\n".join(lines)


def write_json(
    path: Path,
    meta: dict[str, Any],
    records: list[Record],
    concurrencies: list[int],
    extra_notes: Iterable[str] = (),
    growth: list[Record] | None = None,
) -> None:
    """The run's results, with the growth.* cases' records apart (`growth`, when any ran)."""
    document = {
        "meta": meta,
        "cases": records,
        "ratios": ratios(records, concurrencies),
        "targets": targets(records, concurrencies),
        "load_generator_ceiling": ceiling_note(records, concurrencies),
        "noise_warning": noise_note(records),
        "not_cpu_bound": unsaturated_note(records, concurrencies),
        "replicas": replica_cpu_notes(records, concurrencies),
        "push": push_cpu_notes(records, concurrencies),
        "telemetry": telemetry_notes(records, concurrencies),
        "auth": auth_notes(records, concurrencies),
        "faces": face_notes(records, concurrencies),
        "notes": fixed_notes(records, extra_notes),
        **({"growth": growth} if growth else {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
