"""The bench's results: the printed table, the side-by-side ratios, the targets of issue 4, the JSON file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Record = dict[str, Any]

NOTES = (
    "Every server runs in its own process on 127.0.0.1; load comes from closed-loop grpc.aio worker "
    "processes using our generated stubs; only calls that complete inside the measurement window count.",
    "server CPU is user+system time of the server process (all threads) from /proc/<pid>/stat over the "
    "window, per request (or per event); 'srv cores', 'load cores' (the load workers) and 'other' (every other "
    "process on the machine, from /proc/stat) are CPU-seconds per second (1.00 = one core busy); a busy "
    "'other' means a noisy neighbour.",
    "ext = the card declares one REQUIRED extension and every call requests it (a2a-extensions), so the "
    "extension interceptor negotiates, activates and echoes it (in the trailers, the default for unary calls; "
    "ext-headers echoes in the response headers too, as `--unary-echo headers` does). "
    "noext = the same server with negotiate_extensions=False (the interceptor is not in the chain), no "
    "extension declared and no header sent. Everything else (version check, validation, store, agent) is "
    "identical, so 1 - ext/noext is what the whole extension feature costs per call. The stream, fanout and "
    "memory cases run our server as configured by default (interceptor on, no extension declared).",
    "bare = a grpc.aio servicer returning a prebuilt Task (no interceptors, checks, store or agent): the "
    "ceiling for Python on this machine, and the load generator's own ceiling.",
    "sdk = the reference a2a-sdk gRPC server (GrpcHandler + DefaultRequestHandler + InMemoryTaskStore) with "
    "an echo agent, in its own venv, driven with the same load generator and the same wire.",
)


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


HEADER = (
    f"{'case':<26} {'conc':>5} {'rate':>10} {'unit':<9} {'p50 ms':>8} {'p99 ms':>8} "
    f"{'srv us/op':>10} {'srv cores':>9} {'load cores':>10} {'other':>6} {'errors':>6}"
)


def row(r: Record) -> list[str]:
    """The table line(s) of one record."""
    name = r["family"]
    if "skipped" in r or "failed" in r:
        word = "SKIPPED" if "skipped" in r else "FAILED"
        return [f"{name:<26} {_fmt(r.get('concurrency')):>5} {word}: {r.get('skipped') or r.get('failed')}"]
    if r["kind"] == "memory":
        return [
            f"{name:<26} {_fmt(r['concurrency']):>5} {_fmt(r['rate']):>10} {r['unit']:<9} "
            f"RSS idle {r['rss_idle_mb']:.1f} MiB, after {r['completed']:,} tasks {r['rss_after_mb']:.1f} MiB "
            f"({_fmt(r['bytes_per_task'])} B/task), listed {r['tasks_listed']:,}, errors {r['errors']}"
        ]
    lines = [
        f"{name:<26} {_fmt(r['concurrency']):>5} {_fmt(r['rate']):>10} {r['unit']:<9} "
        f"{_fmt(r['p50_ms'], 2):>8} {_fmt(r['p99_ms'], 2):>8} {_fmt(r['server_cpu_us']):>10} "
        f"{_fmt(r['server_cpu_cores'], 2):>9} {_fmt(r['load_cpu_cores'], 2):>10} "
        f"{_fmt(r['other_cpu_cores'], 2):>6} {r['errors']:>6}"
    ]
    if r["errors"]:
        lines.append(f"{'':<26}   first error: {r['first_error']}")
    return lines


def table(records: Iterable[Record]) -> str:
    lines = [HEADER, "-" * len(HEADER)]
    for r in records:
        lines += row(r)
    return "\n".join(lines)


def _rate(records: dict[str, Record], name: str) -> float | None:
    record = records.get(name)
    if record is None or "rate" not in record or not record["rate"]:
        return None
    return float(record["rate"])


def _ratio(records: dict[str, Record], top: str, bottom: str) -> float | None:
    a, b = _rate(records, top), _rate(records, bottom)
    return a / b if a is not None and b is not None else None


def ratios(records: list[Record], concurrencies: list[int]) -> list[Record]:
    by_name = {r["name"]: r for r in records}
    out: list[Record] = []
    for c in concurrencies:
        for store in ("memory", "sqlite"):
            for ext in ("ext", "noext"):
                ours = f"send.{store}.{ext}@{c}"
                out.append({"ratio": f"{ours} / sdk", "value": _ratio(by_name, ours, f"send.sdk@{c}")})
                out.append({"ratio": f"{ours} / bare", "value": _ratio(by_name, ours, f"send.bare@{c}")})
            with_ext = _ratio(by_name, f"send.{store}.ext@{c}", f"send.{store}.noext@{c}")
            out.append(
                {
                    "ratio": f"extension overhead send.{store}@{c} (1 - ext/noext)",
                    "value": None if with_ext is None else 1 - with_ext,
                    "percent": True,
                }
            )
        with_headers = _ratio(by_name, f"send.memory.ext-headers@{c}", f"send.memory.noext@{c}")
        out.append(
            {
                "ratio": f"extension overhead send.memory@{c}, unary echo in headers too (1 - ext-headers/noext)",
                "value": None if with_headers is None else 1 - with_headers,
                "percent": True,
            }
        )
        out.append({"ratio": f"send.sdk@{c} / bare", "value": _ratio(by_name, f"send.sdk@{c}", f"send.bare@{c}")})
    for top, bottom in (
        ("stream.ours", "stream.sdk"),
        ("stream.ours", "stream.bare"),
        ("stream.sdk", "stream.bare"),
        ("fanout.ours", "fanout.sdk"),
    ):
        out.append({"ratio": f"{top} / {bottom}", "value": _ratio(by_name, top, bottom)})
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
        out.append({"ratio": f"server CPU per op: {other} / {ours}", "value": _cpu_ratio(by_name, other, ours)})
    return [r for r in out if r["value"] is not None]


def _cpu_ratio(records: dict[str, Record], top: str, bottom: str) -> float | None:
    """How many times more server CPU per request (or event) `top` spends than `bottom`."""
    a, b = (records.get(name, {}).get("server_cpu_us") for name in (top, bottom))
    return a / b if a and b else None


def targets(records: list[Record], concurrencies: list[int]) -> list[Record]:
    """Issue 4's acceptance figures, at the highest concurrency measured (64 in a full run)."""
    by_name = {r["name"]: r for r in records}
    c = max(concurrencies)
    checks = []
    for ext in ("ext", "noext"):
        checks += [
            (f"send.memory.{ext}@{c} >= 4x sdk", _ratio(by_name, f"send.memory.{ext}@{c}", f"send.sdk@{c}"), 4.0),
            (f"send.memory.{ext}@{c} >= 0.5x bare", _ratio(by_name, f"send.memory.{ext}@{c}", f"send.bare@{c}"), 0.5),
            (f"send.sqlite.{ext}@{c} >= 3x sdk", _ratio(by_name, f"send.sqlite.{ext}@{c}", f"send.sdk@{c}"), 3.0),
        ]
    out: list[Record] = []
    for name, value, wanted in checks:
        if value is not None:
            out.append({"target": name, "value": value, "met": value >= wanted})
    for store, ext in (("memory", "ext"), ("sqlite", "ext")):
        kept = _ratio(by_name, f"send.{store}.{ext}@{c}", f"send.{store}.noext@{c}")
        if kept is not None:
            name = f"extension overhead send.{store}.{ext}@{c} < 10%"
            out.append({"target": name, "value": 1 - kept, "met": 1 - kept < 0.10})
    return out


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


def summary(records: list[Record], concurrencies: list[int]) -> str:
    lines = ["", "Ratios (measured side by side in this run):"]
    for r in ratios(records, concurrencies):
        shown = f"{r['value'] * 100:+.1f}%" if r.get("percent") else f"{r['value']:.2f}x"
        lines.append(f"  {r['ratio']:<60} {shown:>9}")
    found = targets(records, concurrencies)
    if found:
        lines += ["", "Issue 4 targets:"]
        for t in found:
            shown = f"{t['value'] * 100:.1f}%" if "overhead" in t["target"] else f"{t['value']:.2f}x"
            lines.append(f"  {t['target']:<60} {shown:>9}  {'met' if t['met'] else 'NOT met'}")
    found_notes = [
        n
        for n in (noise_note(records), ceiling_note(records, concurrencies), unsaturated_note(records, concurrencies))
        if n
    ]
    lines += ["", "Notes:"] + [f"  - {n}" for n in found_notes + list(NOTES)]
    return "\n".join(lines)


def write_json(path: Path, meta: dict[str, Any], records: list[Record], concurrencies: list[int]) -> None:
    document = {
        "meta": meta,
        "cases": records,
        "ratios": ratios(records, concurrencies),
        "targets": targets(records, concurrencies),
        "load_generator_ceiling": ceiling_note(records, concurrencies),
        "noise_warning": noise_note(records),
        "not_cpu_bound": unsaturated_note(records, concurrencies),
        "notes": list(NOTES),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
