"""The send.http.* cases' ratios and target: each HTTP binding of ours against the reference SDK's own server of
that binding (the same interleaved turns), and against our gRPC path (send.memory.ext: what the face costs)."""

from __future__ import annotations

from typing import Any

Record = dict[str, Any]
BINDINGS = ("jsonrpc", "rest")
SDK_FLOOR = 3.0  # the aim: at least 3x the SDK's rate on each binding


def http_ratios(records: dict[str, Record], c: int, entry: Any, paired: Any) -> list[Record]:
    out: list[Record] = []
    for binding in BINDINGS:
        ours, sdk = f"send.http.{binding}.ours@{c}", f"send.http.{binding}.sdk@{c}"
        out.append(entry(f"{ours} / sdk", paired(records, ours, sdk)))
        out.append(entry(f"{ours} / send.memory.ext", paired(records, ours, f"send.memory.ext@{c}")))
        out.append(entry(f"server CPU per op: {sdk} / ours", paired(records, sdk, ours, "server_cpu_us")))
    return out


def http_targets(records: dict[str, Record], c: int, ratio: Any) -> list[Record]:
    out: list[Record] = []
    for binding in BINDINGS:
        ours, sdk = f"send.http.{binding}.ours@{c}", f"send.http.{binding}.sdk@{c}"
        value = ratio(records, ours, sdk)
        if value is not None:
            out.append({"target": f"{ours} >= {SDK_FLOOR:g}x sdk", "value": value, "met": value >= SDK_FLOOR})
    return out
